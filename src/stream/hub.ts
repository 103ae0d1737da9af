// /v1/stream on the main thread: the uWS wiring, the sockets' lifecycle, heartbeats and key checks.
// The work is in rooms: admission.ts (checks before the upgrade), protocol.ts (client messages),
// topics.ts (market data fan-out), outbox.ts (backpressure and coalescing), accounts.ts (account
// streams and snapshots). docs/stream.md is the client's view of all of it.
import type { TemplatedApp, WebSocket } from 'uWebSockets.js';
import type { Metrics } from '../http/metrics.js';
import { STREAM_PATH } from '../http/routes/sockets.js';
import { DemandTimer } from '../util/demandTimer.js';
import { errorMessage } from '../util/errorMessage.js';
import { AccountEvents } from './accountEvents.js';
import { AccountStreams } from './accounts.js';
import { StreamAdmission, type StreamAdmissionDeps } from './admission.js';
import { CLIENT_MESSAGE_MAX_BYTES, SOCKET_CLOSE } from './closeCodes.js';
import { heartbeatData, type HeartbeatSymbol } from './frames.js';
import { Outbox } from './outbox.js';
import { ClientProtocol } from './protocol.js';
import { withRevokedKeys } from './revokedKeys.js';
import type { Sock, StreamCounters, UserData } from './state.js';
import { Topics } from './topics.js';
import { STREAM_EVENT, type StreamEvent } from '../runtime/hosts/streamCommands.js';
import type { ShardEvent } from '../runtime/protocol.js';

/** `simClockOffsetMs`: SIM_START's offset of the embedded simulator's clock (the shards' market clock). */
export type StreamHubDeps = StreamAdmissionDeps & { simClockOffsetMs?: number };

export interface StreamStats extends StreamCounters {
  sockets: number;
  /** Accounts with stream state here (sockets open, or a stream.open under way). */
  accounts: number;
  /** Seats known ACTIVE here (the upgrade's cache: one per seat streamed, gone with the seat). */
  seatsKnownActive: number;
  coalescingSockets: number;
}

export class StreamHub {
  private readonly sockets = new Set<Sock>();
  readonly counters: StreamCounters = {
    ticksIn: 0, ticksDuplicate: 0, quotesInLocal: 0, quotesInRelay: 0, quotesPublished: 0, candlesPublished: 0, coalescedFlushes: 0, backpressureCloses: 0, syncUpgrades: 0,
  };
  private readonly topics: Topics;
  private readonly out: Outbox;
  private readonly accounts: AccountStreams;
  private readonly events: AccountEvents;
  private readonly protocol: ClientProtocol;
  private readonly admission: StreamAdmission;
  private sweeper: DemandTimer | null = null;
  private heartbeatTimer: NodeJS.Timeout | null = null;
  private keyTimer: NodeJS.Timeout | null = null;
  private historyTimer: NodeJS.Timeout | null = null;

  constructor(private readonly deps: StreamHubDeps) {
    const offsetMs = deps.config.shardClockOffsetMs + (deps.simClockOffsetMs ?? 0);
    this.topics = new Topics(this.counters, deps.clock, offsetMs === 0 ? deps.clock : { now: () => deps.clock.now() + offsetMs });
    this.out = new Outbox(deps.config, this.topics, this.sockets, this.counters);
    this.accounts = new AccountStreams(deps, this.topics, this.out);
    this.events = new AccountEvents(deps, this.accounts, this.topics, this.out);
    this.protocol = new ClientProtocol(deps, this.topics, this.accounts, this.events, this.out);
    this.admission = new StreamAdmission(deps, this.accounts, this.topics, this.out, this.counters, (what, fn) => this.guard(what, fn));
  }

  /** The epoch of QUOTE/CANDLE frames of this process (benchmarks build identical frames with it). */
  get marketEpoch(): string {
    return this.topics.epoch;
  }

  /** Whether the backpressure sweep is scheduled (it is not while nothing streams). */
  get sweeping(): boolean {
    return this.sweeper?.armed ?? false;
  }

  stats(): StreamStats {
    return { sockets: this.sockets.size, accounts: this.accounts.accounts.size, seatsKnownActive: this.accounts.activeSeats.size, coalescingSockets: this.out.coalescing.size, ...this.counters };
  }

  /** Gauges on /metrics: open and coalescing sockets, and the running counts of the fan-out. */
  registerMetrics(metrics: Metrics): void {
    metrics.gauge('tagw_stream_sockets', () => this.sockets.size);
    metrics.gauge('tagw_stream_coalescing_sockets', () => this.out.coalescing.size);
    metrics.gauge('tagw_stream_buffered_bytes', () => {
      // Read at scrape time only: one native call per open socket.
      let n = 0;
      for (const s of this.sockets) n += s.ws.getBufferedAmount();
      return n;
    }, 'Bytes written to /v1/stream sockets and not yet taken by their clients (uWS backpressure), all sockets.');
    metrics.gauge('tagw_stream_accounts', () => this.accounts.accounts.size);
    metrics.counter('tagw_stream_sync_upgrades_total', () => this.counters.syncUpgrades);
    metrics.counter('tagw_stream_ticks_in_total', () => this.counters.ticksIn);
    metrics.counter('tagw_stream_ticks_duplicate_total', () => this.counters.ticksDuplicate);
    metrics.labeledCounter('tagw_stream_quotes_in_total', ['path'], () => [[['local'], this.counters.quotesInLocal], [['relay'], this.counters.quotesInRelay]],
      'Ticks that made a new quote (not a duplicate), by where they came from: this node\'s shards (its accounts; cluster mode: a near source too) or the cluster relay.');
    metrics.counter('tagw_stream_quotes_published_total', () => this.counters.quotesPublished);
    metrics.counter('tagw_stream_candles_published_total', () => this.counters.candlesPublished);
    metrics.counter('tagw_stream_coalesced_flushes_total', () => this.counters.coalescedFlushes);
    metrics.counter('tagw_stream_backpressure_closes_total', () => this.counters.backpressureCloses);
    metrics.gauge('tagw_stream_history_held_bytes', () => this.events.held.bytes,
      'Memory (bytes, about) taken by account frames waiting for a full DATA_DIR, at most STREAM_HISTORY_HELD_MAX_BYTES.');
    metrics.counter('tagw_stream_history_overflows_total', () => this.events.held.overflows,
      'Account streams that began a new epoch because their frames waiting for a full DATA_DIR passed STREAM_HISTORY_HELD_MAX_BYTES.');
  }

  /** Registers the /v1/stream WebSocket route on the app and starts the timers. */
  mount(app: TemplatedApp): void {
    this.topics.app = app;
    const cfg = this.deps.config;
    app.ws<UserData>(STREAM_PATH, {
      maxPayloadLength: CLIENT_MESSAGE_MAX_BYTES,
      maxBackpressure: this.out.uwsLimit,
      closeOnBackpressureLimit: 0,
      idleTimeout: cfg.idleTimeoutSec,
      sendPingsAutomatically: true,
      upgrade: (res, req, context) => this.admission.upgrade(res, req, context),
      open: (ws) => this.guard('open', () => this.onOpen(ws)),
      message: (ws, msg, isBinary) => this.guard('message', () => {
        const sock = ws.getUserData().sock;
        if (sock) this.protocol.onMessage(sock, msg, isBinary);
      }),
      drain: (ws) => this.guard('drain', () => {
        const sock = ws.getUserData().sock;
        if (!sock) return;
        this.out.onDrain(sock);
        if (sock.stream === 'replaying') this.events.continueReplay(sock);
      }),
      close: (ws) => this.guard('close', () => this.onClose(ws)),
    });
    // Only while an account has stream state here (sockets, a held stream) or frames await their
    // backpressure check: an idle node has nothing to sweep and is not woken every streamSweepMs.
    // Armed when a socket opens or an account's stream is opened (AccountStreams.onActive).
    const sweeper = (this.sweeper = new DemandTimer(cfg.streamSweepMs, () => {
      this.guard('sweep', () => {
        this.events.shared?.checkRoles(); // cluster mode: leases that came or went
        this.out.sweep();
      });
      return this.accounts.accounts.size > 0 || this.topics.publishedBytes > 0 || this.out.coalescing.size > 0;
    }));
    this.accounts.onActive = () => sweeper.arm();
    this.heartbeatTimer = setInterval(() => this.guard('heartbeats', () => this.heartbeats()), cfg.streamHeartbeatMs);
    this.heartbeatTimer.unref();
    this.keyTimer = setInterval(() => this.guard('key check', () => this.checkKeys()), cfg.streamKeyCheckMs);
    this.keyTimer.unref();
    // A quarter of the age limit: a restart picks up a stream kept until at most that long before it stopped.
    this.historyTimer = setInterval(() => this.guard('history', () => this.accounts.touch()), cfg.streamHistoryMaxAgeMs / 4);
    this.historyTimer.unref();
    this.guard('history restore', () => this.accounts.restore());
  }

  /** Ends every socket (server shutdown) and stops the timers. */
  close(): void {
    this.sweeper?.stop();
    if (this.heartbeatTimer) clearInterval(this.heartbeatTimer);
    if (this.keyTimer) clearInterval(this.keyTimer);
    if (this.historyTimer) clearInterval(this.historyTimer);
    this.heartbeatTimer = this.keyTimer = this.historyTimer = null;
    // What was recorded is written, and the kept streams marked alive: a restart picks them up.
    this.guard('history flush', () => {
      this.events.commit();
      this.events.stop();
      this.accounts.touch();
    });
    this.accounts.stop();
    for (const s of [...this.sockets]) this.out.end(s, 'GOING_AWAY');
  }

  /** Runs a timer or event callback: an exception there would otherwise be uncaught and end the process. */
  private guard(what: string, fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.deps.log.error(`stream ${what} failed`, { err: errorMessage(err) });
    }
  }

  // ---- shard events -----------------------------------------------------------------------------

  /** ShardSet's onEvent. */
  onShardEvent(ev: StreamEvent): void {
    try {
      if (ev.kind === STREAM_EVENT.tick) {
        this.topics.ingestTick(ev.data);
      } else if (ev.kind === STREAM_EVENT.candle) {
        this.topics.ingestCandle(ev.data.server, ev.data.candle);
      } else {
        this.events.onEvent(ev);
      }
    } catch (err) {
      this.deps.log.error('stream event failed', { kind: ev.kind, key: ev.key, err: errorMessage(err) });
    }
  }

  /** How many of this node's sockets a market event's frame goes to (cluster mode: ownerOrder). */
  localSockets(ev: ShardEvent): number {
    if (ev.kind === STREAM_EVENT.tick) return this.topics.quoteSubscribers(ev.data.server, ev.data.tick.symbol);
    if (ev.kind === STREAM_EVENT.candle) return this.topics.candleSubscribers(ev.data.server, ev.data.candle.symbol, ev.data.candle.timeframe);
    return 0;
  }

  // ---- socket lifecycle -------------------------------------------------------------------------

  private onOpen(ws: WebSocket<UserData>): void {
    const ud = ws.getUserData();
    const acc = this.accounts.accounts.get(ud.accountId);
    if (!acc) {
      ws.end(SOCKET_CLOSE.ACCOUNT_UNAVAILABLE.code, SOCKET_CLOSE.ACCOUNT_UNAVAILABLE.reason);
      return;
    }
    const sock: Sock = {
      ws, acc, keyId: ud.keyId, heartbeat: ud.heartbeat, closed: false, quotes: new Map(), pending: new Set(), candles: new Map(),
      coalescing: false, leftAt: new Map(), stream: 'waiting', cursor: 0, backlog: null, clusterWait: null, since: ud.since,
      openState: ud.openPending ? 'pending' : 'open', deferred: ud.openPending ? [] : null, inbox: Promise.resolve(),
      came: { at: this.deps.clock.now(), epoch: acc.history.epoch, sent: acc.history.sent },
    };
    ud.sock = sock;
    if (ud.openPending) this.admission.justOpened = sock;
    acc.sockets.add(sock);
    this.sockets.add(sock);
    this.sweeper?.arm();
    // Account events that arrive before its stream.open is done (other sockets of the account keep
    // them coming) are covered by the snapshot or the replay that starts the socket's stream.
    // Not from inside `open`, where uWS is still in the middle of the upgrade: a resume writes at
    // once, and what `open` does widens the window of uWS's fault with upgrades from async code
    // (closed off by src/http/corkAnchor.ts; a write there once closed the socket with no frame).
    if (sock.deferred) sock.deferred.push(() => this.events.start(sock));
    else queueMicrotask(() => this.guard('account stream start', () => { if (!sock.closed) this.events.start(sock); }));
  }

  private onClose(ws: WebSocket<UserData>): void {
    const sock = ws.getUserData().sock;
    if (!sock) return;
    sock.closed = true;
    this.events.endClusterWait(sock);
    this.sockets.delete(sock);
    this.out.forget(sock);
    const acc = sock.acc;
    acc.sockets.delete(sock);
    for (const [symbol, t] of sock.quotes) {
      t.refs--;
      this.accounts.decSymbol(acc, symbol);
    }
    for (const [k, c] of sock.candles) {
      c.topic.refs--;
      c.topic.partialMembers.delete(sock);
      this.accounts.decCandle(acc, k);
    }
    sock.quotes.clear();
    sock.candles.clear();
    // A pending stream.open releases when it completes; a failed one has nothing to release.
    if (sock.openState === 'open') this.accounts.releaseIfUnused(acc.id);
  }

  // ---- key revocation ---------------------------------------------------------------------------

  /** A key revoked through the management API: its sockets close now, not at the next check. */
  closeKey(keyId: string): void {
    for (const s of this.sockets) if (s.keyId === keyId) this.out.end(s, 'KEY_REVOKED');
  }

  /** A seat removed through the management API: its sockets close now (ACCOUNT_UNAVAILABLE). */
  closeAccount(accountId: string): void {
    const acc = this.accounts.accounts.get(accountId);
    if (acc) for (const s of [...acc.sockets]) this.out.end(s, 'ACCOUNT_UNAVAILABLE');
    this.accounts.forget(accountId);
  }

  /** A key revoked after the upgrade must not keep streaming: each distinct key of the open sockets
   *  is looked up (one indexed SQLite read per key) and its sockets closed with KEY_REVOKED. */
  private checkKeys(): void {
    if (this.sockets.size === 0) return;
    for (const s of withRevokedKeys(this.sockets, (x) => x.keyId, this.deps.tenancy)) this.out.end(s, 'KEY_REVOKED');
  }

  // ---- heartbeats -------------------------------------------------------------------------------

  private heartbeats(): void {
    const now = this.deps.clock.now();
    for (const s of this.sockets) {
      // A socket that is behind gets no heartbeat (the next one says the same, newer).
      if (!s.heartbeat || s.closed || s.coalescing) continue;
      // A resume not answered yet (cluster mode: the account's role or the shared history read still
      // under way): RESUMED is the first frame such a socket gets (docs/stream.md). After a
      // recovered:false none either until its fresh snapshot, which says more than a heartbeat.
      if (s.stream === 'waiting' && s.since !== null && s.since !== 'message') continue;
      // Unknown only before the account's connection first logged in: no tick has come then.
      const clock = this.topics.servers.get(s.acc.server)?.clock;
      // Quote ages on the market's clock, as a QUOTE's ageMs (SIM_START, a bridged --start): the
      // heartbeat's own time is the gateway's.
      const marketNow = this.topics.marketNow(s.acc.server);
      const symbols: HeartbeatSymbol[] = [];
      for (const t of s.quotes.values()) {
        if (s.pending.has(t.symbol)) continue;
        const last = t.lastTick;
        symbols.push(last && clock
          ? { symbol: t.symbol, lastTickTimeMsc: clock.toServer(last.timeMsc), lastQuoteAgeMs: Math.max(0, marketNow - last.timeMsc), lastTickTimeMscUtc: last.timeMsc }
          : { symbol: t.symbol, lastTickTimeMsc: null, lastQuoteAgeMs: null, lastTickTimeMscUtc: null });
      }
      this.out.sendControl(s, 'HEARTBEAT', heartbeatData(s.acc.phase, symbols, now));
    }
  }
}
