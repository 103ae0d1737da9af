// Replay of recorded ticks (CSV: time,bid,ask[,volume]; time as epoch ms, epoch seconds or
// ISO 8601 UTC) instead of the generated walk. The recording is mapped onto the simulator
// clock: the first tick plays at the market start, later ones at (t - t0) / speed after it,
// so 1x replays in real time and speed 60 plays an hour per minute. Pure: the CSV text is
// passed in (config.ts reads the files).
import { emptyOhlc, mergeOhlc, type Ohlc, type TickSource } from './feed.js';

export interface ReplayTicks {
  readonly time: Float64Array;
  readonly bid: Float64Array;
  readonly ask: Float64Array;
}

function parseTime(field: string): number {
  const f = field.trim();
  if (/^\d+(\.\d+)?$/.test(f)) {
    const n = Number(f);
    return n < 1e11 ? n * 1000 : n;
  }
  const t = Date.parse(/[zZ]|[+-]\d\d:?\d\d$/.test(f) ? f : `${f}Z`);
  if (Number.isNaN(t)) throw new Error(`bad tick time ${JSON.stringify(field)}`);
  return t;
}

/** Parse CSV ticks into points (integers at `digits`). A header line is skipped. */
export function parseTickCsv(text: string, digits: number): ReplayTicks {
  const scale = 10 ** digits;
  const times: number[] = [];
  const bids: number[] = [];
  const asks: number[] = [];
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const [t, b, a] = line.split(/[,;\t]/);
    if (t === undefined || b === undefined || a === undefined) throw new Error(`bad tick line ${JSON.stringify(line)}`);
    if (times.length === 0 && Number.isNaN(Number(b))) continue; // header
    const time = parseTime(t);
    if (times.length > 0 && time < times[times.length - 1]!) throw new Error(`ticks out of order at ${JSON.stringify(line)}`);
    times.push(time);
    bids.push(Math.round(Number(b) * scale));
    asks.push(Math.round(Number(a) * scale));
  }
  return { time: Float64Array.from(times), bid: Float64Array.from(bids), ask: Float64Array.from(asks) };
}

export class ReplayFeed implements TickSource {
  readonly scale: number;
  bidPts = 0;
  askPts = 0;
  timeMsc = -1;
  private startUtc = 0;
  private next = 0;

  constructor(
    private readonly ticks: ReplayTicks,
    digits: number,
    private readonly speed: number,
  ) {
    this.scale = 10 ** digits;
  }

  /** Simulator-clock time of recorded tick i. */
  private mapped(i: number): number {
    return this.startUtc + Math.floor((this.ticks.time[i]! - this.ticks.time[0]!) / this.speed);
  }

  /** The recording's first tick plays at `originMs` (default `utcMs`: the market's start); the
   *  cursor is put at `utcMs`: the last tick at or before it is the initial quote (the first one if
   *  none has played yet), the ones before it are not emitted again. */
  start(utcMs: number, originMs = utcMs): void {
    this.startUtc = originMs;
    const n = this.ticks.time.length;
    let i = 0;
    while (i + 1 < n && this.mapped(i + 1) <= utcMs) i++;
    if (n > 0) this.emitAt(i);
    this.next = n > 0 ? i + 1 : 0;
  }

  private emitAt(i: number): void {
    this.bidPts = this.ticks.bid[i]!;
    this.askPts = this.ticks.ask[i]!;
    this.timeMsc = this.mapped(i);
  }

  advanceTo(utcMs: number, onTick: () => void): void {
    const n = this.ticks.time.length;
    while (this.next < n && this.mapped(this.next) <= utcMs) {
      this.emitAt(this.next++);
      onTick();
    }
  }

  aggregate(fromMs: number, toMs: number, out: Ohlc = emptyOhlc()): Ohlc {
    const n = this.ticks.time.length;
    // Ticks are few compared with generated feeds; a linear scan from a binary search.
    let lo = 0;
    let hi = n;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.mapped(mid) < fromMs) lo = mid + 1;
      else hi = mid;
    }
    for (let i = lo; i < n; i++) {
      const t = this.mapped(i);
      if (t >= toMs) break;
      const v = this.ticks.bid[i]!;
      mergeOhlc(out, v, v, v, v, 1, t);
    }
    return out;
  }
}
