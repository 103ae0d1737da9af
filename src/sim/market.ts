// The market of one simulated server: a deterministic feed per symbol, live bars, and the
// history queries. A pure function of (config, seed, clock): two instances advanced to the
// same instant hold identical quotes and bars, whichever thread they run in.
import { ServerClock } from '../market/serverClock.js';
import type { Tick } from '../market/server.js';
import type { SymbolInfo } from '../market/symbols.js';
import { TIMEFRAMES, type Candle, type Timeframe } from '../market/timeframes.js';
import { barRangeUtc } from '../market/bars.js';
import { LiveBars, toCandle } from './candles.js';
import type { SimServerConfig, SimSymbolConfig } from './config.js';
import { emptyOhlc, SymbolFeed, type TickSource } from './feed.js';
import { parseTickCsv, ReplayFeed } from './replay.js';
import { expandSessions, minuteOfWeek, sessionBitmap } from './sessions.js';

export interface MarketSymbol {
  readonly index: number;
  readonly config: SimSymbolConfig;
  /** Static part of SymbolInfo; tickValue is filled in per request. */
  readonly info: SymbolInfo;
  readonly feed: TickSource;
  readonly tradeOpen: Uint8Array;
  readonly point: number;
  bars: LiveBars | null;
}

export interface MarketOptions {
  readonly seed: number;
  readonly segmentMs: number;
  readonly historyDays: number;
  /** CSV text of replayed symbols, by symbol name (see SimSymbolConfig.replay). */
  readonly replay?: ReadonlyMap<string, string>;
  /** When replayed symbols' first recorded tick plays (SIM_START: the simulated clock's start, the
   *  same for every shard and run); default the market's start. */
  readonly replayStartMs?: number;
}

export function buildSymbolInfo(c: SimSymbolConfig): SymbolInfo {
  const point = 1 / 10 ** c.digits;
  return {
    name: c.name,
    description: c.description,
    currency: c.currency,
    baseCurrency: c.baseCurrency,
    marginCurrency: c.marginCurrency,
    digits: c.digits,
    point,
    contractSize: c.contractSize,
    tickSize: point,
    tickValue: 0,
    marginCalcMode: c.marginCalcMode,
    marginInitial: c.marginInitial,
    marginMaintenance: c.marginInitial,
    marginRate: c.marginRate,
    group: c.group,
    volumeMin: c.volumeMin,
    volumeMax: c.volumeMax,
    volumeStep: c.volumeStep,
    stopsLevel: c.stopsLevel,
    limitPoints: c.stopsLevel,
    freezeLevel: c.freezeLevel,
    tradeMode: c.tradeMode,
    tradeSessions: expandSessions(c.tradeSessions),
    quoteSessions: expandSessions(c.quoteSessions),
    swapLong: c.swapLong,
    swapShort: c.swapShort,
    commissionPerLot: c.commissionPerLot,
    spread: c.spread,
  };
}

export class Market {
  readonly clock: ServerClock;
  readonly symbols: MarketSymbol[] = [];
  readonly bySymbol = new Map<string, MarketSymbol>();
  /** All ticks with time <= `now` have been emitted. */
  now: number;
  /** Called for every tick, after the feed fields and bars are updated. */
  onTick: ((s: MarketSymbol) => void) | null = null;
  private readonly segmentMs: number;
  /** Per symbol, what advanceTo hands its feed for each tick, made once: a closure per symbol per
   *  call was ~1.6 KB of young-generation garbage per advance (13 symbols), and the simulator
   *  advances on every trade (issue 19: the shard's scavenges). `bars` and `cb` are taken at the
   *  start of each symbol's window, as the closure captured them. */
  private readonly emitters: { bars: LiveBars | null; cb: ((s: MarketSymbol) => void) | null; readonly emit: () => void }[] = [];

  constructor(
    readonly server: SimServerConfig,
    private readonly options: MarketOptions,
    startUtcMs: number,
  ) {
    this.clock = new ServerClock(server.timeZone);
    this.segmentMs = options.segmentMs;
    for (const c of server.symbols) {
      const info = buildSymbolInfo(c);
      const csv = options.replay?.get(c.name);
      const feed: TickSource = c.replay && csv !== undefined ? new ReplayFeed(parseTickCsv(csv, c.digits), c.digits, c.replay.speed) : new SymbolFeed(
        {
          seed: options.seed,
          serverName: server.name,
          symbol: c.name,
          digits: c.digits,
          basePrice: c.basePrice,
          volatility: c.volatility,
          spread: c.spread,
          ticksPerSecond: c.ticksPerSecond,
          segmentMs: options.segmentMs,
        },
        this.clock,
        sessionBitmap(info.quoteSessions),
      );
      feed.start(startUtcMs, options.replayStartMs ?? startUtcMs);
      const s: MarketSymbol = {
        index: this.symbols.length,
        config: c,
        info,
        feed,
        tradeOpen: sessionBitmap(info.tradeSessions),
        point: info.point,
        bars: null,
      };
      this.symbols.push(s);
      this.bySymbol.set(c.name, s);
      const e: (typeof this.emitters)[number] = {
        bars: null,
        cb: null,
        emit: () => {
          if (e.bars !== null) e.bars.onTick(feed.timeMsc, feed.bidPts);
          if (e.cb !== null) {
            // Whatever a tick triggers (fills, SL/TP, stop-out) happens at the tick's time.
            this.now = feed.timeMsc;
            e.cb(s);
          }
        },
      };
      this.emitters.push(e);
    }
    this.now = startUtcMs;
  }

  /** Emit all ticks up to utcMs. Symbols are interleaved per segment window so that ticks
   *  of different symbols are processed in (coarse) time order. */
  advanceTo(utcMs: number): void {
    if (utcMs <= this.now) return;
    const S = this.segmentMs;
    let t = this.now + 1; // first instant whose ticks are not emitted yet
    for (;;) {
      const windowEnd = Math.min(utcMs, (Math.floor(t / S) + 1) * S - 1);
      for (const s of this.symbols) {
        const e = this.emitters[s.index]!;
        e.bars = s.bars;
        e.cb = this.onTick;
        s.feed.advanceTo(windowEnd, e.emit);
      }
      if (windowEnd >= utcMs) break;
      t = windowEnd + 1;
    }
    this.now = utcMs;
  }

  /** Maintain live bars of a symbol up to timeframe `upTo` (seeded from history so they
   *  agree with it). */
  enableBars(s: MarketSymbol, upTo: Timeframe = 'MN1'): LiveBars {
    s.bars ??= new LiveBars(this.clock, s.feed);
    s.bars.activate(TIMEFRAMES.indexOf(upTo), this.now);
    return s.bars;
  }

  tick(s: MarketSymbol): Tick | null {
    const f = s.feed;
    if (f.timeMsc < 0) return null;
    return { symbol: s.info.name, bid: f.bidPts / f.scale, ask: f.askPts / f.scale, timeMsc: f.timeMsc };
  }

  bid(s: MarketSymbol): number {
    return s.feed.bidPts / s.feed.scale;
  }
  ask(s: MarketSymbol): number {
    return s.feed.askPts / s.feed.scale;
  }

  tradeOpenAt(s: MarketSymbol, utcMs: number): boolean {
    return s.tradeOpen[minuteOfWeek(this.clock.toServer(utcMs))] === 1;
  }

  private historyFloor(): number {
    return this.now - this.options.historyDays * 86_400_000;
  }

  /** Bars with fromMs <= open < toMs (P5 PriceHistory), never beyond `now`. */
  priceHistory(s: MarketSymbol, tf: Timeframe, fromMs: number, toMs: number): Candle[] {
    const out: Candle[] = [];
    const floor = this.historyFloor();
    const t = Math.max(fromMs, floor);
    const end = Math.min(toMs, this.now + 1);
    let [start, barEnd] = barRangeUtc(tf, t, this.clock);
    // Only whole bars: one that opened before the history floor would be partial, and its values
    // would depend on when it is asked for (the floor moves with the clock).
    if (start < fromMs || start < floor) [start, barEnd] = barRangeUtc(tf, barEnd, this.clock);
    while (start < end) {
      const o = this.barOhlc(s, tf, start, barEnd);
      if (o.n > 0) out.push(toCandle(start, this.clock, o, s.feed.scale));
      [start, barEnd] = barRangeUtc(tf, barEnd, this.clock);
    }
    return out;
  }

  /** The `count` bars whose open is <= fromMs, ascending (P4 QuoteHistory). */
  quoteHistory(s: MarketSymbol, tf: Timeframe, fromMs: number, count: number): Candle[] {
    const out: Candle[] = [];
    const floor = this.historyFloor();
    let [start, barEnd] = barRangeUtc(tf, Math.min(fromMs, this.now), this.clock);
    while (out.length < count && start >= floor) { // whole bars only, as in priceHistory
      const o = this.barOhlc(s, tf, start, barEnd);
      if (o.n > 0) out.push(toCandle(start, this.clock, o, s.feed.scale));
      [start, barEnd] = barRangeUtc(tf, start - 1, this.clock);
    }
    return out.reverse();
  }

  private barOhlc(s: MarketSymbol, tf: Timeframe, start: number, end: number) {
    const bars = s.bars;
    const k = TIMEFRAMES.indexOf(tf);
    if (bars !== null && k < bars.active && bars.start[k] === start) return bars.bars[k]!;
    return s.feed.aggregate(Math.max(start, this.historyFloor()), Math.min(end, this.now + 1), emptyOhlc());
  }
}
