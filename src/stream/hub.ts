// The edge of /v1/stream: sockets, topics, fan-out, backpressure and heartbeats (main thread).
//
// Hot path. A tick arrives from a shard (ShardEvent 'stream.tick', batched per microtask), is
// deduplicated by (server, symbol, time, bid, ask) because several accounts of the same server in
// different shards may forward the same tick, is serialized ONCE into a QUOTE frame and handed to
// uWS with app.publish(topic): the per-subscriber copy loop runs in C++.
//
// Backpressure. uWS's maxBackpressure is set to the HARD limit, so publish never skips a socket we
// have not noticed yet. A sweep (every streamSweepMs, only when something was published) reads
// getBufferedAmount() of each socket; a socket over the SOFT limit is unsubscribed from its market
// topics and enters "coalescing": from then on it costs the publish loop nothing, and what it would
// have received is, per topic, just the latest frame (each topic keeps its latest frame anyway, so
// the coalescing buffer is a set of topics, bounded by the socket's subscriptions). On drain below
// the low-water mark the socket gets the latest frame of every topic that moved, and rejoins the
// topics. State frames (POSITIONS, ORDERS, TRADE) are sent per socket and never dropped: if one
// would take the socket over the hard limit, the socket is closed with STREAM_CLOSE.BACKPRESSURE.
import type { HttpRequest, HttpResponse, TemplatedApp, us_socket_context_t, WebSocket } from 'uWebSockets.js';
import { z } from 'zod';
import type { Authenticator } from '../auth/authenticator.js';
import { assertAccountScope } from '../auth/rights.js';
import type { AuthThrottle } from '../auth/throttle.js';
import { clockFor, type ServerClock } from '../market/serverClock.js';
import { barRangeUtc } from '../market/bars.js';
import { withRevokedKeys } from './revokedKeys.js';
import type { ServerInfo, Tick } from '../market/server.js';
import { parseTimeframe, type CandleEvent, type Timeframe } from '../market/timeframes.js';
import type { Config } from '../config.js';
import { apiError, toApiError } from '../errors.js';
import { sendError } from '../http/app.js';
import { assertWebsocketOrigin } from '../http/cors.js';
import { readRequest, singleParam } from '../http/request.js';
import { assertAliasAgrees } from '../http/schemas.js';
import { ResponseSink } from '../http/respond.js';
import type { Metrics } from '../http/metrics.js';
import type { Logger } from '../log.js';
import type { ConnectionPhase } from '../runtime/hosts/accountRegistry.js';
import type { ShardSet } from '../runtime/shardSet.js';
import type { TenancyStore } from '../store/tenancy.js';
import { errorMessage } from '../util/errorMessage.js';
import { canonicalAccountId } from '../util/accountId.js';
import {
  candleData, errorData, frame, heartbeatData, ordersData, positionsData, quoteData, STREAM_CLOSE, tradeData,
  type FrameType, type HeartbeatSymbol, type StreamCloseName,
} from './frames.js';
import {
  STREAM_EVENT, type OrdersEventData, type PositionsEventData, type StreamEvent, type StreamOpenResult,
} from '../runtime/hosts/streamCommands.js';

export const STREAM_PATH = '/v1/stream';
const MAX_SYMBOLS_PER_SOCKET = 256;

export interface StreamHubDeps {
  config: Config;
  auth: Authenticator;
  throttle: AuthThrottle;
  tenancy: TenancyStore;
  shards: ShardSet;
  log: Logger;
  /** Shared with the HTTP layer: no new sockets while draining. */
  inflight: { draining: boolean };
  /** The broker login bound to an account, from this thread's own database connection. */
  bindingOf?: (accountId: string) => { platform: 'P4' | 'P5'; server: string } | undefined;
}

/** A server's clock, as its broker reported it (never a placeholder: see noteServer). */
interface ServerState { info: ServerInfo; clock: ServerClock }

interface QuoteTopic {
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

interface CandleTopic {
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

interface AccountState {
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

interface CandleSub { topic: CandleTopic; partial: boolean; joinedAt: number }

interface Sock {
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
  /** The client message being handled (and those queued behind it): see onMessage. */
  inbox: Promise<void>;
}

interface UserData { accountId: string; keyId: string; heartbeat: boolean; openPending?: boolean; sock?: Sock }

const ClientMessage = z.object({
  action: z.enum(['subscribe', 'unsubscribe']),
  symbol: z.string().min(1).max(64).optional(),
  symbols: z.array(z.string().min(1).max(64)).min(1).max(MAX_SYMBOLS_PER_SOCKET).optional(),
  timeframe: z.union([z.string(), z.number()]).optional(),
  timeframes: z.array(z.union([z.string(), z.number()])).max(9).optional(),
}).refine((m) => m.symbol !== undefined || m.symbols !== undefined, { message: "'symbol' (or 'symbols') is required" });

export interface StreamStats {
  sockets: number;
  /** Accounts with stream state here (sockets open, or a stream.open under way). */
  accounts: number;
  /** Upgrades made at once inside uWS's upgrade handler (the account known in the main thread). */
  syncUpgrades: number;
  coalescingSockets: number;
  ticksIn: number;
  ticksDuplicate: number;
  quotesPublished: number;
  candlesPublished: number;
  coalescedFlushes: number;
  backpressureCloses: number;
}

export class StreamHub {
  private app: TemplatedApp | null = null;
  /** Servers whose clock is known: only what a connection learned from its broker. */
  private readonly servers = new Map<string, ServerState>();
  /** server -> symbol -> topic (nested so the per-tick lookup builds no string). */
  private readonly quoteTopics = new Map<string, Map<string, QuoteTopic>>();
  private readonly candleTopics = new Map<string, CandleTopic>();
  private readonly accounts = new Map<string, AccountState>();
  private readonly sockets = new Set<Sock>();
  private readonly coalescing = new Set<Sock>();
  private readonly activeSeats = new Set<string>();
  /** The socket `open` just made during a synchronous upgrade (see upgradeNow). */
  private justOpened: Sock | undefined;
  private publishedSinceSweep = false;
  private sweepTimer: NodeJS.Timeout | null = null;
  private heartbeatTimer: NodeJS.Timeout | null = null;
  private keyTimer: NodeJS.Timeout | null = null;
  private readonly soft: number;
  private readonly hard: number;
  private readonly lowWater: number;
  readonly counters: Omit<StreamStats, 'sockets' | 'accounts' | 'coalescingSockets'> = {
    ticksIn: 0, ticksDuplicate: 0, quotesPublished: 0, candlesPublished: 0, coalescedFlushes: 0, backpressureCloses: 0, syncUpgrades: 0,
  };

  constructor(private readonly deps: StreamHubDeps) {
    this.soft = deps.config.streamSoftLimitBytes;
    this.hard = Math.max(deps.config.streamHardLimitBytes, this.soft * 2);
    this.lowWater = Math.floor(this.soft / 2);
  }

  stats(): StreamStats {
    return { sockets: this.sockets.size, accounts: this.accounts.size, coalescingSockets: this.coalescing.size, ...this.counters };
  }

  /** Gauges on /metrics: open and coalescing sockets, and the running counts of the fan-out. */
  registerMetrics(metrics: Metrics): void {
    metrics.gauge('tagw_stream_sockets', () => this.sockets.size);
    metrics.gauge('tagw_stream_coalescing_sockets', () => this.coalescing.size);
    metrics.gauge('tagw_stream_accounts', () => this.accounts.size);
    metrics.counter('tagw_stream_sync_upgrades_total', () => this.counters.syncUpgrades);
    metrics.counter('tagw_stream_ticks_in_total', () => this.counters.ticksIn);
    metrics.counter('tagw_stream_ticks_duplicate_total', () => this.counters.ticksDuplicate);
    metrics.counter('tagw_stream_quotes_published_total', () => this.counters.quotesPublished);
    metrics.counter('tagw_stream_candles_published_total', () => this.counters.candlesPublished);
    metrics.counter('tagw_stream_coalesced_flushes_total', () => this.counters.coalescedFlushes);
    metrics.counter('tagw_stream_backpressure_closes_total', () => this.counters.backpressureCloses);
  }

  /** Registers the /v1/stream WebSocket route on the app and starts the timers. */
  mount(app: TemplatedApp): void {
    this.app = app;
    const cfg = this.deps.config;
    app.ws<UserData>(STREAM_PATH, {
      maxPayloadLength: 16 * 1024,
      maxBackpressure: this.hard,
      closeOnBackpressureLimit: 0,
      idleTimeout: cfg.idleTimeoutSec,
      sendPingsAutomatically: true,
      upgrade: (res, req, context) => this.upgrade(res, req, context),
      open: (ws) => this.guard('open', () => this.onOpen(ws)),
      message: (ws, msg, isBinary) => this.guard('message', () => this.onMessage(ws, msg, isBinary)),
      drain: (ws) => this.guard('drain', () => {
        const s = ws.getUserData().sock;
        if (s && s.coalescing && ws.getBufferedAmount() <= this.lowWater) this.flush(s);
      }),
      close: (ws) => this.guard('close', () => this.onClose(ws)),
    });
    this.sweepTimer = setInterval(() => this.guard('sweep', () => this.sweep()), cfg.streamSweepMs);
    this.sweepTimer.unref();
    this.heartbeatTimer = setInterval(() => this.guard('heartbeats', () => this.heartbeats()), cfg.streamHeartbeatMs);
    this.heartbeatTimer.unref();
    this.keyTimer = setInterval(() => this.guard('key check', () => this.checkKeys()), cfg.streamKeyCheckMs);
    this.keyTimer.unref();
  }

  /** Ends every socket (server shutdown) and stops the timers. */
  close(): void {
    if (this.sweepTimer) clearInterval(this.sweepTimer);
    if (this.heartbeatTimer) clearInterval(this.heartbeatTimer);
    if (this.keyTimer) clearInterval(this.keyTimer);
    this.sweepTimer = this.heartbeatTimer = this.keyTimer = null;
    for (const s of [...this.sockets]) this.end(s, 'GOING_AWAY');
  }

  // ---- upgrade: everything is checked before the socket exists (SPEC §5, §7) -------------------

  private upgrade(res: HttpResponse, req: HttpRequest, context: us_socket_context_t): void {
    // The upgrade headers are read here: readRequest copies only the headers routes use.
    const key = req.getHeader('sec-websocket-key');
    const protocol = req.getHeader('sec-websocket-protocol');
    const extensions = req.getHeader('sec-websocket-extensions');
    const info = readRequest(res, req, 0, this.deps.config.trustProxy);
    const sink = new ResponseSink(res);
    try {
      assertWebsocketOrigin(req, this.deps.config);
    } catch (err) {
      sendError(sink, toApiError(err), true);
      return;
    }
    void this.admit(info, sink, context, key, protocol, extensions);
  }

  private async admit(
    info: ReturnType<typeof readRequest>, sink: ResponseSink, context: us_socket_context_t,
    key: string, protocol: string, extensions: string,
  ): Promise<void> {
    const d = this.deps;
    let opened: string | null = null;
    try {
      if (d.inflight.draining) throw apiError('SERVICE_UNAVAILABLE', 'server is shutting down');
      const wait = d.throttle.blockedFor(info.ip);
      if (wait > 0) throw apiError('AUTH_THROTTLED', 'too many failed auth attempts, slow down', { headers: { 'retry-after': String(wait) } });
      const q = info.query;
      // SPEC §5.3: on the WebSocket the key may also come as ?apiKey=; the header wins when both are sent.
      const apiKey = info.headers['x-api-key'] ?? singleParam(q, 'apiKey');
      const headers = apiKey === undefined ? info.headers : { ...info.headers, 'x-api-key': apiKey };
      const principal = d.auth.authenticate('api', headers, true)!;
      const idParam = singleParam(q, 'id');
      const aliasParam = singleParam(q, 'accountId');
      assertAliasAgrees('id', 'accountId', idParam, aliasParam);
      const id = canonicalAccountId(idParam ?? aliasParam);
      if (!id) throw apiError('ACCOUNT_ID_REQUIRED', 'account id required: connect to /v1/stream?id=<accountUUID>');
      assertAccountScope(principal, id);
      const seat = d.tenancy.seatById(id);
      if (!seat || seat.customer_id !== principal.customerId || seat.removed_at !== null) throw apiError('NOT_FOUND', 'account not found');
      const hb = singleParam(q, 'heartbeat');
      if (hb !== undefined && hb !== '0' && hb !== '1') throw apiError('BAD_REQUEST', "parameter 'heartbeat': use 0 to disable heartbeats or 1 (default)");
      if (!key) throw apiError('BAD_REQUEST', 'not a WebSocket upgrade request');
      const known = this.accounts.get(id) ?? this.accountFromRecords(id);
      if (known && this.activeSeats.has(id)) {
        if (!this.accounts.has(id)) this.accounts.set(id, known);
        this.upgradeNow(known, sink, context, key, protocol, extensions, { accountId: id, keyId: principal.keyId, heartbeat: hb !== '0' });
        return;
      }
      if (!this.activeSeats.has(id)) {
        // SPEC §7 402, as on the classic routes: a seat still being prepared has no subscription yet.
        const st = await d.shards.call(id, 'seat.get', { seatId: id });
        if (st?.status !== 'ACTIVE') {
          throw apiError('NO_SUBSCRIPTION', st ? 'subscription not active: the seat is still being prepared (BUILDING_SERVER)' : 'subscription not active for this account');
        }
        this.activeSeats.add(id); // ACTIVE is the last seat status
      }
      const open = await d.shards.call(id, 'stream.open', { accountId: id }).catch((err: unknown) => {
        // The seat exists (checked above): the shard not knowing it means no broker login is bound yet.
        if (toApiError(err).code === 'NOT_FOUND') throw apiError('NOT_CONNECTED', 'this account has no broker login bound yet: call /ConnectEx with id=<accountUUID>');
        throw err;
      });
      opened = id;
      this.noteAccount(id, open);
      if (!sink.open) {
        // The client went away while we were checking: release what stream.open took.
        this.releaseIfUnused(id);
        return;
      }
      sink.done = true;
      const userData: UserData = { accountId: id, keyId: principal.keyId, heartbeat: hb !== '0' };
      sink.res.cork(() => sink.res.upgrade(userData, key, protocol, extensions, context));
    } catch (err) {
      const e = toApiError(err);
      if (e.code === 'INTERNAL_ERROR') d.log.error('stream upgrade failed', { err: e.cause ?? e });
      if (e.status === 401) d.throttle.fail(info.ip);
      if (opened) this.releaseIfUnused(opened);
      sendError(sink, e, true);
    }
  }

  /**
   * Stream state for an account with no socket yet, from what this thread knows without asking the
   * shard: its seat ACTIVE (cached, or in seat_state), its broker login bound (account_bindings), and
   * its server's clock (seen before). Undefined when any of that is missing: then the shard decides.
   * The phase is a placeholder until the socket's stream.open answers (milliseconds).
   */
  private accountFromRecords(id: string): AccountState | undefined {
    const binding = this.deps.bindingOf?.(id);
    if (!binding || !this.servers.has(binding.server)) return undefined;
    if (!this.activeSeats.has(id)) {
      if (this.deps.tenancy.seatState(id)?.status !== 'ACTIVE') return undefined;
      this.activeSeats.add(id);
    }
    return {
      id, platform: binding.platform, server: binding.server, phase: 'connecting', sockets: new Set(), symbolRefs: new Map(), candleRefs: new Map(), opens: 0,
      threadId: this.deps.shards.threadId(this.deps.shards.shardFor(id)),
    };
  }

  /**
   * A socket for an account that already has sockets here (its seat is ACTIVE, its broker login
   * bound): everything left to check is known in this thread, so the upgrade happens at once,
   * inside uWS's upgrade handler, and the shard's stream.open follows. An upgrade made later from
   * async code needs res.cork(), and the pinned uWS build can then close the new socket at random
   * right after `open` (a 1006 with no frame: uWebSockets issue 1928); this path never corks.
   */
  private upgradeNow(
    acc: AccountState, sink: ResponseSink, context: us_socket_context_t,
    key: string, protocol: string, extensions: string, userData: UserData,
  ): void {
    const d = this.deps;
    const id = acc.id;
    this.counters.syncUpgrades++;
    acc.opens++; // reserved for this socket's stream.open: the account state stays while it is under way
    sink.done = true;
    userData.openPending = true;
    // uWS runs `open` synchronously inside upgrade() and hands it a copy of userData, so the new
    // socket is passed back through this field rather than through userData.
    this.justOpened = undefined;
    try {
      sink.res.upgrade(userData, key, protocol, extensions, context);
    } catch (err) {
      acc.opens--;
      throw err;
    }
    const sock = this.justOpened as Sock | undefined;
    this.justOpened = undefined;
    d.shards.call(id, 'stream.open', { accountId: id }).then(
      (open) => {
        if (open.serverInfo) this.noteServer(open.serverInfo);
        const cur = this.accounts.get(id);
        if (cur) cur.phase = open.phase;
        if (!sock) {
          this.releaseIfUnused(id); // the socket never opened
          return;
        }
        sock.openState = 'open';
        const deferred = sock.deferred;
        sock.deferred = null;
        if (sock.closed) this.releaseIfUnused(id);
        else if (deferred) for (const f of deferred) this.guard('deferred', f);
      },
      (err: unknown) => {
        d.log.warn('stream.open failed after upgrade', { accountId: id, err: errorMessage(err) });
        this.dropOpen(acc); // nothing to close at the shard: the open failed
        if (sock) {
          sock.openState = 'failed';
          sock.deferred = null;
          this.end(sock, 'ACCOUNT_UNAVAILABLE');
        }
      },
    );
  }

  /**
   * The server's clock as a connection learned it from its broker. Only ever a known server: a
   * bridge connection that has not logged in yet has a placeholder (UTC) zone, and caching that
   * would stamp every later frame of the server in UTC (stream.open then answers serverInfo null,
   * and the zone follows with the 'connected' phase event and the snapshot and subscribe answers).
   * A server that reports another zone than before (it changed, or a restarted bridge) replaces it.
   */
  private noteServer(info: ServerInfo): void {
    const cur = this.servers.get(info.name);
    if (cur && sameZone(cur.info, info)) return;
    this.servers.set(info.name, { info, clock: clockFor(info) });
  }

  private noteAccount(id: string, open: StreamOpenResult): void {
    if (open.serverInfo) this.noteServer(open.serverInfo);
    let acc = this.accounts.get(id);
    if (!acc) {
      acc = { id, platform: open.platform, server: open.server, phase: open.phase, sockets: new Set(), symbolRefs: new Map(), candleRefs: new Map(), opens: 0,
        threadId: this.deps.shards.threadId(this.deps.shards.shardFor(id)) };
      this.accounts.set(id, acc);
    } else {
      acc.phase = open.phase;
    }
    acc.opens++;
  }

  /** Every stream.open is paired with one stream.close (when its socket closes or the upgrade fails). */
  private releaseIfUnused(id: string): void {
    const acc = this.accounts.get(id);
    if (acc) this.dropOpen(acc);
    // At shutdown every socket's release fails (the shards stop; their stream state goes with them):
    // not worth one warning per socket.
    this.deps.shards.call(id, 'stream.close', { accountId: id }).catch((err: unknown) => {
      if (!this.deps.inflight.draining) this.deps.log.warn('stream.close failed', { accountId: id, err: errorMessage(err) });
    });
  }

  /** One stream.open fewer for the account here; its state goes with the last one and the last socket. */
  private dropOpen(acc: AccountState): void {
    acc.opens--;
    if (acc.opens <= 0 && acc.sockets.size === 0 && this.accounts.get(acc.id) === acc) this.accounts.delete(acc.id);
  }

  // ---- socket lifecycle -------------------------------------------------------------------------

  private onOpen(ws: WebSocket<UserData>): void {
    const ud = ws.getUserData();
    const acc = this.accounts.get(ud.accountId);
    if (!acc) {
      ws.end(STREAM_CLOSE.ACCOUNT_UNAVAILABLE.code, STREAM_CLOSE.ACCOUNT_UNAVAILABLE.reason);
      return;
    }
    const sock: Sock = {
      ws, acc, keyId: ud.keyId, seq: 0, heartbeat: ud.heartbeat, closed: false, quotes: new Map(), pending: new Set(), candles: new Map(),
      coalescing: false, leftAt: new Map(), snapshot: 'none', posV: 0, ordV: 0, heldPositions: null, heldOrders: null,
      openState: ud.openPending ? 'pending' : 'open', deferred: ud.openPending ? [] : null, inbox: Promise.resolve(),
    };
    ud.sock = sock;
    if (ud.openPending) this.justOpened = sock;
    acc.sockets.add(sock);
    this.sockets.add(sock);
    // SPEC §6: the initial POSITIONS (and ORDERS) snapshot exists on P5 only.
    if (acc.platform === 'P5') {
      if (sock.deferred) {
        // Change events of the account may arrive before its stream.open is done (other sockets of
        // the account keep them coming): held like those during the snapshot request, so the
        // snapshot pair still comes first and what it already contains is not sent after it.
        sock.snapshot = 'waiting';
        sock.deferred.push(() => this.requestSnapshot(sock));
      } else {
        this.requestSnapshot(sock);
      }
    }
  }

  private onClose(ws: WebSocket<UserData>): void {
    const sock = ws.getUserData().sock;
    if (!sock) return;
    sock.closed = true;
    this.sockets.delete(sock);
    this.coalescing.delete(sock);
    const acc = sock.acc;
    acc.sockets.delete(sock);
    for (const [symbol, t] of sock.quotes) {
      t.refs--;
      this.decSymbol(acc, symbol);
    }
    for (const [k, c] of sock.candles) {
      c.topic.refs--;
      c.topic.partialMembers.delete(sock);
      this.decCandle(acc, k);
    }
    sock.quotes.clear();
    sock.candles.clear();
    // A pending stream.open releases when it completes; a failed one has nothing to release.
    if (sock.openState === 'open') this.releaseIfUnused(acc.id);
  }

  private end(sock: Sock, why: StreamCloseName): void {
    if (sock.closed) return;
    if (why === 'BACKPRESSURE') this.counters.backpressureCloses++;
    const c = STREAM_CLOSE[why];
    sock.ws.end(c.code, c.reason);
  }

  // ---- per-socket frames ------------------------------------------------------------------------

  /** Frames of the socket's own stream (state, heartbeats, acks, errors): per-socket seq, never
   *  dropped silently. Returns false if the socket is (now) closed. */
  private sendOwn(sock: Sock, type: FrameType, dataJson: string): boolean {
    if (sock.closed) return false;
    const msg = frame(type, ++sock.seq, dataJson);
    if (sock.ws.getBufferedAmount() + msg.length > this.hard) {
      this.end(sock, 'BACKPRESSURE');
      return false;
    }
    sock.ws.send(msg);
    return true;
  }

  private errorFrame(sock: Sock, code: string, message: string, request?: unknown): void {
    this.sendOwn(sock, 'ERROR', errorData(code, message, request));
  }

  /** The topic's last bar has not ended yet (by the clock; its close may simply not have come). */
  private isCurrentBar(t: CandleTopic, acc: AccountState): boolean {
    const clock = this.servers.get(acc.server)?.clock;
    return t.last !== null && clock !== undefined && barRangeUtc(t.timeframe, t.last.candle.time * 1000, clock)[1] > Date.now();
  }

  /**
   * The clock of the account's server. Known before any frame that needs it: snapshots and
   * subscribe answers carry the server, and the 'connected' phase event (which precedes the
   * account's first events) too. Throws rather than stamp server times in UTC.
   */
  private clockOf(acc: AccountState): ServerClock {
    const srv = this.servers.get(acc.server);
    if (!srv) throw new Error(`the clock of server ${acc.server} is not known yet (account ${acc.id})`);
    return srv.clock;
  }

  private requestSnapshot(sock: Sock): void {
    sock.snapshot = 'waiting';
    const acc = sock.acc;
    this.deps.shards.call(acc.id, 'stream.snapshot', { accountId: acc.id, timeoutMs: this.deps.config.streamSnapshotTimeoutMs }).then(
      (snap) => {
        this.noteServer(snap.server);
        if (sock.closed) return;
        const clock = this.clockOf(acc);
        sock.posV = snap.posV;
        sock.ordV = snap.ordV;
        sock.snapshot = 'sent';
        sock.ws.cork(() => {
          if (!this.sendOwn(sock, 'POSITIONS', positionsData(snap.positions, true, clock))) return;
          if (!this.sendOwn(sock, 'ORDERS', ordersData(snap.orders, true, clock))) return;
          const hp = sock.heldPositions;
          const ho = sock.heldOrders;
          sock.heldPositions = sock.heldOrders = null;
          if (hp && hp.v > sock.posV) this.sendPositions(sock, hp);
          if (ho && ho.v > sock.ordV) this.sendOrders(sock, ho);
        });
      },
      (err: unknown) => {
        if (sock.closed) return;
        const e = toApiError(err);
        // Not connected yet: the snapshot follows when the account's connection comes up.
        sock.snapshot = 'none';
        this.errorFrame(sock, e.code, `initial snapshot unavailable (${e.message}); it is sent when the account connects`);
      },
    ).catch((err: unknown) => this.deps.log.error('stream snapshot delivery failed', { accountId: acc.id, err: errorMessage(err) }));
  }

  private sendPositions(sock: Sock, ev: PositionsEventData): void {
    sock.posV = ev.v;
    this.sendOwn(sock, 'POSITIONS', positionsData(ev.positions, false, this.clockOf(sock.acc)));
  }

  private sendOrders(sock: Sock, ev: OrdersEventData): void {
    sock.ordV = ev.v;
    this.sendOwn(sock, 'ORDERS', ordersData(ev.orders, false, this.clockOf(sock.acc)));
  }

  // ---- client messages --------------------------------------------------------------------------

  private onMessage(ws: WebSocket<UserData>, raw: ArrayBuffer, isBinary: boolean): void {
    const sock = ws.getUserData().sock;
    if (!sock) return;
    // Copied now: uWS's buffer is only valid during this call.
    const text = isBinary ? null : Buffer.from(raw).toString('utf8');
    if (sock.deferred) sock.deferred.push(() => this.enqueue(sock, text));
    else this.enqueue(sock, text);
  }

  /**
   * Client messages are handled one at a time, in the order sent: a subscribe waits for the shard,
   * and an unsubscribe (or anything else) sent right after it must neither overtake it nor cancel
   * it before its SUBSCRIBED ack goes out. Every message gets its answer, in order.
   */
  private enqueue(sock: Sock, text: string | null): void {
    sock.inbox = sock.inbox.then(() => this.onText(sock, text)).catch((err: unknown) => {
      this.deps.log.error('stream message failed', { err: errorMessage(err) });
    });
  }

  private async onText(sock: Sock, text: string | null): Promise<void> {
    if (sock.closed) return;
    if (text === null) {
      this.errorFrame(sock, 'BAD_REQUEST', 'binary messages are not understood; send JSON text');
      return;
    }
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      this.errorFrame(sock, 'INVALID_JSON', 'message is not valid JSON', text.slice(0, 200));
      return;
    }
    const r = ClientMessage.safeParse(json);
    if (!r.success) {
      const why = r.error.issues.map((i) => `${i.path.join('.') || 'message'}: ${i.message}`).join('; ');
      this.errorFrame(sock, 'BAD_REQUEST', `${why}. Expected {"action":"subscribe"|"unsubscribe","symbol":"EURUSD","timeframe"?:"M1","timeframes"?:["M1","H1"]}`, json);
      return;
    }
    const m = r.data;
    const tfRaw = [...(m.timeframe !== undefined ? [m.timeframe] : []), ...(m.timeframes ?? [])];
    const tfs: Timeframe[] = [];
    for (const v of tfRaw) {
      const tf = parseTimeframe(v);
      if (!tf) {
        this.errorFrame(sock, 'BAD_REQUEST', `unknown timeframe ${JSON.stringify(v)}: use M1, M5, M15, M30, H1, H4, D1, W1 or MN1`, json);
        return;
      }
      if (!tfs.includes(tf)) tfs.push(tf);
    }
    const symbols = [...new Set([...(m.symbol !== undefined ? [m.symbol] : []), ...(m.symbols ?? [])])];
    for (const symbol of symbols) {
      if (sock.closed) return;
      if (m.action === 'subscribe') await this.subscribe(sock, symbol, tfs);
      else this.unsubscribe(sock, symbol, m.timeframe !== undefined || m.timeframes !== undefined ? tfs : undefined);
    }
  }

  private async subscribe(sock: Sock, symbol: string, tfs: Timeframe[]): Promise<void> {
    const acc = sock.acc;
    if (!sock.quotes.has(symbol) && sock.quotes.size >= MAX_SYMBOLS_PER_SOCKET) {
      this.errorFrame(sock, 'BAD_REQUEST', `at most ${MAX_SYMBOLS_PER_SOCKET} symbols per socket`, { action: 'subscribe', symbol });
      return;
    }
    const server = acc.server;
    // Take the references first (so a close during the await releases them), roll back on failure.
    const newQuote = !sock.quotes.has(symbol);
    let qt: QuoteTopic;
    if (newQuote) {
      qt = this.quoteTopic(server, symbol);
      qt.refs++;
      sock.quotes.set(symbol, qt);
      this.incRef(acc.symbolRefs, symbol);
    } else {
      qt = sock.quotes.get(symbol)!;
    }
    const added: string[] = [];
    for (const tf of tfs) {
      const k = `${symbol}|${tf}`;
      if (sock.candles.has(k)) continue;
      const topic = this.candleTopic(server, symbol, tf);
      topic.refs++;
      sock.candles.set(k, { topic, partial: true, joinedAt: Date.now() });
      this.incRef(acc.candleRefs, k);
      added.push(k);
    }
    let lastTick: Tick | null;
    if (newQuote) sock.pending.add(symbol);
    try {
      const sub = await this.deps.shards.call(acc.id, 'stream.sub', {
        accountId: acc.id, symbol, timeframes: tfs, timeoutMs: this.deps.config.streamSubscribeTimeoutMs,
      });
      this.noteServer(sub.server);
      lastTick = sub.lastTick;
    } catch (err) {
      sock.pending.delete(symbol);
      if (sock.closed) return;
      const e = toApiError(err);
      if (newQuote && sock.quotes.get(symbol) === qt) {
        qt.refs--;
        sock.quotes.delete(symbol);
        this.decSymbol(acc, symbol);
      }
      for (const k of added) {
        const c = sock.candles.get(k);
        if (!c) continue;
        c.topic.refs--;
        sock.candles.delete(k);
        this.decCandle(acc, k);
      }
      this.errorFrame(sock, e.code, `subscribe ${symbol}: ${e.message}`, { action: 'subscribe', symbol, timeframes: tfs });
      return;
    }
    sock.pending.delete(symbol);
    if (sock.closed || sock.quotes.get(symbol) !== qt) return; // closed or unsubscribed meanwhile
    const ws = sock.ws;
    ws.cork(() => {
      const all = [...sock.candles.keys()].filter((k) => k.startsWith(`${symbol}|`)).map((k) => k.slice(symbol.length + 1));
      if (!this.sendOwn(sock, 'SUBSCRIBED', JSON.stringify({ symbol, timeframes: all }))) return;
      if (newQuote) {
        if (!sock.coalescing) ws.subscribe(qt.key);
        else sock.leftAt.set(qt.key, -1);
        // The current quote right away: the shard's latest tick, published as new if we had not
        // seen it; else the topic's latest tick, encoded now. Not the topic's cached frame: its
        // ageMs was true when it was published, and the topic may have sat without subscribers
        // (and without ticks from the shard) for minutes since.
        if (lastTick && (!qt.lastTick || lastTick.timeMsc > qt.lastTick.timeMsc)) {
          this.ingestTick(server, lastTick);
        } else if (qt.lastTick) {
          const srv = this.servers.get(server);
          if (srv) ws.send(frame('QUOTE', qt.seq, quoteData(qt.lastTick, srv.clock, Date.now())));
        }
      }
      for (const k of added) {
        const c = sock.candles.get(k);
        if (!c) continue;
        const t = c.topic;
        t.partialMembers.add(sock);
        if (!sock.coalescing) ws.subscribe(t.partialKey);
        else sock.leftAt.set(t.key, -1);
        // The bar in progress, if the topic's last update is of the current bar: a bar whose time is
        // over was last seen while nobody listened, so its end is unknown here (the shard sends the
        // current bar with its next tick).
        if (t.last && !t.last.closed && !sock.coalescing && this.isCurrentBar(t, acc)) ws.send(frame('CANDLE', t.seq, candleData(t.last, true)));
      }
    });
  }

  private unsubscribe(sock: Sock, symbol: string, tfs: Timeframe[] | undefined): void {
    const acc = sock.acc;
    const qt = sock.quotes.get(symbol);
    if (!qt) {
      this.errorFrame(sock, 'BAD_REQUEST', `not subscribed to ${symbol}`, { action: 'unsubscribe', symbol });
      return;
    }
    // Unsubscribing a timeframe that is not subscribed is an error, as for a symbol (nothing changes).
    const missing = tfs?.filter((tf) => !sock.candles.has(`${symbol}|${tf}`)) ?? [];
    if (missing.length > 0) {
      this.errorFrame(sock, 'BAD_REQUEST', `not subscribed to ${symbol} ${missing.join(', ')}`, { action: 'unsubscribe', symbol, timeframes: tfs });
      return;
    }
    const keys = tfs === undefined
      ? [...sock.candles.keys()].filter((k) => k.startsWith(`${symbol}|`))
      : tfs.map((tf) => `${symbol}|${tf}`);
    for (const k of keys) {
      const c = sock.candles.get(k)!;
      sock.candles.delete(k);
      c.topic.refs--;
      c.topic.partialMembers.delete(sock);
      sock.ws.unsubscribe(c.topic.key);
      sock.ws.unsubscribe(c.topic.partialKey);
      sock.leftAt.delete(c.topic.key);
      this.decCandle(acc, k);
    }
    if (tfs === undefined) {
      sock.quotes.delete(symbol);
      qt.refs--;
      sock.ws.unsubscribe(qt.key);
      sock.leftAt.delete(qt.key);
      this.decSymbol(acc, symbol);
    }
    const left = [...sock.candles.keys()].filter((k) => k.startsWith(`${symbol}|`)).map((k) => k.slice(symbol.length + 1));
    this.sendOwn(sock, 'UNSUBSCRIBED', JSON.stringify({ symbol, timeframes: tfs ?? [], remainingTimeframes: tfs === undefined ? [] : left }));
  }

  private incRef(m: Map<string, number>, k: string): void {
    m.set(k, (m.get(k) ?? 0) + 1);
  }

  private decSymbol(acc: AccountState, symbol: string): void {
    const n = (acc.symbolRefs.get(symbol) ?? 1) - 1;
    if (n > 0) {
      acc.symbolRefs.set(symbol, n);
      return;
    }
    acc.symbolRefs.delete(symbol);
    this.deps.shards.call(acc.id, 'stream.unsub', { accountId: acc.id, symbol }).catch(() => undefined);
  }

  private decCandle(acc: AccountState, k: string): void {
    const n = (acc.candleRefs.get(k) ?? 1) - 1;
    if (n > 0) {
      acc.candleRefs.set(k, n);
      return;
    }
    acc.candleRefs.delete(k);
    const [symbol, tf] = k.split('|') as [string, Timeframe];
    this.deps.shards.call(acc.id, 'stream.unsub', { accountId: acc.id, symbol, timeframes: [tf] }).catch(() => undefined);
  }

  // ---- topics -----------------------------------------------------------------------------------

  private quoteTopic(server: string, symbol: string): QuoteTopic {
    let bySymbol = this.quoteTopics.get(server);
    if (!bySymbol) this.quoteTopics.set(server, (bySymbol = new Map()));
    let t = bySymbol.get(symbol);
    if (!t) {
      t = { key: `q|${server}|${symbol}`, server, symbol, seq: 0, lastT: -Infinity, lastBid: NaN, lastAsk: NaN, lastTick: null, refs: 0 };
      bySymbol.set(symbol, t);
    }
    return t;
  }

  private candleTopic(server: string, symbol: string, timeframe: Timeframe): CandleTopic {
    const key = `c|${server}|${symbol}|${timeframe}`;
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

  // ---- shard events -----------------------------------------------------------------------------

  /** Runs a timer or event callback: an exception there would otherwise be uncaught and end the process. */
  private guard(what: string, fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.deps.log.error(`stream ${what} failed`, { err: errorMessage(err) });
    }
  }

  /** ShardSet's onEvent. */
  onShardEvent(ev: StreamEvent): void {
    try {
      this.dispatch(ev);
    } catch (err) {
      this.deps.log.error('stream event failed', { kind: ev.kind, key: ev.key, err: errorMessage(err) });
    }
  }

  private dispatch(ev: StreamEvent): void {
    switch (ev.kind) {
      case STREAM_EVENT.tick: {
        const d = ev.data;
        this.ingestTick(d.server, d.tick);
        break;
      }
      case STREAM_EVENT.candle: {
        const d = ev.data;
        this.ingestCandle(d.server, d.candle);
        break;
      }
      case STREAM_EVENT.positions: {
        const acc = this.accounts.get(ev.key);
        if (!acc) break;
        const d = ev.data;
        for (const s of acc.sockets) {
          if (s.snapshot === 'waiting') s.heldPositions = d;
          else if (d.v > s.posV) this.sendPositions(s, d);
        }
        break;
      }
      case STREAM_EVENT.orders: {
        const acc = this.accounts.get(ev.key);
        if (!acc || acc.platform !== 'P5') break; // SPEC §6: ORDERS frames exist on P5 only
        const d = ev.data;
        for (const s of acc.sockets) {
          if (s.snapshot === 'waiting') s.heldOrders = d;
          else if (d.v > s.ordV) this.sendOrders(s, d);
        }
        break;
      }
      case STREAM_EVENT.deal: {
        const acc = this.accounts.get(ev.key);
        if (!acc || acc.sockets.size === 0) break;
        const data = tradeData(ev.data.deal, this.clockOf(acc));
        for (const s of acc.sockets) this.sendOwn(s, 'TRADE', data);
        break;
      }
      case STREAM_EVENT.phase: {
        const d = ev.data;
        if (d.server) this.noteServer(d.server);
        const acc = this.accounts.get(ev.key);
        if (!acc) break;
        if (d.server && d.server.name !== acc.server) {
          // Bound to a login on another server (/ConnectEx id=): the sockets' topics, clock and maybe
          // platform are the old server's. Clients reconnect; a socket arriving before the last
          // stream.open is released joins this state, so it describes the new binding from now on.
          acc.server = d.server.name;
          acc.platform = d.server.platform;
          acc.phase = d.phase;
          for (const s of [...acc.sockets]) this.end(s, 'ACCOUNT_REBOUND');
          break;
        }
        const was = acc.phase;
        acc.phase = d.phase;
        if (acc.phase === 'connected' && acc.platform === 'P5') {
          // A missing initial snapshot follows now; after an outage every socket gets a fresh pair,
          // since what changed at the broker meanwhile may not have reached us as events.
          for (const s of acc.sockets) if (s.snapshot === 'none' || (was === 'reconnecting' && s.snapshot === 'sent')) this.requestSnapshot(s);
        }
        break;
      }
      default:
        break;
    }
  }

  /** Dedupe, serialize once, publish. Public so benchmarks can drive the fan-out directly. */
  ingestTick(server: string, tick: Tick): void {
    this.counters.ticksIn++;
    const t = this.quoteTopic(server, tick.symbol);
    if (tick.timeMsc < t.lastT || (tick.timeMsc === t.lastT && tick.bid === t.lastBid && tick.ask === t.lastAsk)) {
      this.counters.ticksDuplicate++;
      return;
    }
    t.lastT = tick.timeMsc;
    t.lastBid = tick.bid;
    t.lastAsk = tick.ask;
    t.lastTick = tick;
    t.seq++;
    if (t.refs === 0) return;
    const srv = this.servers.get(server);
    if (!srv || !this.app) return;
    this.app.publish(t.key, frame('QUOTE', t.seq, quoteData(tick, srv.clock, Date.now())));
    this.counters.quotesPublished++;
    this.publishedSinceSweep = true;
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
    if (ev.closed) t.lastClosed = { ev, seq: t.seq, at: Date.now() };
    if (t.refs === 0 || !this.app) return;
    this.app.publish(t.key, frame('CANDLE', t.seq, candleData(ev, false)));
    if (t.partialMembers.size > 0) this.app.publish(t.partialKey, frame('CANDLE', t.seq, candleData(ev, true)));
    this.counters.candlesPublished++;
    this.publishedSinceSweep = true;
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

  // ---- backpressure -----------------------------------------------------------------------------

  private sweep(): void {
    this.checkShardRestarts();
    if (!this.publishedSinceSweep && this.coalescing.size === 0) return;
    this.publishedSinceSweep = false;
    for (const s of this.sockets) {
      if (s.closed) continue;
      const buffered = s.ws.getBufferedAmount();
      if (!s.coalescing) {
        if (buffered > this.soft) this.startCoalescing(s, buffered);
      } else if (buffered <= this.lowWater) {
        this.flush(s);
      }
    }
  }

  private startCoalescing(s: Sock, buffered: number): void {
    s.coalescing = true;
    this.coalescing.add(s);
    // If uWS may already have skipped frames for this socket (over its maxBackpressure), every topic must be flushed.
    const risk = buffered + 64 * 1024 >= this.hard;
    for (const t of s.quotes.values()) {
      s.ws.unsubscribe(t.key);
      s.leftAt.set(t.key, risk ? -1 : t.seq);
    }
    for (const c of s.candles.values()) {
      s.ws.unsubscribe(c.partial ? c.topic.partialKey : c.topic.key);
      s.leftAt.set(c.topic.key, risk ? -1 : c.topic.seq);
    }
  }

  /** Latest frame of every topic that moved since the socket left it; rejoin when drained. */
  private flush(s: Sock): void {
    if (s.closed) return;
    this.counters.coalescedFlushes++;
    const ws = s.ws;
    const now = Date.now();
    ws.cork(() => {
      for (const t of s.quotes.values()) {
        const at = s.leftAt.get(t.key) ?? -1;
        const srv = this.servers.get(t.server);
        if (t.seq > at && t.lastTick && srv) {
          // Re-encoded so ageMs tells how old the coalesced quote is now.
          ws.send(frame('QUOTE', t.seq, quoteData(t.lastTick, srv.clock, now)));
        }
        s.leftAt.set(t.key, t.seq);
      }
      for (const c of s.candles.values()) {
        const t = c.topic;
        const at = s.leftAt.get(t.key) ?? -1;
        if (t.seq > at && t.last) {
          const lc = t.lastClosed;
          if (lc && lc.ev !== t.last && lc.seq > at && lc.at >= c.joinedAt) {
            // A bar closed while the socket was behind and the next one has started since.
            if (c.partial && lc.ev.candle.time * 1000 >= c.joinedAt) c.partial = false;
            ws.send(frame('CANDLE', lc.seq, candleData(lc.ev, c.partial)));
            c.partial = false;
          }
          if (c.partial && t.last.candle.time * 1000 >= c.joinedAt) c.partial = false;
          ws.send(frame('CANDLE', t.seq, candleData(t.last, c.partial)));
          if (t.last.closed) c.partial = false;
        }
        s.leftAt.set(t.key, t.seq);
      }
    });
    if (ws.getBufferedAmount() > this.lowWater) return; // still behind: wait for the next drain
    s.coalescing = false;
    this.coalescing.delete(s);
    s.leftAt.clear();
    for (const t of s.quotes.values()) ws.subscribe(t.key);
    for (const c of s.candles.values()) {
      if (c.partial) {
        c.topic.partialMembers.add(s);
        ws.subscribe(c.topic.partialKey);
      } else {
        c.topic.partialMembers.delete(s);
        ws.subscribe(c.topic.key);
      }
    }
  }

  // ---- shard restarts ---------------------------------------------------------------------------

  private seenRestarts = 0;
  private recheckUntil = 0;

  /** A restarted shard lost the stream state of its accounts (subscriptions, listeners): their
   *  sockets are closed with RUNTIME_RESTARTED so clients reconnect, resubscribe and resync. The
   *  new thread may appear a little after the restart is counted, so accounts are re-checked for
   *  a few seconds. */
  private checkShardRestarts(): void {
    const shards = this.deps.shards;
    const r = shards.restarts();
    const now = Date.now();
    if (r !== this.seenRestarts) {
      this.seenRestarts = r;
      this.recheckUntil = now + 5_000;
    }
    if (now > this.recheckUntil) return;
    for (const acc of this.accounts.values()) {
      if (acc.sockets.size === 0) continue;
      const current = shards.threadId(shards.shardFor(acc.id));
      if (current === acc.threadId) continue;
      acc.threadId = current;
      acc.opens = 0; // the new thread holds no stream.open of ours
      for (const s of [...acc.sockets]) this.end(s, 'RUNTIME_RESTARTED');
    }
  }

  // ---- key revocation ---------------------------------------------------------------------------

  /** A key revoked through the management API: its sockets close now, not at the next check. */
  closeKey(keyId: string): void {
    for (const s of this.sockets) if (s.keyId === keyId) this.end(s, 'KEY_REVOKED');
  }

  /** A seat removed through the management API: its sockets close now (ACCOUNT_UNAVAILABLE). */
  closeAccount(accountId: string): void {
    const acc = this.accounts.get(accountId);
    if (acc) for (const s of [...acc.sockets]) this.end(s, 'ACCOUNT_UNAVAILABLE');
  }

  /** A key revoked after the upgrade must not keep streaming: each distinct key of the open sockets
   *  is looked up (one indexed SQLite read per key) and its sockets closed with KEY_REVOKED. */
  private checkKeys(): void {
    if (this.sockets.size === 0) return;
    for (const s of withRevokedKeys(this.sockets, (x) => x.keyId, this.deps.tenancy)) this.end(s, 'KEY_REVOKED');
  }

  // ---- heartbeats -------------------------------------------------------------------------------

  private heartbeats(): void {
    const now = Date.now();
    for (const s of this.sockets) {
      // A socket that is behind gets no heartbeat (the next one says the same, newer).
      if (!s.heartbeat || s.closed || s.coalescing) continue;
      // Unknown only before the account's connection first logged in: no tick has come then.
      const clock = this.servers.get(s.acc.server)?.clock;
      const symbols: HeartbeatSymbol[] = [];
      for (const t of s.quotes.values()) {
        if (s.pending.has(t.symbol)) continue;
        const last = t.lastTick;
        symbols.push(last && clock
          ? { symbol: t.symbol, lastTickTimeMsc: clock.toServer(last.timeMsc), lastQuoteAgeMs: Math.max(0, now - last.timeMsc), lastTickTimeMscUtc: last.timeMsc }
          : { symbol: t.symbol, lastTickTimeMsc: null, lastQuoteAgeMs: null, lastTickTimeMscUtc: null });
      }
      this.sendOwn(s, 'HEARTBEAT', heartbeatData(s.acc.phase, symbols, now));
    }
  }
}

function sameZone(a: ServerInfo, b: ServerInfo): boolean {
  const x = a.timeZone;
  const y = b.timeZone;
  return x.standardOffsetMinutes === y.standardOffsetMinutes && x.dst === y.dst;
}
