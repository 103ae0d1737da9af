// Shard side of /v1/stream. Per account with open sockets: which symbols and candle timeframes
// the main thread wants (main keeps the reference counts across sockets and tells us on the
// 0 -> 1 and 1 -> 0 edges), subscribed at the account's BrokerConnection through the
// AccountRegistry, and what arrives forwarded as ShardEvents. Market data is keyed by server and
// deduplicated per shard here (two accounts of one server in this shard forward a tick once);
// main deduplicates again across shards.
import { randomInt } from 'node:crypto';
import { apiError } from '../../errors.js';
import { clockFor } from '../../market/serverClock.js';
import type { Tick } from '../../market/server.js';
import type { CandleEvent, Timeframe } from '../../market/timeframes.js';
import { barRangeUtc } from '../../market/bars.js';
import { TickMerge } from '../../market/tickMerge.js';
import {
  NO_OPEN_STREAM, STREAM_EVENT, type CandleEventData, type DealEventData, type OrdersEventData, type PhaseEventData,
  type PositionsEventData, type ReboundEventData, type TickEventData,
} from './streamCommands.js';
import { errorMessage } from '../../util/errorMessage.js';
import type { Deal } from '../../market/orders.js';
import type { AccountEvent, AccountRuntime } from './accountRegistry.js';
import { marketNowOf, type ActorHost, type ShardContext } from './context.js';
import { createStreamSources } from './streamSources.js';
import { createQuoteSessions } from './quoteSessions.js';

interface StreamAccount {
  rt: AccountRuntime;
  /** Open sockets (stream.open minus stream.close). */
  sockets: number;
  symbols: Set<string>;
  candles: Map<string, Set<Timeframe>>;
  off: () => void;
  /** This stream state's id in its lists' versions (listVersion.ts): its counts start at 0. */
  src: number;
  posV: number;
  ordV: number;
}

interface LastCandle { bar: number; ticks: number; closed: boolean }

/** This host's name as a holder of the account's broker subscriptions (see AccountRuntime.whenConnected). */
const OWNER = 'stream';

export function createStreamHost(ctx: ShardContext): ActorHost {
  const accounts = new Map<string, StreamAccount>();
  const lastTicks = new Map<string, TickMerge>();
  const lastCandles = new Map<string, LastCandle>();

  const registry = () => {
    if (!ctx.accounts) throw apiError('SERVICE_UNAVAILABLE', 'the account runtime is not available in this shard');
    return ctx.accounts;
  };
  const get = (accountId: string) => {
    const a = accounts.get(accountId);
    if (!a) throw apiError('NOT_FOUND', NO_OPEN_STREAM);
    return a;
  };

  /** This shard as a source of ticks at the main thread's merge. */
  const shardSource = `s${ctx.shard}`;
  /** `source`: the account whose broker session the tick came through (its copies are merged). */
  const forwardTick = (source: string, server: string, tick: Tick) => {
    const k = `${server}|${tick.symbol}`;
    let merge = lastTicks.get(k);
    if (!merge) lastTicks.set(k, (merge = new TickMerge()));
    if (!merge.admit(source, tick.timeMsc, tick.bid, tick.ask)) return;
    const data: TickEventData = { server, tick, source: shardSource };
    ctx.emit({ kind: STREAM_EVENT.tick, key: server, data });
  };
  /** Cluster mode: this shard's accounts as near sources of other accounts' symbols. */
  const sources = createStreamSources(ctx, forwardTick);
  /** Cluster mode: the node's quote sessions (market-data logins) placed in this shard. */
  const quotes = createQuoteSessions(ctx, forwardTick);
  /** Candle topics whose missed closes are being read from history: their live events wait, in order. */
  const holding = new Map<string, CandleEvent[]>();
  const forwardCandle = (server: string, ev: CandleEvent) => {
    const k = `${server}|${ev.symbol}|${ev.timeframe}`;
    const held = holding.get(k);
    if (held) {
      held.push(ev);
      return;
    }
    const last = lastCandles.get(k);
    const bar = ev.candle.time;
    if (last && (bar < last.bar || (bar === last.bar && (last.closed || (!ev.closed && ev.candle.ticks <= last.ticks))))) return;
    lastCandles.set(k, { bar, ticks: ev.candle.ticks, closed: ev.closed });
    const data: CandleEventData = { server, candle: ev };
    ctx.emit({ kind: STREAM_EVENT.candle, key: server, data });
  };

  /**
   * After a reconnect: a bar that was in progress when the connection dropped and has ended since
   * was closed at the broker by a tick we never got, so its `closed` update never came. Its final
   * values (and those of bars that passed wholly inside the outage) are read from the broker's
   * history and forwarded as closed, before any live update of the topic (held meanwhile: main
   * drops a bar older than one it has seen).
   */
  const recoverCloses = async (accountId: string, a: StreamAccount) => {
    if (!a.rt.serverKnown) return;
    const info = a.rt.server;
    const server = info.name;
    const clock = clockFor(info);
    const market = { now: () => marketNowOf(ctx, info) }; // bar times are on it (SIM_START, a bridged --start)
    const now = market.now();
    const todo: Array<{ k: string; symbol: string; tf: Timeframe; from: number }> = [];
    for (const [symbol, tfs] of a.candles) {
      for (const tf of tfs) {
        const k = `${server}|${symbol}|${tf}`;
        const last = lastCandles.get(k);
        if (!last || last.closed || holding.has(k)) continue;
        if (barRangeUtc(tf, last.bar * 1000, clock)[1] > now) continue; // still in progress: its close comes live
        holding.set(k, []);
        todo.push({ k, symbol, tf, from: last.bar });
      }
    }
    for (const { k, symbol, tf, from } of todo) {
      try {
        const conn = await a.rt.whenConnected(ctx.settings.timing.subscriptionWaitMs, OWNER);
        const bars = await conn.priceHistory(symbol, tf, from * 1000, market.now());
        const end = market.now();
        for (const c of bars) {
          if (c.time < from || barRangeUtc(tf, c.time * 1000, clock)[1] > end) continue;
          const last = lastCandles.get(k);
          if (last && (c.time < last.bar || (c.time === last.bar && last.closed))) continue;
          lastCandles.set(k, { bar: c.time, ticks: c.ticks, closed: true });
          const data: CandleEventData = { server, candle: { symbol, timeframe: tf, candle: c, closed: true } };
          ctx.emit({ kind: STREAM_EVENT.candle, key: server, data });
        }
      } catch (err) {
        ctx.log.warn('stream candle close recovery failed', { accountId, symbol, timeframe: tf, err: errorMessage(err) });
      } finally {
        const held = holding.get(k) ?? [];
        holding.delete(k);
        for (const ev of held) forwardCandle(server, ev);
      }
    }
  };

  /** The last candle of a topic nobody here wants any more is stale: a later subscription must not
   *  take it for the bar in progress (recoverCloses would forward the bars since then as closed). */
  const forgetUnwantedCandles = () => {
    for (const k of lastCandles.keys()) {
      if (holding.has(k)) continue;
      const [server, symbol, tf] = k.split('|') as [string, string, Timeframe];
      let wanted = false;
      for (const a of accounts.values()) if (a.rt.server.name === server && a.candles.get(symbol)?.has(tf)) wanted = true;
      if (!wanted) lastCandles.delete(k);
    }
  };

  /**
   * Releases this host's hold on broker subscriptions that no socket wants any more (best effort:
   * a dropped connection has no subscriptions to release). `candleSymbols`: drop every timeframe.
   */
  const releaseAtBroker = async (
    accountId: string, a: StreamAccount, symbols: string[], tfSymbol: string | undefined, tfs: Timeframe[] | undefined,
    candleSymbols: string[] = [],
  ) => {
    try {
      if (a.rt.phase() !== 'connected') return;
      const conn = await a.rt.whenConnected(ctx.settings.timing.subscriptionWaitMs, OWNER);
      const ticks = symbols.filter((s) => !accounts.get(accountId)?.symbols.has(s));
      if (ticks.length) await conn.unsubscribe(ticks);
      for (const s of [...ticks, ...candleSymbols]) if (!accounts.get(accountId)?.candles.has(s)) await conn.unsubscribeCandles(s);
      if (tfSymbol && tfs?.length) await conn.unsubscribeCandles(tfSymbol, tfs);
    } catch (err) {
      ctx.log.warn('stream broker release failed', { accountId, err: errorMessage(err) });
    }
  };

  /** (Re)subscribes everything the account's sockets want; called after every (re)connect. */
  const resubscribe = async (accountId: string, a: StreamAccount) => {
    try {
      const conn = await a.rt.whenConnected(ctx.settings.timing.subscriptionWaitMs, OWNER);
      if (a.symbols.size) await conn.subscribe([...a.symbols]);
      for (const [symbol, tfs] of a.candles) if (tfs.size) await conn.subscribeCandles(symbol, [...tfs]);
    } catch (err) {
      ctx.log.warn('stream resubscribe failed', { accountId, err: errorMessage(err) });
    }
  };

  const listen = (accountId: string, a: StreamAccount) => (ev: AccountEvent) => {
    switch (ev.type) {
      case 'tick':
        if (a.symbols.has(ev.tick.symbol)) forwardTick(accountId, a.rt.server.name, ev.tick);
        break;
      case 'candle':
        if (a.candles.get(ev.candle.symbol)?.has(ev.candle.timeframe)) forwardCandle(a.rt.server.name, ev.candle);
        break;
      case 'positions': {
        const data: PositionsEventData = { src: a.src, v: ++a.posV, positions: ev.positions };
        ctx.emit({ kind: STREAM_EVENT.positions, key: accountId, data });
        break;
      }
      case 'orders': {
        const data: OrdersEventData = { src: a.src, v: ++a.ordV, orders: ev.orders };
        ctx.emit({ kind: STREAM_EVENT.orders, key: accountId, data });
        break;
      }
      case 'deal': {
        const data: DealEventData = { deal: ev.deal };
        ctx.emit({ kind: STREAM_EVENT.deal, key: accountId, data });
        break;
      }
      case 'rebound': {
        const data: ReboundEventData = { server: ev.server, platform: ev.platform };
        ctx.emit({ kind: STREAM_EVENT.rebound, key: accountId, data });
        break;
      }
      case 'phase': {
        // With the server: a connection that just logged in for the first time (bridge) has only now
        // learned its time zone, and main stamps server times with it.
        const data: PhaseEventData = { phase: ev.phase, ...(a.rt.serverKnown ? { server: a.rt.server } : {}) };
        ctx.emit({ kind: STREAM_EVENT.phase, key: accountId, data });
        if (ev.phase === 'connected') {
          void recoverCloses(accountId, a);
          void resubscribe(accountId, a);
        }
        break;
      }
    }
  };

  return {
    handlers: {
      ...sources.handlers,
      ...quotes.handlers,
      'stream.open': async ({ accountId }) => {
        const rt = await registry().ensure(accountId);
        let a = accounts.get(accountId);
        if (!a) {
          a = { rt, sockets: 0, symbols: new Set(), candles: new Map(), off: () => undefined, src: randomInt(1, 2 ** 48), posV: 0, ordV: 0 };
          a.off = rt.on(listen(accountId, a));
          accounts.set(accountId, a);
        }
        a.sockets++;
        return { platform: rt.platform, server: rt.server.name, serverInfo: rt.serverKnown ? rt.server : null, phase: rt.phase() };
      },
      'stream.snapshot': async ({ accountId, timeoutMs, dealsAfter }) => {
        const a = get(accountId);
        const conn = await a.rt.whenConnected(timeoutMs, OWNER);
        // Deals first: one made after this read arrives as an event (this account's listener is on),
        // and main carries each deal once.
        let deals: Deal[] | null | undefined;
        if (dealsAfter) {
          try {
            deals = [...await conn.historyDeals(dealsAfter.timeMsc, Number.MAX_SAFE_INTEGER)];
          } catch (err) {
            ctx.log.warn('stream deal history not read', { accountId, err: errorMessage(err) });
            deals = null;
          }
        }
        // Versions are read before the fetch: every change counted up to them is in what is read; one
        // counted while the read is out may not be, and its event (newer) wins over the snapshot.
        const { posV, ordV } = a;
        const opened = await conn.openedOrders();
        return {
          server: conn.server, src: a.src, posV, ordV, positions: [...opened.positions], orders: [...opened.orders],
          ...(deals === undefined ? {} : { deals }),
        };
      },
      'stream.sub': async ({ accountId, symbol, timeframes, timeoutMs }) => {
        const a = get(accountId);
        // Wanted from now on (synchronously, so an unsub processed while we wait wins).
        a.symbols.add(symbol);
        if (timeframes.length) {
          const set = a.candles.get(symbol) ?? new Set<Timeframe>();
          for (const tf of timeframes) set.add(tf);
          a.candles.set(symbol, set);
        }
        const conn = await a.rt.whenConnected(timeoutMs, OWNER);
        const info = await conn.symbol(symbol);
        if (!info) throw apiError('BAD_REQUEST', `unknown symbol ${symbol}`);
        if (!a.symbols.has(symbol)) return { lastTick: null, server: conn.server };
        await conn.subscribe([symbol]);
        if (timeframes.length) await conn.subscribeCandles(symbol, timeframes);
        return { lastTick: await conn.quote(symbol), server: conn.server };
      },
      'stream.unsub': ({ accountId, symbol, timeframes }) => {
        const a = accounts.get(accountId);
        if (!a) return { ok: true };
        if (timeframes === undefined) {
          a.symbols.delete(symbol);
          a.candles.delete(symbol);
        } else {
          const set = a.candles.get(symbol);
          if (set) for (const tf of timeframes) set.delete(tf);
          if (set && set.size === 0) a.candles.delete(symbol);
        }
        // Let go at the broker too; the account keeps the symbol while another owner (a gateway
        // session) still holds it.
        forgetUnwantedCandles();
        const dropTicks = timeframes === undefined ? [symbol] : [];
        const dropTfs = timeframes ?? [];
        void releaseAtBroker(accountId, a, dropTicks, symbol, timeframes === undefined ? undefined : dropTfs);
        return { ok: true };
      },
      'stream.close': ({ accountId }) => {
        const a = accounts.get(accountId);
        if (a && --a.sockets <= 0) {
          a.off();
          accounts.delete(accountId);
          forgetUnwantedCandles();
          void releaseAtBroker(accountId, a, [...a.symbols], undefined, undefined, [...a.candles.keys()]);
        }
        return { ok: true };
      },
    },
    // Stream subscriptions are not persisted: after a shard restart clients reconnect and resubscribe.
    rehydrate: () => 0,
    actorCount: () => 0,
    release(ids) {
      sources.release(ids);
      for (const id of ids) accounts.get(id)?.off();
      for (const id of ids) accounts.delete(id);
      return 0;
    },
    stop() {
      sources.stop();
      quotes.stop();
      for (const a of accounts.values()) a.off();
      accounts.clear();
    },
  };
}
