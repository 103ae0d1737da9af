// The account stream of /v1/stream (docs/stream.md): POSITIONS, ORDERS and TRADE get the next seq
// of their account's epoch, are written to the history store (one transaction per batch, before
// their frames leave, so a restarted gateway never finds a client ahead of it), then go to every
// live socket of the account. On a full disk a batch waits in memory, its frames unsent, and later
// ones wait behind it: all are written, then sent, once there is room (docs/storage.md). A socket
// becomes live by a snapshot (fresh, or after a failed resume) or by a replay of what it missed
// (since=<epoch>:<seq>).
import type { Config } from '../config.js';
import { toApiError } from '../errors.js';
import { isNoOpenStream, STREAM_EVENT, type StreamEvent, type StreamSnapshotResult, type PhaseEventData } from '../runtime/hosts/streamCommands.js';
import { eventIsOlder, snapshotIsOlder } from '../runtime/hosts/listVersion.js';
import type { Shards } from '../runtime/shardSet.js';
import { errorMessage } from '../util/errorMessage.js';
import type { AccountStreams } from './accounts.js';
import { byAccount, HistoryWrites, type HistoryWritesDeps, type Pending } from './historyWrites.js';
import { ordersData, positionsData, tradeData } from '../runtime/frameData.js';
import { accountFrame, type FrameType } from './frames.js';
import type { HistoryEntry, StreamPosition } from './history.js';
import type { Outbox } from './outbox.js';
import { asSnapshot, type SharedHistory } from './shared.js';
import { SharedAccounts } from './sharedAccounts.js';
import type { AccountState, Sock } from './state.js';
import type { Topics } from './topics.js';
import type { Clock } from '../util/clock.js';

export interface AccountEventDeps extends HistoryWritesDeps { config: Config; shards: Shards; clock: Clock; shared?: SharedHistory }

export class AccountEvents {
  private pending: Pending[] = [];
  private commitQueued = false;
  /** One node: the history's writes in SQLite, their frames sent once written (historyWrites.ts). */
  private readonly writes: HistoryWrites;
  private readonly resyncing = new Set<AccountState>();
  /** Cluster mode only (docs/cluster.md "Streams and resume"). */
  readonly shared: SharedAccounts | undefined;

  constructor(
    private readonly deps: AccountEventDeps, private readonly accounts: AccountStreams,
    private readonly topics: Topics, private readonly out: Outbox,
  ) {
    this.writes = new HistoryWrites(deps, {
      deliver: (acc, entries) => this.deliver(acc, entries),
      overflow: (acc) => this.overflow(acc),
      kept: (acc) => this.accounts.accounts.get(acc.id) === acc,
    }, deps.config.streamHistoryHeldMaxBytes);
    accounts.onOpened = (acc) => this.resync(acc);
    accounts.onEpoch = (acc) => this.writes.epochBegun(acc);
    const shared = deps.shared;
    if (shared) {
      const limits = { maxEvents: deps.config.streamHistoryMaxEvents, maxAgeMs: deps.config.streamHistoryMaxAgeMs };
      const ensureClock = async (acc: AccountState): Promise<void> => {
        if (topics.servers.has(acc.server)) return;
        const snap = await deps.shards.call(acc.id, 'stream.snapshot', { accountId: acc.id, timeoutMs: deps.config.streamSnapshotTimeoutMs });
        topics.noteServer(snap.server);
      };
      const s = new SharedAccounts({ shared, clock: deps.clock, shardClock: topics.shardClock, offsetOf: (server) => topics.servers.get(server)?.info.clockOffsetMs ?? 0, limits, log: deps.log, ensureClock }, accounts, out, this);
      accounts.onRotated = (acc, rebound) => s.epochStarted(acc, rebound);
      accounts.onReleased = (acc) => s.release(acc);
      this.shared = s;
    }
  }

  /** Shard events keyed by account (positions, orders, deals, connection phase). */
  onEvent(ev: StreamEvent): void {
    let acc = this.accounts.accounts.get(ev.key);
    if (!acc && this.shared) {
      // Cluster mode: the owner numbers an account's events whichever node's sockets follow it.
      if (ev.kind === STREAM_EVENT.phase && ev.data.server) this.topics.noteServer(ev.data.server);
      acc = this.shared.adopt(ev);
    }
    if (!acc) return;
    // Cluster mode: only the owner numbers (a follower sends the owner's frames); held while the role is taken.
    if (this.shared && (ev.kind === STREAM_EVENT.positions || ev.kind === STREAM_EVENT.orders || ev.kind === STREAM_EVENT.deal
      || ev.kind === STREAM_EVENT.rebound) && this.shared.intercept(acc, ev)) return;
    switch (ev.kind) {
      case STREAM_EVENT.positions:
        // Versions at or below the known list are older than it (a snapshot read after them).
        if (acc.positions !== null && eventIsOlder(ev.data, acc.posV)) return;
        acc.positions = ev.data.positions;
        acc.posV = { src: ev.data.src, v: ev.data.v };
        this.record(acc, 'POSITIONS', positionsData(ev.data.positions, false, this.topics.clockOf(acc)));
        break;
      case STREAM_EVENT.orders:
        if (acc.platform !== 'P5') return; // SPEC §6: ORDERS frames exist on P5 only
        if (acc.orders !== null && eventIsOlder(ev.data, acc.ordV)) return;
        acc.orders = ev.data.orders;
        acc.ordV = { src: ev.data.src, v: ev.data.v };
        this.record(acc, 'ORDERS', ordersData(ev.data.orders, false, this.topics.clockOf(acc)));
        break;
      case STREAM_EVENT.deal:
        if (acc.heldDeals) acc.heldDeals.push(ev.data.deal); // behind the missed ones a resync is reading
        else if (acc.deals.take(ev.data.deal)) this.record(acc, 'TRADE', tradeData(ev.data.deal, this.topics.clockOf(acc)));
        break;
      case STREAM_EVENT.phase:
        this.onPhase(acc, ev.data);
        break;
      case STREAM_EVENT.rebound:
        this.rebound(acc, ev.data.server, ev.data.platform);
        break;
      default:
        break;
    }
  }

  private onPhase(acc: AccountState, d: PhaseEventData): void {
    if (d.server) this.topics.noteServer(d.server);
    if (d.server && d.server.name !== acc.server) {
      acc.phase = d.phase;
      this.rebound(acc, d.server.name, d.server.platform); // not announced (a binding changed elsewhere)
      return;
    }
    const was = acc.phase;
    acc.phase = d.phase;
    if (acc.phase !== 'connected') return;
    // After an outage (or a restart) what changed at the broker may not have arrived as events.
    if (was === 'reconnecting' || acc.needsResync) this.resync(acc);
    for (const s of acc.sockets) if (s.stream === 'none') this.requestSnapshot(s);
  }

  /**
   * Bound to another broker login (/ConnectEx id=): the account stream cannot continue (another
   * login's positions and deals; on another server also other topics, clock, maybe platform).
   * Clients reconnect; a socket arriving before the last stream.open is released joins this state,
   * so it describes the new binding from now on.
   */
  private rebound(acc: AccountState, server: string, platform: AccountState['platform']): void {
    this.commit();
    acc.server = server;
    acc.platform = platform;
    // Cluster mode: a follower takes the new epoch from its owner (the epoch's marker in JetStream
    // says 'rebound' and ends its sockets with 4012 then), not a local one: so its sockets close
    // once, at the owner's epoch change, and a socket opened after it streams the new epoch.
    if (acc.shared?.role === 'follower') return;
    this.accounts.rotate(acc, true);
    for (const s of [...acc.sockets]) this.out.end(s, 'ACCOUNT_REBOUND');
  }

  // ---- the history and delivery -----------------------------------------------------------------

  private record(acc: AccountState, type: FrameType, dataJson: string): void {
    if (this.shared && !this.shared.numbers(acc)) return;
    const entry = acc.history.append(type, dataJson, this.deps.clock.now());
    this.pending.push({ acc, epoch: acc.history.epoch, entry });
    if (!this.commitQueued) {
      this.commitQueued = true;
      queueMicrotask(() => this.commit());
    }
  }

  /** Writes what was recorded since the last commit (one transaction), then sends it. */
  commit(): void {
    this.commitQueued = false;
    if (this.pending.length === 0) return;
    const batch = this.pending;
    this.pending = [];
    if (this.shared) return this.shared.commit([...byAccount(batch)]); // stored in JetStream, sent once stored
    this.writes.write(batch);
  }

  /** Shutdown: what a full disk kept waiting is tried once more. */
  stop(): void {
    this.writes.stop();
  }

  /** Entries of the account's stream (stored) to its live sockets, each from past its cursor. */
  deliver(acc: AccountState, entries: readonly HistoryEntry[]): void {
    if (entries.length > 0) acc.history.markSent(entries.at(-1)!.seq);
    for (const s of acc.sockets) {
      if (s.stream !== 'live') continue;
      for (const e of entries) {
        if (e.seq <= s.cursor) continue;
        if (!this.out.sendText(s, e.frame)) break;
        s.cursor = e.seq;
      }
    }
  }

  // ---- sockets ----------------------------------------------------------------------------------

  /** A socket's account stream begins: held for a resume message, resumed, or fresh. */
  start(sock: Sock): void {
    if (sock.since === 'message') {
      // Held at once, so the first message finds it held whenever it comes; the cluster role is
      // taken meanwhile, and the message's start waits for it (startHeld).
      this.shared?.gate(sock.acc, sock.came.at, () => undefined);
      sock.stream = 'held';
      return;
    }
    if (this.shared?.gate(sock.acc, sock.came.at, (from) => {
      if (sock.closed) return;
      // A fresh socket that waited for the node's first role starts where that role began the
      // node's history (P5: at its snapshot), not past the frames the feed delivered since; when
      // frames stored since the socket came may lie before that (a failed try, a head read answered
      // late) it is told (4014, the client reconnects and resyncs). A resume replays from its own
      // position instead.
      if (sock.since === null && from === 'late') return void this.out.end(sock, 'STREAM_GAP');
      if (sock.since === null && typeof from === 'number' && !sock.acc.shared?.ready) return this.startFresh(sock, from);
      this.start(sock);
    })) {
      // Cluster: the account's role is being taken (JetStream read); the wait is bounded.
      this.boundClusterWait(sock, sock.since === null ? 'snapshot' : 'resume');
      return;
    }
    if (sock.since) this.resume(sock, sock.since);
    else this.startFresh(sock);
  }

  /** since=message: the first message starts the account stream as the parameter would have (a
   *  resume's position, or null: fresh), with the same waits and bounds. */
  startHeld(sock: Sock, since: StreamPosition | null): void {
    const h = sock.acc.history;
    sock.came = { at: this.deps.clock.now(), epoch: h.epoch, sent: h.sent };
    sock.since = since;
    sock.stream = 'waiting';
    this.start(sock);
  }

  /** P5: the snapshot pair first (SPEC §6); P4 has none: live from what was sent when the socket
   *  came, or from `from` (cluster: where the node's first role began, before the socket's wait ended). */
  private startFresh(sock: Sock, from?: number): void {
    if (sock.acc.platform === 'P5') {
      this.requestSnapshot(sock);
      return;
    }
    this.commit();
    const h = sock.acc.history;
    const sent = h.sent;
    // Its start may come long after the socket (its stream.open answered late: the owner dead, its
    // lease running out): what was sent meanwhile is numbered after it came, and it gets it. Before,
    // it was placed at what was sent at its start, past those frames, without a word (`npm run
    // chaos`, seed 61222032). A history begun since without ending the socket (the node's first
    // role, which goes by `from` when the socket waited for it; or a local epoch) is another epoch:
    // what it sent may be owed, and the client is told unless it sent nothing yet.
    const at = from ?? (sock.came.epoch === h.epoch ? sock.came.sent : sent < h.firstSeq ? sent : -1);
    if (at + 1 < h.firstSeq) return void this.out.end(sock, 'STREAM_GAP'); // not held (any more): the client resyncs
    // What is still being stored follows as it is delivered.
    sock.cursor = Math.min(at, sent);
    sock.stream = sock.cursor < sent ? 'replaying' : 'live';
    this.continueReplay(sock);
  }

  resume(sock: Sock, since: StreamPosition): void {
    this.commit();
    const r = sock.acc.history.replay(since, this.deps.clock.now());
    // Cluster mode: what this node's memory does not reach back to may be in the shared history.
    if (!r.recovered && this.shared && since.epoch === sock.acc.history.epoch) return this.shared.resume(sock, since);
    if (!r.recovered) {
      if (this.answerResume(sock, false, 0)) this.requestSnapshot(sock);
      return;
    }
    if (!this.answerResume(sock, true, r.entries.length)) return;
    sock.cursor = since.seq;
    sock.stream = 'replaying';
    this.continueReplay(sock);
  }

  /** A resume's answer, the socket's first frame: the bound on its wait for the cluster ends. */
  answerResume(sock: Sock, recovered: boolean, replayed: number): boolean {
    this.endClusterWait(sock);
    return this.out.sendControl(sock, 'RESUMED', `{"recovered":${recovered},"replayed":${replayed}}`);
  }

  /**
   * Sends what the socket still misses, up to the hard limit; the rest on the next drain (a long
   * replay may be larger than one socket buffer). Live frames wait behind it, so the order holds;
   * the socket is live once it has everything. Cluster mode: a replay from the shared history
   * (sock.backlog) goes first, paced the same way, then what this node's memory holds after it.
   */
  continueReplay(sock: Sock): void {
    if (sock.closed || sock.stream !== 'replaying') return;
    const ws = sock.ws;
    const fits = (frame: string): boolean => {
      const buffered = ws.getBufferedAmount();
      return buffered === 0 || buffered + frame.length <= this.out.hard;
    };
    const b = sock.backlog;
    if (b) {
      ws.cork(() => {
        for (; b.next < b.entries.length; b.next++) {
          const e = b.entries[b.next]!;
          if (!fits(e.frame)) return;
          ws.send(e.frame);
          sock.cursor = e.seq;
        }
      });
      if (b.next < b.entries.length) return; // the rest on the next drain
      sock.backlog = null;
    }
    // Up to what was delivered (stored): the rest reaches the socket with its delivery. A
    // shared-history replay may reach past what this node's feed delivered yet: live frames skip those.
    const h = sock.acc.history;
    if (sock.cursor >= h.sent) {
      sock.stream = 'live';
      return;
    }
    const r = h.replay({ epoch: h.epoch, seq: sock.cursor }, this.deps.clock.now());
    if (!r.recovered) {
      this.out.end(sock, 'BACKPRESSURE'); // it read so slowly that the history moved past it
      return;
    }
    ws.cork(() => {
      for (const e of r.entries) {
        if (e.seq > h.sent || !fits(e.frame)) return;
        ws.send(e.frame);
        sock.cursor = e.seq;
      }
    });
    if (sock.cursor >= h.sent) sock.stream = 'live';
  }

  /** The socket's snapshot: from the lists the stream carried, or the shard's when not known yet. */
  requestSnapshot(sock: Sock): void {
    sock.stream = 'waiting';
    const acc = sock.acc;
    // A follower's lists come from the owner (the stream's latest, or the owner's shard), not its own.
    const follower = acc.shared?.role === 'follower';
    const last = acc.shared?.lastData;
    if (follower ? last?.POSITIONS !== undefined && (acc.platform === 'P4' || last.ORDERS !== undefined)
      : acc.positions !== null && (acc.platform === 'P4' || acc.orders !== null)) {
      this.sendSnapshot(sock);
      return;
    }
    this.endClusterWait(sock); // the shard's lists: bounded by streamSnapshotTimeoutMs, answered as such
    this.deps.shards.call(acc.id, 'stream.snapshot', { accountId: acc.id, timeoutMs: this.deps.config.streamSnapshotTimeoutMs }).then(
      (snap) => {
        this.topics.noteServer(snap.server);
        if (this.accounts.accounts.get(acc.id) === acc) this.merge(acc, snap);
        if (!sock.closed && sock.stream === 'waiting') this.sendSnapshot(sock);
      },
      (err: unknown) => {
        if (sock.closed || sock.stream !== 'waiting') return;
        const e = toApiError(err);
        sock.stream = 'none';
        // The account's stream is not open where it runs (see protocol.ts, subscribe): no snapshot
        // would follow, nor anything else. The client reconnects.
        if (isNoOpenStream(e)) {
          this.out.errorFrame(sock, e.code, `initial snapshot unavailable (${e.message}); reconnect`);
          this.out.end(sock, 'ACCOUNT_UNAVAILABLE');
          return;
        }
        // Not connected yet: the snapshot follows when the account's connection comes up.
        this.out.errorFrame(sock, e.code, `initial snapshot unavailable (${e.message}); it is sent when the account connects`);
      },
    ).catch((err: unknown) => this.deps.log.error('stream snapshot delivery failed', { accountId: acc.id, err: errorMessage(err) }));
  }

  /** A snapshot newer than the lists the stream carried goes into the stream as a change. */
  private merge(acc: AccountState, snap: StreamSnapshotResult): void {
    const clock = this.topics.clockOf(acc);
    const known = { positions: acc.positions !== null, orders: acc.orders !== null };
    const took = this.takeLists(acc, snap);
    if (known.positions && took.positions) this.record(acc, 'POSITIONS', positionsData(snap.positions, false, clock));
    if (known.orders && took.orders && acc.platform === 'P5') this.record(acc, 'ORDERS', ordersData(snap.orders, false, clock));
  }

  /** Takes a snapshot's lists, each unless a change counted after its read began is held
   *  (listVersion.ts); says which it took. */
  private takeLists(acc: AccountState, snap: StreamSnapshotResult): { positions: boolean; orders: boolean } {
    const posV = { src: snap.src, v: snap.posV };
    const ordV = { src: snap.src, v: snap.ordV };
    const took = {
      positions: acc.positions === null || !snapshotIsOlder(posV, acc.posV),
      orders: acc.orders === null || !snapshotIsOlder(ordV, acc.ordV),
    };
    if (took.positions) [acc.positions, acc.posV] = [snap.positions, posV];
    if (took.orders) [acc.orders, acc.ordV] = [snap.orders, ordV];
    return took;
  }

  private sendSnapshot(sock: Sock): void {
    this.commit();
    const acc = sock.acc;
    const h = acc.history;
    if (h.sent < h.seq && this.shared) {
      // Cluster owner: the lists are as of numbered frames not stored in JetStream yet. A snapshot
      // at that seq would place the client past what a new owner continues from (it would skip
      // that owner's own frames of those numbers): it waits for the store (one ack, or its timeout),
      // and again while events keep arriving faster than JetStream acknowledges, up to a bound.
      this.boundClusterWait(sock, 'snapshot');
      this.shared.afterStores(() => {
        if (!sock.closed && sock.stream === 'waiting' && sock.acc === acc) this.sendSnapshot(sock);
      });
      return;
    }
    if (h.sent < h.seq && this.writes.waiting) {
      // One node, a full disk: the lists are as of frames not stored yet, so the snapshot waits for
      // them as they do (a restart would find the client ahead of it).
      this.writes.afterStored(() => {
        if (!sock.closed && sock.stream === 'waiting' && sock.acc === acc) this.sendSnapshot(sock);
      });
      return;
    }
    this.endClusterWait(sock);
    const clock = this.topics.clockOf(acc);
    sock.cursor = h.seq;
    sock.stream = 'live';
    const last = acc.shared?.role === 'follower' ? acc.shared.lastData : {};
    const pos = last.POSITIONS === undefined ? positionsData(acc.positions ?? [], true, clock) : asSnapshot(last.POSITIONS);
    const ord = () => last.ORDERS === undefined ? ordersData(acc.orders ?? [], true, clock) : asSnapshot(last.ORDERS);
    sock.ws.cork(() => {
      if (!this.out.sendText(sock, accountFrame('POSITIONS', h.seq, h.epoch, pos))) return;
      if (acc.platform === 'P5') this.out.sendText(sock, accountFrame('ORDERS', h.seq, h.epoch, ord()));
    });
  }

  /** A socket's wait for the cluster lasts at most `streamSnapshotStoreWaitMs` from its first wait:
   *  a fresh socket's snapshot (the account's role being taken, the owner's frames being stored in
   *  JetStream) and a resume (the role, the read of the shared history). Past it the socket is told,
   *  never left silent: ERROR SERVICE_UNAVAILABLE, then 4010 (the client reconnects; a resumer with
   *  the same since: its position is still good, nothing about it is known yet). What still waits
   *  for it (the role's promise, the store chain, the JetStream read) finds it closed and ends. */
  boundClusterWait(sock: Sock, what: 'snapshot' | 'resume'): void {
    if (sock.clusterWait) return;
    const ms = this.deps.config.streamSnapshotStoreWaitMs;
    sock.clusterWait = setTimeout(() => {
      sock.clusterWait = null;
      if (sock.closed || sock.stream !== 'waiting') return;
      sock.stream = 'none';
      if (what === 'resume') {
        this.deps.log.warn('stream resume not answered in time', { accountId: sock.acc.id, waitMs: ms });
        this.out.errorFrame(sock, 'SERVICE_UNAVAILABLE', `resume unavailable: the cluster's account history (JetStream) did not answer within ${ms} ms; reconnect with the same since`);
      } else {
        this.deps.log.warn('stream snapshot not ready in time', { accountId: sock.acc.id, waitMs: ms });
        this.out.errorFrame(sock, 'SERVICE_UNAVAILABLE', `initial snapshot unavailable: the cluster's account history (JetStream) did not catch up within ${ms} ms; reconnect`);
      }
      this.out.end(sock, 'ACCOUNT_UNAVAILABLE');
    }, ms);
    sock.clusterWait.unref?.();
  }

  endClusterWait(sock: Sock): void {
    if (sock.clusterWait) clearTimeout(sock.clusterWait);
    sock.clusterWait = null;
  }

  /**
   * After an outage or a restart, for every socket and the history: the deals made at the broker since
   * the last one the stream carried that did not arrive as events (TRADE, in broker order), then a
   * snapshot pair. Live deals wait behind the missed ones meanwhile; if the broker's deal history
   * cannot be read, the stream cannot vouch for continuity and begins a new epoch.
   */
  resync(acc: AccountState): void {
    if (this.resyncing.has(acc) || (acc.shared && acc.shared.role !== 'owner')) return;
    this.resyncing.add(acc);
    acc.heldDeals ??= [];
    const epoch = acc.history.epoch;
    const args = { accountId: acc.id, timeoutMs: this.deps.config.streamSnapshotTimeoutMs, dealsAfter: acc.deals.mark };
    this.deps.shards.call(acc.id, 'stream.snapshot', args).then(
      (snap) => {
        this.resyncing.delete(acc);
        this.topics.noteServer(snap.server);
        if (this.accounts.accounts.get(acc.id) !== acc || acc.history.epoch !== epoch) return;
        const clock = this.topics.clockOf(acc);
        if (!snap.deals) return void this.breakContinuity(acc);
        for (const d of acc.deals.missed(snap.deals, acc.heldDeals ?? [])) this.record(acc, 'TRADE', tradeData(d, clock));
        acc.heldDeals = null;
        acc.needsResync = false;
        // The pair carries the newest lists: a change counted while the read was out wins over it.
        this.takeLists(acc, snap);
        this.record(acc, 'POSITIONS', positionsData(acc.positions!, true, clock));
        if (acc.platform === 'P5') this.record(acc, 'ORDERS', ordersData(acc.orders!, true, clock));
      },
      () => {
        // Not connected: tried again when the 'connected' phase comes (live deals keep waiting: one
        // made before them may still be missing), or soon if the account is connected already.
        this.resyncing.delete(acc);
        acc.needsResync = true;
        if (acc.phase === 'connected') {
          setTimeout(() => {
            if (acc.needsResync && this.accounts.accounts.get(acc.id) === acc) this.resync(acc);
          }, this.deps.config.streamSnapshotTimeoutMs).unref();
        }
      },
    ).catch((err: unknown) => this.deps.log.error('stream resync failed', { accountId: acc.id, err: errorMessage(err) }));
  }

  /** What a full disk held of the account's frames passed STREAM_HISTORY_HELD_MAX_BYTES (historyWrites.ts):
   *  they were dropped, never sent; a new epoch (written once there is room), its sockets reconnect
   *  (their resume says recovered:false). */
  private overflow(acc: AccountState): void {
    this.accounts.rotate(acc);
    for (const s of [...acc.sockets]) this.out.end(s, 'STREAM_GAP');
  }

  /** The memory account frames waiting for a full disk take (tagw_stream_history_held_bytes), and
   *  how many account streams began a new epoch since start for want of it. */
  get held(): { bytes: number; overflows: number } {
    return { bytes: this.writes.heldBytes, overflows: this.writes.overflows };
  }

  /** Deals may be missing from the stream: a new epoch, and its sockets reconnect (their resume says recovered:false). */
  private breakContinuity(acc: AccountState): void {
    this.deps.log.warn('stream continuity lost: the broker deal history could not be read; new epoch', { accountId: acc.id });
    this.commit();
    this.accounts.rotate(acc);
    for (const s of [...acc.sockets]) this.out.end(s, 'STREAM_GAP');
  }
}

