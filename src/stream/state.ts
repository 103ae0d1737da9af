// The state the rooms of /v1/stream share (main thread): topics, accounts, sockets. Plain records;
// each room owns the changes to its part (topics.ts, accounts.ts, outbox.ts, protocol.ts).
import type { TickMerge } from '../market/tickMerge.js';
import type { WebSocket } from 'uWebSockets.js';
import type { ServerClock } from '../market/serverClock.js';
import type { ServerInfo, Tick } from '../market/server.js';
import type { CandleEvent, Timeframe } from '../market/timeframes.js';
import type { ConnectionPhase } from '../runtime/hosts/accountRegistry.js';
import type { Deal, Order, Position } from '../market/orders.js';
import type { DealLedger } from './deals.js';
import type { StreamOpenResult } from '../runtime/hosts/streamCommands.js';
import type { ListVersion } from '../runtime/hosts/listVersion.js';
import type { AccountHistory, HistoryEntry, StreamPosition } from './history.js';
import type { SharedState } from './shared.js';

/** A server's clock, as its broker reported it (never a placeholder: see Topics.noteServer). */
export interface ServerState { info: ServerInfo; clock: ServerClock }

export interface QuoteTopic {
  key: string;
  server: string;
  symbol: string;
  seq: number;
  /** The copies of the server's ticks from this node's shards and the relay, merged. */
  merge: TickMerge;
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
  /** Of those, the ones still under way (a synchronous upgrade's, admission.ts): a shard thread that
   *  dies under them sends them again to its new thread, which counts them (AccountStreams.goOn). */
  openCalls: number;
  /** The account stream: its epoch, seq and recent events (accountEvents.ts). */
  history: AccountHistory;
  /** The latest full lists the stream carried (null: not known yet) and the shard's versions of them:
   *  a fresh socket's snapshot is read from here, consistent with history.seq. */
  positions: readonly Position[] | null;
  orders: readonly Order[] | null;
  posV: ListVersion;
  ordV: ListVersion;
  /** The history was picked up after a restart, or the account's shard thread died under it: a
   *  resync (missed deals, then a snapshot pair) goes into the stream once connected. */
  needsResync: boolean;
  /** The deals the stream carried (each deal is a TRADE once) and the latest one (accountEvents.ts). */
  deals: DealLedger;
  /** Live deals that arrived while a resync reads the broker's deal history: carried after the missed
   *  ones it finds, in broker order (null: no resync under way). */
  heldDeals: Deal[] | null;
  /** Kept without sockets (docs/stream.md "History"): released when this fires. */
  retainTimer: NodeJS.Timeout | null;
  /** Cluster mode: the account's part in the stream numbered by its owner (sharedAccounts.ts). */
  shared?: SharedState;
}

export interface CandleSub { topic: CandleTopic; partial: boolean; joinedAt: number }

export interface Sock {
  ws: WebSocket<UserData>;
  acc: AccountState;
  /** The API key the socket was opened with (re-checked for revocation). */
  keyId: string;
  heartbeat: boolean;
  closed: boolean;
  quotes: Map<string, QuoteTopic>;
  /** Symbols whose subscribe is still waiting for the shard (not in heartbeats yet). */
  pending: Set<string>;
  candles: Map<string, CandleSub>;
  coalescing: boolean;
  /** Topic seq when the socket left the topic, to flush only topics that moved. */
  leftAt: Map<string, number>;
  /** The account stream on this socket: 'held' (since=message: until the resume message), 'none'
   *  (snapshot to come once the account connects), 'waiting' (snapshot under way), 'replaying'
   *  (a resume larger than the socket buffer, continued on drain), 'live'. */
  stream: 'held' | 'none' | 'waiting' | 'replaying' | 'live';
  /** The last account seq this socket got (or that its snapshot covered). */
  cursor: number;
  /** Cluster mode: the bound on its snapshot's or its resume's wait for the cluster (AccountEvents.boundClusterWait). */
  clusterWait: ReturnType<typeof setTimeout> | null;
  /** Cluster mode: frames of a resume replayed from the shared history (JetStream) not sent yet;
   *  sent as the socket drains, before what this node's memory holds after them. */
  backlog: { entries: readonly HistoryEntry[]; next: number } | null;
  /** What the client asked for at the upgrade; since=message: what its first message asked for. */
  since: StreamPosition | 'message' | null;
  /** Its stream.open at the shard: done before the upgrade ('open'), or still under way after a
   *  synchronous upgrade ('pending'), or refused or gone with the shard's thread ('failed': nothing
   *  to release). */
  openState: 'open' | 'pending' | 'failed';
  /** While its stream.open is pending: the snapshot request and client messages, run once it is
   *  done (the shard may hold no stream state for the account before that). */
  deferred: Array<() => void> | null;
  /** The client message being handled (and those queued behind it): see ClientProtocol. */
  inbox: Promise<void>;
  /** When the socket came (this gateway's clock) and what of the account's stream its node had sent
   *  then: a fresh P4 start is placed there, not at what was sent once its stream.open was answered
   *  (frames sent meanwhile are numbered after it came); since=message: when its first message came. */
  came: { at: number; epoch: string; sent: number };
}

export interface UserData { accountId: string; keyId: string; heartbeat: boolean; since: StreamPosition | 'message' | null; openPending?: boolean; sock?: Sock }

export interface StreamCounters {
  /** Upgrades made at once inside uWS's upgrade handler (the account known in the main thread). */
  syncUpgrades: number;
  ticksIn: number;
  ticksDuplicate: number;
  /** Ticks that made a new quote, by where they came from: this node's shards / the cluster relay. */
  quotesInLocal: number;
  quotesInRelay: number;
  quotesPublished: number;
  candlesPublished: number;
  coalescedFlushes: number;
  backpressureCloses: number;
}
