// Topics and fan-out of /v1/stream market data (main thread, hot path). A tick arrives from a shard
// (ShardEvent 'stream.tick', batched per microtask), is merged with the other copies of the server's
// ticks (several shards, and the cluster relay, may forward the same tick: TickMerge, by source),
// is serialized ONCE into a QUOTE frame and handed to uWS with app.publish(topic): the
// per-subscriber copy loop runs in C++. Candles likewise, per (server, symbol, timeframe).
import type { TemplatedApp } from 'uWebSockets.js';
import { barRangeUtc } from '../market/bars.js';
import { clockFor, type ServerClock } from '../market/serverClock.js';
import type { ServerInfo } from '../market/server.js';
import type { CandleEvent, Timeframe } from '../market/timeframes.js';
import { candleData, quoteData } from '../runtime/frameData.js';
import type { TickEventData } from '../runtime/hosts/streamCommands.js';
import { TickMerge } from '../market/tickMerge.js';
import { marketFrame } from './frames.js';
import { newEpoch } from './history.js';
import type { Clock } from '../util/clock.js';
import type { AccountState, CandleSub, CandleTopic, QuoteTopic, ServerState, Sock, StreamCounters } from './state.js';

const candleKey = (server: string, symbol: string, timeframe: Timeframe) => `c|${server}|${symbol}|${timeframe}`;

export class Topics {
  app: TemplatedApp | null = null;
  /** The market epoch: QUOTE/CANDLE seq restart with every gateway process, and this says so. */
  readonly epoch: string;
  /** Servers whose clock is known: only what a connection learned from its broker. */
  readonly servers = new Map<string, ServerState>();
  /** server -> symbol -> topic (nested so the per-tick lookup builds no string). */
  private readonly quoteTopics = new Map<string, Map<string, QuoteTopic>>();
  private readonly candleTopics = new Map<string, CandleTopic>();
  /** Bytes published since the last backpressure sweep: no socket's buffer grew by more than this
   *  through publishes meanwhile. Past `publishBudget` the sweep runs at once (see Outbox). */
  publishedBytes = 0;
  publishBudget = Infinity;
  onBudgetSpent: () => void = () => undefined;

  /**
   * `clock`: this gateway's (history times). `shardClock`: the market's, which ticks and bars are
   * stamped with (offset from this one by SIM_START's offset, and by shardClockOffsetMs, which tests
   * use to sit just before a bar boundary): quote ages, a bar's end and a socket's join are on it.
   */
  constructor(private readonly counters: StreamCounters, readonly clock: Clock, readonly shardClock: Clock) {
    this.epoch = newEpoch(clock.now());
  }

  private publish(topic: string, msg: string): void {
    this.app!.publish(topic, msg);
    this.publishedBytes += msg.length;
    if (this.publishedBytes > this.publishBudget) this.onBudgetSpent();
  }

  quoteTopic(server: string, symbol: string): QuoteTopic {
    let bySymbol = this.quoteTopics.get(server);
    if (!bySymbol) this.quoteTopics.set(server, (bySymbol = new Map()));
    let t = bySymbol.get(symbol);
    if (!t) {
      t = { key: `q|${server}|${symbol}`, server, symbol, seq: 0, merge: new TickMerge(), lastTick: null, refs: 0 };
      bySymbol.set(symbol, t);
    }
    return t;
  }

  /** This node's sockets subscribed to a symbol's quotes / a timeframe's candles (no topic: none). */
  quoteSubscribers(server: string, symbol: string): number {
    return this.quoteTopics.get(server)?.get(symbol)?.refs ?? 0;
  }

  candleSubscribers(server: string, symbol: string, timeframe: Timeframe): number {
    return this.candleTopics.get(candleKey(server, symbol, timeframe))?.refs ?? 0;
  }

  candleTopic(server: string, symbol: string, timeframe: Timeframe): CandleTopic {
    const key = candleKey(server, symbol, timeframe);
    let t = this.candleTopics.get(key);
    if (!t) {
      t = {
        key, partialKey: `p|${server}|${symbol}|${timeframe}`, server, symbol, timeframe, seq: 0, bar: -Infinity, ticks: 0,
        closedBar: -Infinity, last: null, lastClosed: null, partialMembers: new Set(), refs: 0,
      };
      this.candleTopics.set(key, t);
    }
    return t;
  }

  /**
   * The server's clock as a connection learned it from its broker. Only ever a known server: a
   * bridge connection that has not logged in yet has a placeholder (UTC) zone, and caching that
   * would stamp every later frame of the server in UTC (stream.open then answers serverInfo null,
   * and the zone follows with the 'connected' phase event and the snapshot and subscribe answers).
   * A server that reports another zone than before (it changed, or a restarted bridge) replaces it.
   */
  noteServer(info: ServerInfo): void {
    const cur = this.servers.get(info.name);
    if (cur && sameZone(cur.info, info) && cur.info.clockOffsetMs === info.clockOffsetMs) return;
    this.servers.set(info.name, { info, clock: clockFor(info) });
  }

  /**
   * The clock of the account's server. Known before any frame that needs it: snapshots and
   * subscribe answers carry the server, and the 'connected' phase event (which precedes the
   * account's first events) too. Throws rather than stamp server times in UTC.
   */
  clockOf(acc: AccountState): ServerClock {
    const srv = this.servers.get(acc.server);
    if (!srv) throw new Error(`the clock of server ${acc.server} is not known yet (account ${acc.id})`);
    return srv.clock;
  }

  /** Now on a server's market clock: the shards', plus the offset a bridged simulator started at a
   *  fixed instant reported (ServerInfo.clockOffsetMs). Quote ages and bar ends are on it. */
  marketNow(server: string): number {
    return this.shardClock.now() + (this.servers.get(server)?.info.clockOffsetMs ?? 0);
  }

  /** The topic's last bar has not ended yet (by the clock; its close may simply not have come). */
  isCurrentBar(t: CandleTopic, acc: AccountState): boolean {
    const clock = this.servers.get(acc.server)?.clock;
    return t.last !== null && clock !== undefined && barRangeUtc(t.timeframe, t.last.candle.time * 1000, clock)[1] > this.marketNow(acc.server);
  }

  /** Merge the copies, serialize once, publish. `relayed`: it came over the cluster relay, not
   *  from this node's shards (/metrics counts new quotes by path: tagw_stream_quotes_in_total). */
  ingestTick({ server, tick, source, relayed }: TickEventData): void {
    this.counters.ticksIn++;
    const t = this.quoteTopic(server, tick.symbol);
    if (!t.merge.admit(source, tick.timeMsc, tick.bid, tick.ask)) {
      this.counters.ticksDuplicate++;
      return;
    }
    t.lastTick = tick;
    if (relayed === true) this.counters.quotesInRelay++;
    else this.counters.quotesInLocal++;
    t.seq++;
    if (t.refs === 0) return;
    const srv = this.servers.get(server);
    if (!srv || !this.app) return;
    this.counters.quotesPublished++;
    this.publish(t.key, marketFrame('QUOTE', t.seq, this.epoch, quoteData(tick, srv.clock, this.shardClock.now() + (srv.info.clockOffsetMs ?? 0))));
  }

  ingestCandle(server: string, ev: CandleEvent): void {
    const t = this.candleTopic(server, ev.symbol, ev.timeframe);
    const bar = ev.candle.time;
    // Dedupe across shards: older bars, updates already seen, and a second close of the same bar.
    if (bar < t.bar) return;
    if (bar === t.bar) {
      if (t.closedBar === bar) return;
      if (!ev.closed && ev.candle.ticks <= t.ticks) return;
    }
    if (bar > t.bar && t.partialMembers.size > 0) {
      // A new bar: members that joined before it opened see it whole.
      for (const s of [...t.partialMembers]) {
        const c = s.candles.get(`${t.symbol}|${t.timeframe}`);
        if (c && c.joinedAt <= bar * 1000) this.promote(s, t, c);
      }
    }
    t.bar = bar;
    t.ticks = ev.candle.ticks;
    if (ev.closed) t.closedBar = bar;
    t.seq++;
    t.last = ev;
    if (ev.closed) t.lastClosed = { ev, seq: t.seq, at: this.marketNow(server) };
    if (t.refs === 0 || !this.app) return;
    this.counters.candlesPublished++;
    this.publish(t.key, marketFrame('CANDLE', t.seq, this.epoch, candleData(ev, false)));
    if (t.partialMembers.size > 0) this.publish(t.partialKey, marketFrame('CANDLE', t.seq, this.epoch, candleData(ev, true)));
    if (ev.closed) for (const s of [...t.partialMembers]) {
      const c = s.candles.get(`${t.symbol}|${t.timeframe}`);
      if (c) this.promote(s, t, c);
    }
  }

  /** The joined-mid-way bar is over: move the socket from the partial topic to the main one. */
  private promote(s: Sock, t: CandleTopic, c: CandleSub): void {
    t.partialMembers.delete(s);
    c.partial = false;
    if (s.closed || s.coalescing) return; // a coalescing socket rejoins the right topic on flush
    s.ws.unsubscribe(t.partialKey);
    s.ws.subscribe(t.key);
  }
}

function sameZone(a: ServerInfo, b: ServerInfo): boolean {
  const x = a.timeZone;
  const y = b.timeZone;
  return x.standardOffsetMinutes === y.standardOffsetMinutes && x.dst === y.dst;
}
