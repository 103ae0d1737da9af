// The live bars of one symbol. Boundaries (../market/bars.ts) are computed once per bar, not per
// tick: a tick only compares its time with the precomputed end of the M1 bar (the earliest of all ends).
import { barRangeUtc } from '../market/bars.js';
import type { ServerClock } from '../market/serverClock.js';
import { TIMEFRAMES, type Candle } from '../market/timeframes.js';
import type { Ohlc, TickSource } from './feed.js';

export const TF_COUNT = TIMEFRAMES.length;

export function toCandle(startUtc: number, clock: ServerClock, o: Ohlc, scale: number): Candle {
  return {
    time: Math.floor(startUtc / 1000),
    serverTime: Math.floor(clock.toServer(startUtc) / 1000),
    open: o.open / scale,
    high: o.high / scale,
    low: o.low / scale,
    close: o.close / scale,
    ticks: o.n,
    volume: o.n,
  };
}

/** Called when a bar is finished (closed = true) or updated; only if someone listens. */
export type BarListener = (tfIndex: number, startUtc: number, o: Ohlc, closed: boolean) => void;

/** The current bar of the timeframes M1..TIMEFRAMES[active-1] of one symbol, updated per
 *  tick. Numbers only on the hot path; Candle objects are built on demand. Timeframes are
 *  switched on in order and lazily, because seeding a bar computes its history so far
 *  (a month for MN1, a minute for M1). */
export class LiveBars {
  readonly start = new Float64Array(TF_COUNT);
  readonly end = new Float64Array(TF_COUNT);
  readonly bars: Ohlc[] = TIMEFRAMES.map(() => ({ open: 0, high: 0, low: 0, close: 0, n: 0, lastTime: -1 }));
  /** Earliest bar end over all timeframes (always the M1 end). */
  private nextEnd = -Infinity;
  /** Timeframes 0..active-1 are maintained. */
  active = 0;
  readonly listeners = new Set<BarListener>();

  constructor(
    private readonly clock: ServerClock,
    private readonly feed: TickSource,
  ) {}

  /** Maintain timeframes up to index k: seed each newly active bar containing `utcMs` with
   *  the ticks at or before it (pure feed aggregate), so live bars agree with history. */
  activate(k: number, utcMs: number): void {
    for (; this.active <= k && this.active < TF_COUNT; this.active++) this.openBar(this.active, utcMs, true);
    this.nextEnd = this.end[0]!;
  }

  private openBar(k: number, utcMs: number, withHistory: boolean): void {
    const [s, e] = barRangeUtc(TIMEFRAMES[k]!, utcMs, this.clock);
    this.start[k] = s;
    this.end[k] = e;
    const bar = this.bars[k]!;
    bar.n = 0;
    bar.lastTime = -1;
    if (withHistory) this.feed.aggregate(s, utcMs + 1, bar);
  }

  /** Hot path: one tick (bid in points). */
  onTick(t: number, bid: number): void {
    if (t >= this.nextEnd) this.roll(t);
    const bars = this.bars;
    const n = this.active;
    for (let k = 0; k < n; k++) {
      const b = bars[k]!;
      if (b.n === 0) {
        b.open = b.high = b.low = bid;
      } else if (bid > b.high) b.high = bid;
      else if (bid < b.low) b.low = bid;
      b.close = bid;
      b.n++;
      b.lastTime = t;
    }
    if (this.listeners.size > 0) for (const l of this.listeners) for (let k = 0; k < n; k++) l(k, this.start[k]!, bars[k]!, false);
  }

  private roll(t: number): void {
    for (let k = 0; k < this.active; k++) {
      if (t < this.end[k]!) continue;
      const bar = this.bars[k]!;
      if (bar.n > 0) for (const l of this.listeners) l(k, this.start[k]!, bar, true);
      this.openBar(k, t, false);
    }
    this.nextEnd = this.end[0]!;
  }
}
