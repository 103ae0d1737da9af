// The main <-> shard contract of /v1/stream. The main thread owns the sockets and the reference
// counts (which account wants which symbol and timeframe); the shard's stream host owns the broker
// side (subscribing at the account's BrokerConnection) and forwards what arrives as ShardEvents.
import { ApiError } from '../../errors.js';
import type { ConnectionPhase } from './accountRegistry.js';
import type { EventOf } from '../protocol.js';
import type { Deal, Order, Position } from '../../market/orders.js';
import type { DealMark } from '../../store/streamHistory.js';
import type { Platform, ServerInfo, Tick } from '../../market/server.js';
import type { CandleEvent, Timeframe } from '../../market/timeframes.js';

export interface StreamOpenResult {
  platform: Platform;
  /** Server name. */
  server: string;
  /** The server as the broker reported it; null while the account's connection has not learned it
   *  (a bridge connection before its first login): its clock is unknown then, and it follows with
   *  the 'connected' phase event and the snapshot and subscribe answers. */
  serverInfo: ServerInfo | null;
  phase: ConnectionPhase;
}

export interface StreamSnapshotResult {
  /** The server of the connection the snapshot was read from (its clock stamps the frames). */
  server: ServerInfo;
  /** Versions of the account's positions/orders when the snapshot's read of the broker began:
   *  change events at or below these are in it (older: they must not follow it); one above may not
   *  be (newer: a snapshot must not follow it). listVersion.ts. */
  posV: number;
  ordV: number;
  /** The stream state whose counts posV and ordV are (ListVersion.src). */
  src: number;
  positions: Position[];
  orders: Order[];
  /** With `dealsAfter`: the broker's deals from the mark's time on, read before the lists (null: the
   *  broker's deal history could not be read, so deals may be missing). */
  deals?: Deal[] | null;
}

/** A quote session's state: connecting (its first login), up, down (dropped or not reached: trying
 *  again), refused (the broker refused the login: not tried again while the shard runs). */
export type QuoteSessionState = 'connecting' | 'up' | 'down' | 'refused';
/** A quote session as its shard knows it (`stream.quoteSessions`): never its password. `sinceMs`:
 *  when it entered the state (epoch ms); `quotes`: quotes of followed symbols the shard received
 *  from the server's sessions since it started. */
export interface QuoteSessionView { server: string; login: string; state: QuoteSessionState; sinceMs: number; symbols: string[]; quotes: number }

declare module '../protocol.js' {
  interface CommandMap {
    /** A socket of this account opened: start forwarding its account events. NOT_FOUND for an unknown account. */
    'stream.open': { args: { accountId: string }; result: StreamOpenResult };
    /** Waits for the connection (up to timeoutMs) and returns the current positions and pending orders
     *  (and with `dealsAfter`, the deals since then: a resync after a restart or an outage). */
    'stream.snapshot': { args: { accountId: string; timeoutMs: number; dealsAfter?: DealMark }; result: StreamSnapshotResult };
    /** Subscribe a symbol (and candle timeframes) at the broker; returns the latest tick. BAD_REQUEST for an unknown symbol. */
    'stream.sub': { args: { accountId: string; symbol: string; timeframes: Timeframe[]; timeoutMs: number }; result: { lastTick: Tick | null; server: ServerInfo } };
    /** No socket of this account wants the symbol (timeframes omitted) or these timeframes any more. */
    'stream.unsub': { args: { accountId: string; symbol: string; timeframes?: Timeframe[] }; result: { ok: true } };
    /** The last socket of this account closed. */
    'stream.close': { args: { accountId: string }; result: { ok: true } };
    /** Cluster mode: this account (running here, on `server`) also subscribes the symbol for other
     *  accounts' sockets of the server (a near source: streamSources.ts). ok false: not running here,
     *  or on another server. */
    'stream.source': { args: { accountId: string; server: string; symbol: string }; result: { ok: boolean } };
    /** The near source of the symbol at this account is no longer wanted. */
    'stream.unsource': { args: { accountId: string; symbol: string }; result: { ok: true } };
    /** Cluster mode: the node's quote session of the server (its market-data login, no account:
     *  quoteSessions.ts) subscribes the symbol. ok false: no quote login for the server, or the
     *  broker refused it (answered once the session's first login settled). */
    'stream.quote': { args: { server: string; symbol: string }; result: { ok: boolean } };
    /** The symbol is no longer wanted from the quote session; the last one closes it. */
    'stream.unquote': { args: { server: string; symbol: string }; result: { ok: true } };
    /** The quote sessions of this shard, a refused one included (for the operator's views). */
    'stream.quoteSessions': { args: Record<string, never>; result: QuoteSessionView[] };
  }
}

/** ShardEvent kinds produced by the stream host. Market data is keyed by server, the rest by account. */
export const STREAM_EVENT = {
  tick: 'stream.tick',
  candle: 'stream.candle',
  positions: 'stream.positions',
  orders: 'stream.orders',
  deal: 'stream.deal',
  phase: 'stream.phase',
  rebound: 'stream.rebound',
} as const;

/** `source`: which copy of the server's tick sequence this is, for the next merge of copies
 *  (src/market/tickMerge.ts): `s<shard>` from a shard of the node, `n:<node>` once the node's relay
 *  published it. `relayed`: set by the cluster relay on a tick it received from another node (never
 *  sent: a node publishes its own shards' ticks); absent, the tick came from this node's shards. */
export interface TickEventData { server: string; tick: Tick; source: string; relayed?: true }
export interface CandleEventData { server: string; candle: CandleEvent }
/** `src` and `v`: a ListVersion (listVersion.ts). */
export interface PositionsEventData { src: number; v: number; positions: readonly Position[] }
export interface OrdersEventData { src: number; v: number; orders: readonly Order[] }
export interface DealEventData { deal: Deal }
/** `server`: the server as the account's connection knows it (absent while it does not: see StreamOpenResult). */
export interface PhaseEventData { phase: ConnectionPhase; server?: ServerInfo }
/** Bound to another broker login: `server` is its server's name (its clock follows with the next phase event). */
export interface ReboundEventData { server: string; platform: Platform }

declare module '../protocol.js' {
  interface ShardEventMap {
    /** key: the server name. */
    'stream.tick': TickEventData;
    'stream.candle': CandleEventData;
    /** key: the account id (also for the kinds below). */
    'stream.positions': PositionsEventData;
    'stream.orders': OrdersEventData;
    'stream.deal': DealEventData;
    'stream.phase': PhaseEventData;
    'stream.rebound': ReboundEventData;
  }
}

/** The events /v1/stream's hub receives. */
export type StreamEvent = EventOf<(typeof STREAM_EVENT)[keyof typeof STREAM_EVENT]>;

/** The stream host's NOT_FOUND for a command on an account it holds no stream of (no stream.open
 *  arrived, or all were closed or released): a socket whose open is not there gets nothing. */
export const NO_OPEN_STREAM = 'no open stream for this account';

/** Whether `err` is the stream host's NOT_FOUND of NO_OPEN_STREAM (also as it arrives forwarded). */
export function isNoOpenStream(err: unknown): boolean {
  return err instanceof ApiError && err.code === 'NOT_FOUND' && err.message === NO_OPEN_STREAM;
}
