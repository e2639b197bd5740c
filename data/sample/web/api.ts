/** HTTP client for the Tidewater export API used by the dashboard. */

import { Reading, Station, TideSeries } from "./models";

export interface ApiOptions {
  baseUrl: string;
  timeoutMs?: number;
}

/** A non-2xx answer from the API. */
export class ApiError extends Error {
  constructor(public readonly status: number, message: string) {
    super(`${status}: ${message}`);
  }
}

/** Fetches stations and readings; every method throws ApiError on failure. */
export class TidewaterClient {
  private readonly baseUrl: string;
  private readonly timeoutMs: number;

  constructor(options: ApiOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.timeoutMs = options.timeoutMs ?? 10_000;
  }

  async stations(): Promise<Station[]> {
    return this.get<Station[]>("/stations");
  }

  /** Readings of one station between two ISO timestamps (inclusive). */
  async series(stationId: string, from: string, to: string): Promise<TideSeries> {
    const query = `?from=${encodeURIComponent(from)}&to=${encodeURIComponent(to)}`;
    const readings = await this.get<Reading[]>(`/stations/${stationId}/readings${query}`);
    return new TideSeries(stationId, readings);
  }

  private async get<T>(path: string): Promise<T> {
    const response = await fetch(`${this.baseUrl}${path}`, {
      signal: AbortSignal.timeout(this.timeoutMs),
    });
    if (!response.ok) {
      throw new ApiError(response.status, await response.text());
    }
    return (await response.json()) as T;
  }
}

/** A client for the API the dashboard itself is served from. */
export const defaultClient = (): TidewaterClient =>
  new TidewaterClient({ baseUrl: `${window.location.origin}/api` });
