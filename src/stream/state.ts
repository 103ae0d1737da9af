// The state the rooms of /v1/stream share (main thread): topics, accounts, sockets. Plain records;
// each room owns the changes to its part (topics.ts, accounts.ts, outbox.ts, protocol.ts).
import type { WebSocket } from 'uWebSockets.js';
import type { ServerClock } from '../market/serverClock.js';
import type { ServerInfo, Tick } from '../market/server.js';
import type { CandleEvent, Timeframe } from '../market/timeframes.js';
import type { ConnectionPhase } from '../runtime/hosts/accountRegistry.js';
import type { OrdersEventData, PositionsEventData, StreamOpenResult } from '../runtime/hosts/streamCommands.js';

/** A server's clock, as its broker reported it (never a placeholder: see Topics.noteServer). */
export interface ServerState { info: ServerInfo; clock: ServerClock }

export interface QuoteTopic {
  key: string;
  server: string;
  symbol: string;
  seq: number;
  lastT: number;
  lastBid: number;
  lastAsk: number;
  lastTick: Tick | null;
  refs: number;
}

export interface CandleTopic {
  key: string;
  /** Topic of sockets that joined the current bar mid-way (they get partial:true). */
  partialKey: string;
  server: string;
  symbol: string;
  timeframe: Timeframe;
  seq: number;
  /** Open (UTC seconds) of the bar of the latest update. */
  bar: number;
  ticks: number;
  closedBar: number;
  last: CandleEvent | null;
  /** The latest closed:true update, its seq and when it was published: a coalescing socket gets it
   *  on flush even when the next bar's updates superseded it as `last` (a close is sent exactly once). */
  lastClosed: { ev: CandleEvent; seq: number; at: number } | null;
  partialMembers: Set<Sock>;
  refs: number;
}

export interface AccountState {
  id: string;
  platform: StreamOpenResult['platform'];
  server: string;
  phase: ConnectionPhase;
  sockets: Set<Sock>;
  symbolRefs: Map<string, number>;
  candleRefs: Map<string, number>;
  /** stream.open calls not yet paired with a stream.close. */
  opens: number;
  /** Thread of the account's shard when its stream state was set up there. */
  threadId: number | undefined;
}

export interface CandleSub { topic: CandleTopic; partial: boolean; joinedAt: number }

export interface Sock {
  ws: WebSocket<UserData>;
  acc: AccountState;
  /** The API key the socket was opened with (re-checked for revocation). */
  keyId: string;
  seq: number;
  heartbeat: boolean;
  closed: boolean;
  quotes: Map<string, QuoteTopic>;
  /** Symbols whose subscribe is still waiting for the shard (not in heartbeats yet). */
  pending: Set<string>;
  candles: Map<string, CandleSub>;
  coalescing: boolean;
  /** Topic seq when the socket left the topic, to flush only topics that moved. */
  leftAt: Map<string, number>;
  /** P5: change frames wait for the initial snapshot; versions at or below it are older. */
  snapshot: 'none' | 'waiting' | 'sent';
  posV: number;
  ordV: number;
  heldPositions: PositionsEventData | null;
  heldOrders: OrdersEventData | null;
  /** Its stream.open at the shard: done before the upgrade ('open'), or still under way after a
   *  synchronous upgrade ('pending'), or refused ('failed': nothing to release). */
  openState: 'open' | 'pending' | 'failed';
  /** While its stream.open is pending: the snapshot request and client messages, run once it is
   *  done (the shard may hold no stream state for the account before that). */
  deferred: Array<() => void> | null;
  /** The client message being handled (and those queued behind it): see ClientProtocol. */
  inbox: Promise<void>;
}

export interface UserData { accountId: string; keyId: string; heartbeat: boolean; openPending?: boolean; sock?: Sock }

export interface StreamCounters {
  /** Upgrades made at once inside uWS's upgrade handler (the account known in the main thread). */
  syncUpgrades: number;
  ticksIn: number;
  ticksDuplicate: number;
  quotesPublished: number;
  candlesPublished: number;
  coalescedFlushes: number;
  backpressureCloses: number;
}
