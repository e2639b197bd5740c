/**
 * Data model of the Tidewater dashboard: the JSON shapes served by the
 * Tidewater export API, mirroring tidewater.models.Reading and TideSeries.
 */

/** Quality flags set by the Tidewater processing steps. */
export type QualityFlag = "spike" | "gap_filled" | "drift_corrected" | "calibrated";

/** One sample from a tide gauge, water level in metres above the station datum. */
export interface Reading {
  timestamp: string;
  waterLevel: number;
  stationId: string;
  pressureHpa?: number;
  temperatureC?: number;
  flags: QualityFlag[];
}

/** A station as listed by the API. */
export interface Station {
  id: string;
  name: string;
  gaugeType: "pressure" | "radar" | "float";
  datum: string;
}

/** A time-ordered series of readings from one station. */
export class TideSeries {
  private readonly readings: Reading[];

  constructor(public readonly stationId: string, readings: Reading[] = []) {
    this.readings = [...readings].sort((a, b) => a.timestamp.localeCompare(b.timestamp));
  }

  get length(): number {
    return this.readings.length;
  }

  /** Every reading, flagged or not. */
  all(): Reading[] {
    return [...this.readings];
  }

  /** Readings no processing step has flagged. */
  clean(): Reading[] {
    return this.readings.filter((r) => !isFlagged(r));
  }

  /** Lowest and highest water level, or null for an empty series. */
  range(): { min: number; max: number } | null {
    if (this.readings.length === 0) {
      return null;
    }
    const levels = this.readings.map((r) => r.waterLevel);
    return { min: Math.min(...levels), max: Math.max(...levels) };
  }
}

/** True when a processing step modified or doubted the reading. */
export const isFlagged = (r: Reading): boolean => r.flags.length > 0;
