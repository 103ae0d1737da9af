// Deterministic tick feed of one symbol: every tick is a pure function of (seed, symbol,
// segment index, tick index), so any instance - another worker thread, a restarted
// process - computes the same ticks for the same time without replaying from an origin.
//
// Construction of the price path (all prices in integer points):
// 1. Time is cut into segments of `segmentMs` (1 s by default). Segment i starts at i*S.
// 2. Segment start prices p_i come from blocks of 64 segments: the block ends are
//    "anchors" given by multi-octave value noise over the block index (non-cumulative, so
//    O(1) to evaluate anywhere, yet random-walk-like over hours to months); inside a block
//    a seeded Brownian bridge joins the two anchors.
// 3. A segment holds K = ticksPerSecond*S/1000 ticks. Tick 0 is p_i. Two designated ticks
//    carry the segment's high and low; every other tick interpolates p_i -> p_{i+1} with
//    noise and is clamped to [low, high]. So a segment's OHLC is known in O(1) without
//    enumerating its ticks, which is how history bars are computed cheaply and still agree
//    exactly with bars built live from the same ticks.
// Ticks are only emitted while the symbol's quote session is open (on the server clock).
import { hashString, Rng } from './hash.js';
import { minuteOfWeek } from './sessions.js';
import type { ServerClock } from '../market/serverClock.js';

const BLOCK = 64;
const OCTAVES = 17;
const HOUR = 3_600_000;

export interface FeedParams {
  readonly seed: number;
  readonly serverName: string;
  readonly symbol: string;
  readonly digits: number;
  readonly basePrice: number;
  /** Points per sqrt(second). */
  readonly volatility: number;
  readonly spread: number;
  readonly ticksPerSecond: number;
  readonly segmentMs: number;
}

/** Aggregate of ticks over a range, in points. n = 0 means no ticks. */
export interface Ohlc {
  open: number;
  high: number;
  low: number;
  close: number;
  n: number;
  /** Time of the last tick (UTC ms), -1 if none. */
  lastTime: number;
}
export function emptyOhlc(): Ohlc {
  return { open: 0, high: 0, low: 0, close: 0, n: 0, lastTime: -1 };
}

// Local copies of the hash helpers: this is the hottest code of the simulator and
// module-local functions inline reliably.
function hash3(a: number, b: number, c: number): number {
  let h = a ^ 0x9e3779b9;
  h = fmix(h);
  h = fmix(h ^ (b >>> 0) ^ Math.imul((b / 4294967296) | 0, 0x27d4eb2f));
  return fmix(h ^ Math.imul(c, 0x165667b1));
}
function fmix(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}
/** Hash of tick j of the loaded segment. */
function tickHash(segHash: number, j: number): number {
  return fmix(segHash ^ Math.imul(j + 1, 0x165667b1));
}
function unit(h: number): number {
  return h / 4294967296;
}

/** What the market needs from a symbol's tick stream (generated or replayed). The last
 *  emitted tick lives in the mutable fields so the hot path allocates nothing. */
export interface TickSource {
  readonly scale: number;
  bidPts: number;
  askPts: number;
  /** UTC ms of the last tick, -1 if none yet. */
  timeMsc: number;
  /** `originMs`: a replayed recording's first tick plays then (generated feeds ignore it). */
  start(utcMs: number, originMs?: number): void;
  advanceTo(utcMs: number, onTick: () => void): void;
  aggregate(fromMs: number, toMs: number, out?: Ohlc): Ohlc;
}

export class SymbolFeed implements TickSource {
  readonly scale: number;
  readonly ticksPerSegment: number;
  private readonly seedSym: number;
  private readonly segMs: number;
  private readonly sigmaSeg: number;
  private readonly basePts: number;
  private readonly amps: Float64Array;
  /** 1 / 2^o: a variable-exponent `**` costs ~90 ns, far more than the rest of anchor(). */
  private readonly invScale: Float64Array;
  // block cache
  private blockIndex = -1;
  private readonly block = new Float64Array(BLOCK + 1);
  private readonly walk = new Float64Array(BLOCK + 1);
  // per-segment scratch (valid for `segCached`)
  private segCached = -1;
  /** Hash of (seed, symbol, segment); every per-tick hash is one mix of it. */
  private segHash = 0;
  private segOpen = 0;
  private segHi = 0;
  private segLo = 0;
  private jHi = 0;
  private jLo = 0;
  private pa = 0;
  private pb = 0;
  private readonly hourCache = new Map<number, Ohlc>();

  // live cursor: next tick to emit is (curSeg, curJ)
  private curSeg = 0;
  private curJ = 0;
  /** Last emitted (or, before any, last historical) tick; points and UTC ms. */
  bidPts = 0;
  askPts = 0;
  timeMsc = -1;

  constructor(
    readonly params: FeedParams,
    private readonly clock: ServerClock,
    private readonly quoteOpen: Uint8Array,
  ) {
    this.scale = 10 ** params.digits;
    this.segMs = params.segmentMs;
    this.ticksPerSegment = Math.max(1, Math.round((params.ticksPerSecond * params.segmentMs) / 1000));
    this.seedSym = hash3(params.seed, hashString(params.serverName), hashString(params.symbol));
    this.sigmaSeg = params.volatility * Math.sqrt(params.segmentMs / 1000);
    this.basePts = Math.round(params.basePrice * this.scale);
    this.amps = new Float64Array(OCTAVES);
    this.invScale = new Float64Array(OCTAVES);
    for (let o = 0; o < OCTAVES; o++) this.invScale[o] = 1 / 2 ** o;
    for (let o = 0; o < OCTAVES; o++) this.amps[o] = 0.5 * this.sigmaSeg * Math.sqrt(BLOCK) * Math.sqrt(2 ** o);
  }

  // ---- pure price path -------------------------------------------------------------------

  private anchor(k: number): number {
    let v = this.basePts;
    for (let o = 0; o < OCTAVES; o++) {
      const x = k * this.invScale[o]!;
      const k0 = Math.floor(x);
      const f = x - k0;
      const s = f * f * (3 - 2 * f);
      const r0 = unit(hash3(this.seedSym, k0, o)) * 2 - 1;
      const r1 = unit(hash3(this.seedSym, k0 + 1, o)) * 2 - 1;
      v += this.amps[o]! * (r0 + (r1 - r0) * s);
    }
    return Math.max(Math.round(v), Math.round(this.basePts * 0.2));
  }

  private loadBlock(k: number): void {
    const a0 = this.anchor(k);
    const a1 = this.anchor(k + 1);
    const rng = new Rng(hash3(this.seedSym, k, 0x51ed));
    const w = this.walk;
    w[0] = 0;
    for (let j = 1; j <= BLOCK; j++) w[j] = w[j - 1]! + rng.normal() * this.sigmaSeg;
    const wEnd = w[BLOCK]!;
    const floor = Math.round(this.basePts * 0.1);
    for (let j = 0; j <= BLOCK; j++) {
      const t = j / BLOCK;
      this.block[j] = Math.max(floor, Math.round(a0 + (a1 - a0) * t + w[j]! - t * wEnd));
    }
    this.block[0] = a0;
    this.block[BLOCK] = a1;
    this.blockIndex = k;
  }

  /** Price (points) at the start of segment i. */
  segmentStart(i: number): number {
    const k = Math.floor(i / BLOCK);
    if (k !== this.blockIndex) this.loadBlock(k);
    return this.block[i - k * BLOCK]!;
  }

  private loadSegment(i: number): void {
    if (this.segCached === i) return;
    const pa = this.segmentStart(i);
    const pb = this.segmentStart(i + 1);
    this.pa = pa;
    this.pb = pb;
    const K = this.ticksPerSegment;
    const sh = hash3(this.seedSym, i, 0x51);
    this.segHash = sh;
    const hExt = fmix(sh ^ 0x7fffff01);
    const half = this.sigmaSeg * 0.5;
    this.segHi = Math.max(pa, pb) + Math.floor(((hExt >>> 16) / 65536) * half);
    this.segLo = Math.min(pa, pb) - Math.floor(((hExt & 0xffff) / 65536) * half);
    if (K >= 2) {
      const h = fmix(sh ^ 0x7fffff03);
      this.jHi = 1 + (h % (K - 1));
      this.jLo = K >= 3 ? 1 + ((this.jHi + ((h >>> 16) % (K - 2))) % (K - 1)) : -1;
    } else {
      this.jHi = -1;
      this.jLo = -1;
    }
    const mow = minuteOfWeek(this.clock.toServer(i * this.segMs));
    this.segOpen = this.quoteOpen[mow]!;
    this.segCached = i;
  }

  /** Bid (points) of tick j of the loaded segment, given its hash h. */
  private tickValue(j: number, h: number): number {
    if (j === 0) return this.pa;
    if (j === this.jHi) return this.segHi;
    if (j === this.jLo) return this.segLo;
    const K = this.ticksPerSegment;
    const v = Math.round(this.pa + ((this.pb - this.pa) * j) / K + (unit(h) - 0.5) * this.sigmaSeg * 0.7);
    return v > this.segHi ? this.segHi : v < this.segLo ? this.segLo : v;
  }

  private tickTime(i: number, j: number, h: number): number {
    if (j === 0) return i * this.segMs;
    return i * this.segMs + Math.floor(((j + (h & 0xff) * (0.8 / 256)) * this.segMs) / this.ticksPerSegment);
  }

  private tickSpread(h: number): number {
    const s = this.params.spread + ((h >>> 8) & 3) - 1;
    return s < 0 ? 0 : s;
  }

  /** OHLC of a whole segment (session-closed segments have n = 0). */
  private segmentOhlc(i: number, out: Ohlc): void {
    this.loadSegment(i);
    if (!this.segOpen) return;
    const K = this.ticksPerSegment;
    let hi: number;
    let lo: number;
    let close: number;
    if (K === 1) {
      hi = lo = close = this.pa;
    } else if (K === 2) {
      close = this.segHi;
      hi = Math.max(this.pa, close);
      lo = Math.min(this.pa, close);
    } else {
      hi = this.segHi;
      lo = this.segLo;
      close = this.tickValue(K - 1, tickHash(this.segHash, K - 1));
    }
    const lastTime = this.tickTime(i, K - 1, tickHash(this.segHash, K - 1));
    mergeOhlc(out, this.pa, hi, lo, close, K, lastTime);
  }

  /** Ticks of segment i with fromMs <= time < toMs, enumerated. */
  private partialSegment(i: number, fromMs: number, toMs: number, out: Ohlc): void {
    this.loadSegment(i);
    if (!this.segOpen) return;
    for (let j = 0; j < this.ticksPerSegment; j++) {
      const h = tickHash(this.segHash, j);
      const t = this.tickTime(i, j, h);
      if (t >= toMs) break;
      if (t < fromMs) continue;
      const v = this.tickValue(j, h);
      mergeOhlc(out, v, v, v, v, 1, t);
    }
  }

  /** Aggregate of all ticks with fromMs <= time < toMs. Pure; hours are cached. */
  aggregate(fromMs: number, toMs: number, out: Ohlc = emptyOhlc()): Ohlc {
    const S = this.segMs;
    let t = fromMs;
    while (t < toMs) {
      if (t % HOUR === 0 && t + HOUR <= toMs) {
        const hour = this.hourOhlc(t / HOUR);
        if (hour.n > 0) mergeOhlc(out, hour.open, hour.high, hour.low, hour.close, hour.n, hour.lastTime);
        t += HOUR;
        continue;
      }
      const i = Math.floor(t / S);
      const segEnd = (i + 1) * S;
      if (t === i * S && segEnd <= toMs) this.segmentOhlc(i, out);
      else this.partialSegment(i, t, Math.min(segEnd, toMs), out);
      t = segEnd;
    }
    return out;
  }

  private hourOhlc(hour: number): Ohlc {
    let o = this.hourCache.get(hour);
    if (o) return o;
    o = emptyOhlc();
    const S = this.segMs;
    const first = (hour * HOUR) / S;
    const n = HOUR / S;
    for (let i = first; i < first + n; i++) this.segmentOhlc(i, o);
    if (this.hourCache.size > 20_000) this.hourCache.clear();
    this.hourCache.set(hour, o);
    return o;
  }

  /** The last tick at or before utcMs (searching back up to `maxBackMs`), or false. Sets
   *  bidPts/askPts/timeMsc. */
  private seekLastTick(utcMs: number, maxBackMs: number): boolean {
    const S = this.segMs;
    for (let i = Math.floor(utcMs / S); i * S > utcMs - maxBackMs; i--) {
      this.loadSegment(i);
      if (!this.segOpen) continue;
      for (let j = this.ticksPerSegment - 1; j >= 0; j--) {
        const h = tickHash(this.segHash, j);
        const t = this.tickTime(i, j, h);
        if (t > utcMs) continue;
        this.bidPts = this.tickValue(j, h);
        this.askPts = this.bidPts + this.tickSpread(h);
        this.timeMsc = t;
        return true;
      }
    }
    return false;
  }

  // ---- live cursor ------------------------------------------------------------------------

  /** Position the live cursor just after `utcMs`: ticks at or before it are history. The
   *  current quote becomes the last tick at or before it (looking back up to 4 days to
   *  cover weekends). */
  start(utcMs: number): void {
    if (!this.seekLastTick(utcMs, 4 * 86_400_000)) {
      // Closed for longer than the look-back: quote the path price without a tick time.
      this.bidPts = this.segmentStart(Math.floor(utcMs / this.segMs));
      this.askPts = this.bidPts + this.params.spread;
      this.timeMsc = -1;
    }
    const S = this.segMs;
    this.curSeg = Math.floor(utcMs / S);
    this.curJ = 0;
    this.loadSegment(this.curSeg);
    while (this.curJ < this.ticksPerSegment) {
      const h = tickHash(this.segHash, this.curJ);
      if (this.tickTime(this.curSeg, this.curJ, h) > utcMs) break;
      this.curJ++;
    }
  }

  /** Emit, in order, every tick with time <= utcMs not emitted yet. For each tick the
   *  fields bidPts/askPts/timeMsc are set and `onTick` is called (no allocation). */
  advanceTo(utcMs: number, onTick: () => void): void {
    const S = this.segMs;
    const K = this.ticksPerSegment;
    while (this.curSeg * S <= utcMs) {
      const i = this.curSeg;
      // A closed segment emits nothing: skipped without computing its prices (over a weekend, all
      // but the always-open symbols' segments are).
      if (this.segCached !== i && this.quoteOpen[minuteOfWeek(this.clock.toServer(i * S))] !== 1) {
        this.curSeg = i + 1;
        this.curJ = 0;
        continue;
      }
      this.loadSegment(i);
      if (this.segOpen) {
        let j = this.curJ;
        for (; j < K; j++) {
          const h = tickHash(this.segHash, j);
          const t = this.tickTime(i, j, h);
          if (t > utcMs) break;
          const bid = this.tickValue(j, h);
          this.bidPts = bid;
          this.askPts = bid + this.tickSpread(h);
          this.timeMsc = t;
          onTick();
          // A listener may have queried history, which reuses the segment scratch fields.
          if (this.segCached !== i) this.loadSegment(i);
        }
        if (j < K) {
          this.curJ = j;
          return;
        }
      }
      this.curSeg = i + 1;
      this.curJ = 0;
    }
  }

  /** Is the quote session open at this UTC instant? */
  quoteOpenAt(utcMs: number): boolean {
    return this.quoteOpen[minuteOfWeek(this.clock.toServer(utcMs))] === 1;
  }
}

export function mergeOhlc(o: Ohlc, open: number, high: number, low: number, close: number, n: number, lastTime: number): void {
  if (o.n === 0) {
    o.open = open;
    o.high = high;
    o.low = low;
  } else {
    if (high > o.high) o.high = high;
    if (low < o.low) o.low = low;
  }
  o.close = close;
  o.n += n;
  o.lastTime = lastTime;
}
