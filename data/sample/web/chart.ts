/** Draws a station's tide curve on a canvas, refreshed from the API. */

import { defaultClient, TidewaterClient } from "./api";
import type { Reading, TideSeries } from "./models";
import { isFlagged } from "./models";

export interface ChartStyle {
  lineColour: string;
  flaggedColour: string;
  padding: number;
}

const DEFAULT_STYLE: ChartStyle = { lineColour: "#1f6feb", flaggedColour: "#d1242f", padding: 24 };

/** Scales water levels (metres) to canvas rows, highest level at the top. */
export const scaleLevels = (levels: number[], height: number, padding: number): number[] => {
  const min = Math.min(...levels);
  const span = Math.max(...levels) - min || 1;
  return levels.map((l) => height - padding - ((l - min) / span) * (height - 2 * padding));
};

export class TideChart {
  private timer?: number;

  constructor(
    private readonly canvas: HTMLCanvasElement,
    private readonly client: TidewaterClient = defaultClient(),
    private readonly style: ChartStyle = DEFAULT_STYLE,
  ) {}

  /** Loads the last 24 hours of one station and draws them. */
  async show(stationId: string): Promise<void> {
    const to = new Date();
    const from = new Date(to.getTime() - 24 * 3600 * 1000);
    const series = await this.client.series(stationId, from.toISOString(), to.toISOString());
    this.draw(series);
  }

  /** Redraws every `minutes` minutes until stop() is called. */
  follow(stationId: string, minutes = 10): void {
    this.stop();
    this.timer = window.setInterval(() => { void this.show(stationId); }, minutes * 60_000);
  }

  stop(): void {
    if (this.timer !== undefined) {
      window.clearInterval(this.timer);
    }
  }

  private draw(series: TideSeries): void {
    const ctx = this.canvas.getContext("2d");
    const readings: Reading[] = series.clean();
    if (!ctx || readings.length === 0) {
      return;
    }
    const pad = this.style.padding;
    const ys = scaleLevels(readings.map((r) => r.waterLevel), this.canvas.height, pad);
    const step = (this.canvas.width - 2 * pad) / Math.max(ys.length - 1, 1);
    ctx.strokeStyle = this.style.lineColour; // a "}" here must not end the class
    ctx.beginPath();
    ys.forEach((y, i) => ctx.lineTo(pad + i * step, y));
    ctx.stroke();
    ctx.fillStyle = this.style.flaggedColour;
    const flagged = series.all().filter(isFlagged);
    flagged.forEach((r, i) => ctx.fillText(`⚑ ${r.flags.join(",")} }`, pad, pad + 12 * i));
  }
}
