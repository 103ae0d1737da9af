// Bar boundaries on the broker server clock and the live bars of one symbol.
// D1 opens at server midnight, W1 on Sunday server midnight, MN1 on the 1st of the month
// (server calendar). Boundaries are computed once per bar, not per tick: a tick only
// compares its time with the precomputed end of the M1 bar (the earliest of all ends).
import { dstInterval, fromServerTime, type ServerClock } from '../broker/time.js';
import { TIMEFRAMES, TIMEFRAME_MINUTES, type Candle, type Timeframe } from '../broker/types.js';
import type { Ohlc, TickSource } from './feed.js';

const DAY = 86_400_000;
export const TF_COUNT = TIMEFRAMES.length;

/** Server-clock ms of the bar containing server-clock instant s. */
export function barStartServer(tf: Timeframe, s: number): number {
  switch (tf) {
    case 'W1': {
      const d = Math.floor(s / DAY);
      const dow = (d + 4) % 7; // 1970-01-01 was a Thursday
      return (d - dow) * DAY;
    }
    case 'MN1': {
      const date = new Date(s);
      return Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), 1);
    }
    default: {
      const len = TIMEFRAME_MINUTES[tf] * 60_000;
      return s - (((s % len) + len) % len);
    }
  }
}

/** Server-clock ms where the bar after the one starting at `startServer` begins. */
export function nextBarServer(tf: Timeframe, startServer: number): number {
  if (tf === 'MN1') {
    const date = new Date(startServer);
    return Date.UTC(date.getUTCFullYear(), date.getUTCMonth() + 1, 1);
  }
  return startServer + TIMEFRAME_MINUTES[tf] * 60_000;
}

/** [startUtc, endUtc) of the bar containing a UTC instant. When DST ends the server clock repeats
 *  an hour; a server time maps to its first occurrence, so the bar open just before the switch runs
 *  on to the first bar boundary after it (as bars are walked forward, from each end to the next) and
 *  an instant in the repeated hour belongs to that bar, not to one that ended an hour earlier. */
export function barRangeUtc(tf: Timeframe, utcMs: number, clock: ServerClock): [number, number] {
  const startS = barStartServer(tf, clock.toServer(utcMs));
  const endS = nextBarServer(tf, startS);
  const end = fromServerTime(endS, clock.tz);
  if (end <= utcMs) {
    // In the repeated hour: the bar is the one open at the last instant before the clock went back.
    const dst = dstInterval(clock.tz.dst, new Date(utcMs).getUTCFullYear());
    if (dst !== null && utcMs >= dst[1]) return barRangeUtc(tf, dst[1] - 1, clock);
  }
  return [fromServerTime(startS, clock.tz), end];
}

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
