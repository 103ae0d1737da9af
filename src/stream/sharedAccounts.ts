// Cluster mode's account streams on this node (docs/cluster.md "Streams and resume"). The owner of
// an account numbers its events (accountEvents.ts, as on one node) from where the shared history
// stands (takeOver), stores each batch there and sends it after the store acknowledged it. Any
// other node takes the owner's numbered frames from a feed into its own AccountHistory and sends
// them, so every node sends the same seq; a resume that this node's memory cannot serve is replayed
// from the shared history. Roles follow the lease (checkRoles, on the sweep timer).
import { ApiError } from '../errors.js';
import type { Logger } from '../log.js';
import { STREAM_EVENT, type StreamEvent } from '../runtime/hosts/streamCommands.js';
import type { Clock } from '../util/clock.js';
import { errorMessage } from '../util/errorMessage.js';
import type { AccountStreams } from './accounts.js';
import { DealLedger } from './deals.js';
import { AccountHistory, newEpoch, type HistoryEntry, type HistoryLimits, type StreamPosition } from './history.js';
import type { Outbox } from './outbox.js';
import { frameParts, type SharedFrame, type SharedHistory, type SharedState, type StoredFrame } from './shared.js';
import type { AccountState, Sock } from './state.js';

export interface SharedAccountsDeps {
  shared: SharedHistory;
  clock: Clock;
  /** The shards' clock: a fresh epoch's deals start at its now (plus the server's offsetOf). */
  shardClock: Clock;
  /** A bridged simulator's clock offset (ServerInfo.clockOffsetMs) of a server known here; absent: 0. */
  offsetOf?: (server: string) => number;
  limits: HistoryLimits;
  log: Logger;
  /** Learns the account's server clock from its shard when this node has not seen it (frames carry server times). */
  ensureClock: (acc: AccountState) => Promise<void>;
}

/** What SharedAccounts needs of AccountEvents. */
export interface StreamDelivery {
  /** Sends entries to the account's live sockets (each past its cursor). */
  deliver(acc: AccountState, entries: readonly HistoryEntry[]): void;
  onEvent(ev: StreamEvent): void;
  requestSnapshot(sock: Sock): void;
  /** Sends a resume's RESUMED (false: the socket is closed); its wait's bound ends. */
  answerResume(sock: Sock, recovered: boolean, replayed: number): boolean;
  /** Bounds the socket's wait for the cluster (from its first wait): past it ERROR and 4010. */
  boundClusterWait(sock: Sock, what: 'snapshot' | 'resume'): void;
  continueReplay(sock: Sock): void;
  /** The account's resync with the broker (missed deals, then a snapshot pair), as after a restart. */
  resync(acc: AccountState): void;
}

/** Waits between the tries of a store JetStream did not take (STORE_RETRY_MS[attempt], then the last). */
const STORE_RETRY_MS = [100, 200, 400, 500] as const;

/** After taking an account's role failed (every attempt), how long until it is taken again. */
const ROLE_RETRY_MS = 3_000;
/** A resume's read of the shared history that JetStream did not answer is tried again after this. */
const RESUME_READ_RETRY_MS = 250;

export class SharedAccounts {
  private chain: Promise<void> = Promise.resolve();
  /** Frames stored again after a retried store (each under a msg id of its own). */
  private republished = 0;

  constructor(
    private readonly deps: SharedAccountsDeps, private readonly accounts: AccountStreams,
    private readonly out: Outbox, private readonly events: StreamDelivery,
  ) {
    deps.shared.onAcquired((ids) => {
      for (const id of ids) void this.acquired(id);
    });
    deps.shared.onReopened((id) => this.reopened(id));
    deps.shared.onHandingOver((boundMs) => this.storesSettled(boundMs));
  }

  /** Resolves once the batches committed so far are stored (or given up), or after `boundMs`. */
  private storesSettled(boundMs: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, boundMs);
      this.afterStores(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  /**
   * The account's shard stream on this node (its owner) was closed by every socket of every node (a
   * node judged departed after a lapse, its holds released) and is open again (its replay): the
   * deals made meanwhile were never emitted. The numbering state kept here resyncs with the broker
   * (missed deals as TRADEs, then a snapshot pair), as after a takeover; live deals wait behind.
   */
  private reopened(id: string): void {
    const acc = this.accounts.accounts.get(id);
    // Taking the role resyncs by itself; a follower's numbers are the owner's.
    if (!acc?.shared || acc.shared.role !== 'owner' || acc.shared.ready || acc.shared.placeholder) return;
    acc.needsResync = true;
    acc.heldDeals ??= [];
    if (acc.phase === 'connected') this.events.resync(acc);
  }

  /**
   * This node acquired the account. If its stream is kept (a client may resume in it) and this node
   * holds no state for it, the stream is opened and held here as after its last socket closed, and
   * numbered: the old owner's hold of it may have gone with the old owner (killed, or its sockets
   * closed by a SIGTERM), and without one no event of the account would be numbered, a deal made
   * meanwhile never a TRADE (a resume would answer recovered:true without it). Taking the role
   * resyncs with the broker (missed deals, then a snapshot pair).
   */
  private async acquired(id: string): Promise<void> {
    try {
      if (this.accounts.accounts.has(id) || !(await this.deps.shared.kept(id))) return;
      if (this.accounts.accounts.has(id) || !this.deps.shared.owns(id)) return;
      const acc = await this.accounts.keep(id);
      if (acc && !acc.shared) this.takeRole(acc);
    } catch (err) {
      this.deps.log.warn('acquired account stream not kept', { accountId: id, err: errorMessage(err) });
    }
  }

  /**
   * Runs `fn` once the account's role is taken (taking it first if nobody did); true when deferred.
   * `came`: when the socket came (this gateway's clock), which may be well before this call (its
   * stream.open answered late): frames stored after it are its own.
   * `fn(from)` when the node had no position in the account's stream when the wait began (its first
   * role): the seq its history began at (JetStream's head as the role read it), where a fresh socket
   * starts (not at what the node's feed delivered since, frames stored after the socket came); or
   * 'late' when frames stored after the socket came may be at or below that seq: a try of the role
   * failed meanwhile (JetStream not answering: a NATS outage, a request timing out after 5 s), or the
   * frame it read as the head was stored after the socket came (a read answered late: held through a
   * reconnect, or JetStream slow). A fresh socket placed at that head would miss those frames without
   * a word (`npm run chaos`: seed 356670798, a P4 socket's first account frame seq 16 after a failed
   * try; seed 953907159, schedule 20, seq 21 after a slow one). Null otherwise: the role was there
   * before, or was not taken at all (every try failed: a local epoch, whose sockets are told when the
   * role is taken later, restart and 4014).
   */
  gate(acc: AccountState, came: number, fn: (from: number | 'late' | null) => void): boolean {
    if (!acc.shared) this.takeRole(acc);
    const s = acc.shared!;
    const ready = s.ready;
    if (!ready) return false;
    // The store times are nats-server's clock, the wait's this node's: a skew between them widens or
    // narrows what counts as stored after the socket came.
    const [blind, failed] = [s.placeholder, s.failedTries];
    void ready.then(() => {
      const first = s.first;
      if (!blind || s.retryAt !== undefined || !first) return fn(null);
      const h = acc.history;
      // A head at seq 0 is the epoch's start marker: nothing before it to miss.
      const late = s.failedTries > failed || (first.seq > 0 && first.storedAt !== null && first.storedAt > came)
        || h.epoch !== first.epoch || first.seq < h.firstSeq - 1;
      fn(late ? 'late' : first.seq);
    });
    return true;
  }

  /** An account event of a shard (a list, a deal, a rebound): held while the role is taken; true
   *  when this node must not number it. A rebound goes on to both roles. */
  intercept(acc: AccountState, ev: StreamEvent): boolean {
    if (!acc.shared) this.takeRole(acc);
    const s = acc.shared!;
    if (s.ready) {
      s.held.push(ev);
      return true;
    }
    return ev.kind !== STREAM_EVENT.rebound && !this.numbers(acc);
  }

  /** Numbering happens on the owner only, not while its role is being taken, and not once its
   *  lease is gone (handed over or lost): the role follows at the next sweep, and the next owner,
   *  which may number from JetStream's head already, resyncs what happened meanwhile. */
  numbers(acc: AccountState): boolean {
    return acc.shared?.role === 'owner' && !acc.shared.ready && this.deps.shared.owns(acc.id) && this.sameLease(acc.id, acc.shared);
  }

  /** The lease this node holds is the one under which it took the role (its fence's): not one lost
   *  and taken again since, another owner's tenure between them. */
  private sameLease(id: string, s: SharedState): boolean {
    return this.deps.shared.leaseEpoch(id) === s.lease;
  }

  /** The owner's committed batches: stored in order, each sent once stored (never ahead of the history). */
  commit(batches: ReadonlyArray<[AccountState, HistoryEntry[]]>): void {
    // Each batch's first store starts now (commits overlap, pipelined); one that failed is tried
    // again in its turn in the chain, so an outage has one batch retrying, not every commit since.
    const epochs = batches.map(([acc]) => acc.history.epoch);
    const leases = batches.map(([acc]) => acc.shared?.lease);
    const frames = batches.map(([acc, entries], i) => {
      const deal = acc.deals.mark;
      const lease = acc.shared?.lease;
      return entries.map((e) => ({ epoch: epochs[i]!, seq: e.seq, frame: e.frame, deal, ...(lease === undefined ? {} : { lease }) }));
    });
    const firsts = batches.map(([acc], i) => (acc.shared?.role !== 'owner' ? Promise.resolve(null)
      : this.deps.shared.append(acc.id, frames[i]!).then(() => this.acknowledged(acc, frames[i]!), (err: unknown) => errorMessage(err))));
    this.chain = this.chain.then(async () => {
      const stored: boolean[] = [];
      for (const [i, first] of (await Promise.all(firsts)).entries()) {
        stored.push(first === true || (typeof first === 'string' && await this.store(batches[i]![0], epochs[i]!, frames[i]!, first)));
      }
      return stored;
    }).then((stored) => {
      // Not into an epoch begun meanwhile (a rebound): its sockets have another numbering. Not by
      // an owner whose tenure ended meanwhile (its lease gone by its clock: frozen past it, say):
      // stored after a later owner's fence, the frames are not the stream's (leaseOrder.ts); the
      // node takes those numbers from the history as a follower (becomeFollower).
      batches.forEach(([acc, entries], i) => {
        if (stored[i] && acc.history.epoch === epochs[i] && this.tenure(acc, leases[i])) this.events.deliver(acc, entries);
      });
    }).catch((err: unknown) => this.deps.log.error('stream delivery failed', { err: errorMessage(err) }));
  }

  /** The node is still the owner under `lease` (while handing over too). */
  private tenure(acc: AccountState, lease: number | undefined): boolean {
    return acc.shared?.role === 'owner' && acc.shared.lease === lease && this.deps.shared.holds(acc.id) && this.deps.shared.leaseEpoch(acc.id) === lease;
  }

  /** JetStream acknowledged these frames of the account (in any order: stores overlap): the
   *  highest-numbered one of the epoch so far is noted. */
  private acknowledged(acc: AccountState, frames: readonly StoredFrame[]): true {
    const last = frames.at(-1);
    const had = acc.shared?.lastStored;
    if (acc.shared && last && (!had || had.epoch !== last.epoch || had.seq < last.seq)) acc.shared.lastStored = last;
    return true;
  }

  /**
   * After a failed first store (`firstError`), stores an owner's frames again and again (nats-server
   * down, frozen or restarting: msg ids make a repeat harmless), until JetStream has them (true) or
   * this node stops numbering the account's epoch or loses its lease (false: the next owner resyncs
   * what they held). While the account is being handed over the lease is still this node's: the
   * handover waits for these stores (ClusterNode.handOver), so the next owner continues after them.
   * They were sent to this node's sockets after a failed store before: numbers no other node could
   * replay, which a later owner then gave to other frames, or the deals in them again (`npm run
   * chaos` saw a client get eleven TRADEs twice after a nats-server restart and a takeover). A frame
   * too large for NATS never stores: sent all the same, as on one node when the disk fails.
   */
  private async store(acc: AccountState, epoch: string, frames: readonly StoredFrame[], firstError: string): Promise<boolean> {
    const numbering = () => acc.shared?.role === 'owner' && acc.history.epoch === epoch && this.deps.shared.holds(acc.id);
    let message = firstError;
    for (let attempt = 0; ; attempt++) {
      if (/payload/i.test(message)) {
        this.deps.log.error('shared stream history write failed; sent to this node\'s sockets only', { accountId: acc.id, err: message });
        return true;
      }
      if (attempt % 10 === 0) this.deps.log.warn('shared stream history write failed; retrying', { accountId: acc.id, attempt, err: message });
      await new Promise((r) => setTimeout(r, STORE_RETRY_MS[Math.min(attempt, STORE_RETRY_MS.length - 1)]));
      if (!numbering()) return false;
      try {
        await this.deps.shared.append(acc.id, frames);
        this.acknowledged(acc, frames);
        // Part of the first try may have been stored before later frames of the account and the
        // rest only now, after them (a publish lost in a reconnect while those after it went
        // through): the account's last stored message would be a lower seq than its highest, and a
        // next owner would number that epoch's seqs again (`npm run chaos` saw eight TRADEs sent
        // twice). Its highest acknowledged frame is stored again, last.
        const top = acc.shared?.lastStored;
        if (top && top.epoch === epoch) await this.deps.shared.republish(acc.id, top, `${this.deps.clock.now()}-${++this.republished}`);
        return true;
      } catch (err) {
        message = errorMessage(err);
      }
    }
  }

  /** Runs `fn` once the batches committed so far are stored and delivered. */
  afterStores(fn: () => void): void {
    this.chain = this.chain.then(fn).catch((err: unknown) => this.deps.log.error('stream delivery failed', { err: errorMessage(err) }));
  }

  /** The owner began another epoch: announced to the other nodes (a rebound as such: their sockets close with 4012). */
  epochStarted(acc: AccountState, rebound: boolean): void {
    if (acc.shared?.role !== 'owner' || !this.deps.shared.owns(acc.id)) return;
    this.deps.shared.startEpoch(acc.id, acc.history.epoch, acc.deals.mark, rebound, acc.shared.lease).catch((err: unknown) =>
      this.deps.log.error('shared stream epoch not stored', { accountId: acc.id, err: errorMessage(err) }));
  }

  /** An account event for an account with no state here: kept (to be numbered) when this node owns
   *  it. A rebound too: other nodes' sockets must see its new epoch, which the owner starts. */
  adopt(ev: StreamEvent): AccountState | undefined {
    if (ev.kind !== STREAM_EVENT.positions && ev.kind !== STREAM_EVENT.orders && ev.kind !== STREAM_EVENT.deal
      && ev.kind !== STREAM_EVENT.rebound) return undefined;
    if (!this.deps.shared.owns(ev.key)) return undefined;
    const acc = this.accounts.headless(ev.key);
    if (acc) this.takeRole(acc);
    return acc;
  }

  /** Periodic: an account whose lease came or went changes role; one kept only to number it goes. */
  checkRoles(): void {
    for (const acc of [...this.accounts.accounts.values()]) {
      const s = acc.shared;
      if (!s || s.ready) continue;
      const owns = this.deps.shared.owns(acc.id);
      // Being handed over: the role changes once the lease is released (its stores finish first).
      if (!owns && s.role === 'owner' && this.deps.shared.holds(acc.id)) continue;
      if (!owns && acc.opens === 0 && acc.sockets.size === 0 && !acc.retainTimer) {
        this.accounts.accounts.delete(acc.id);
        this.release(acc);
      } else if ((s.role === 'owner') !== owns || (owns && !this.sameLease(acc.id, s)) || (s.retryAt !== undefined && this.deps.clock.now() >= s.retryAt)) {
        this.takeRole(acc); // retryAt stays set until the role is taken: a failed retry keeps its epoch
      }
    }
  }

  /** The account's state leaves this node. */
  release(acc: AccountState): void {
    acc.shared?.feed?.close();
    if (acc.shared) acc.shared.feed = null;
  }

  private takeRole(acc: AccountState): void {
    const owner = this.deps.shared.owns(acc.id);
    const s: SharedState = acc.shared ?? { role: owner ? 'owner' : 'follower', ready: null, placeholder: true, failedTries: 0, held: [], early: null, feed: null, lastData: {} };
    acc.shared = s;
    s.role = owner ? 'owner' : 'follower';
    const attempt = async () => {
      for (let i = 0; ; i++) {
        try {
          return await (owner ? this.becomeOwner(acc, s) : this.becomeFollower(acc, s));
        } catch (err) {
          s.failedTries++;
          if (i >= 4) throw err;
          this.deps.log.warn('account stream role not taken yet; trying again', { accountId: acc.id, err: errorMessage(err) });
          await new Promise((r) => setTimeout(r, 250 * (i + 1)));
        }
      }
    };
    s.ready = attempt().then(() => {
      s.retryAt = undefined;
    }, (err: unknown) => {
      const again = s.retryAt !== undefined;
      this.deps.log.error(`account stream role not taken: a local epoch until it is (tried again every ${ROLE_RETRY_MS} ms)`, { accountId: acc.id, role: s.role, again, err: errorMessage(err) });
      // A retry that failed keeps the local epoch its sockets have (no 4014 every few seconds
      // through a long outage).
      if (!again) this.restart(acc, newEpoch(this.deps.clock.now()), 0);
      // Its sockets are told (4014) when the role is taken and the account's real epoch found: a
      // follower that never retried served snapshots of an epoch no other node knew, then nothing.
      s.placeholder = false;
      s.retryAt = this.deps.clock.now() + ROLE_RETRY_MS;
    }).then(() => {
      s.ready = null;
      const held = s.held;
      s.held = [];
      for (const ev of held) this.events.onEvent(ev);
    });
  }

  private async becomeOwner(acc: AccountState, s: SharedState): Promise<void> {
    await this.deps.ensureClock(acc);
    s.feed?.close();
    s.feed = null;
    // The lease's epoch fences the tenure in the history (a write of an earlier owner stored after
    // it is skipped by every reader): docs/cluster.md "Fencing the history".
    const lease = this.deps.shared.leaseEpoch(acc.id);
    const t = await this.deps.shared.takeOver(acc.id, newEpoch(this.deps.clock.now()), { ticket: 0, timeMsc: this.deps.shardClock.now() + (this.deps.offsetOf?.(acc.server) ?? 0) }, lease);
    s.lease = lease;
    const h = acc.history;
    if (!s.placeholder && t.epoch === h.epoch && t.seq > h.seq) {
      // Stored after what this node's feed delivered: take it before numbering on.
      const r = await this.deps.shared.replay(acc.id, { epoch: h.epoch, seq: h.seq });
      if (r.recovered) for (const e of r.entries) this.apply(acc, { epoch: h.epoch, seq: e.seq, frame: e.frame });
    }
    if (s.placeholder) s.first = { epoch: t.epoch, seq: t.seq, storedAt: t.storedAt };
    if (s.placeholder || t.epoch !== acc.history.epoch || t.seq !== acc.history.seq) this.restart(acc, t.epoch, t.seq);
    acc.deals = new DealLedger(t.deal);
    s.placeholder = false;
    if (t.continued) {
      // What happened at the broker since the last stored number did not arrive as events here.
      acc.needsResync = true;
      acc.heldDeals ??= [];
      if (acc.phase === 'connected') this.events.resync(acc);
    }
  }

  private async becomeFollower(acc: AccountState, s: SharedState): Promise<void> {
    s.early = [];
    // Frames this node numbered as the owner and did not send (their store not acknowledged, or
    // acknowledged after its tenure ended): a next owner may have given those numbers to other
    // frames. Its sockets never had them: they are taken from the history like any other.
    if (!s.placeholder) acc.history.dropUnsent();
    const since = s.placeholder ? null : { epoch: acc.history.epoch, seq: acc.history.seq };
    // A new epoch goes through the same path as frames (behind any that wait), as its seq 0.
    const f = await this.deps.shared.follow(acc.id, since, (fr) => this.onFrame(acc, fr),
      (epoch, rebound, at) => this.onFrame(acc, at === undefined ? { epoch, seq: 0, frame: '', ...(rebound ? { rebound } : {}) } : { epoch, seq: at, frame: '', rewind: true }));
    s.feed?.close();
    s.feed = f.feed;
    if (s.placeholder || !f.recovered) {
      // Nothing stored yet (the owner has not numbered anything): the epoch it will continue.
      const at: StreamPosition & { storedAt: number | null } = f.position ? { ...f.position, storedAt: f.storedAt }
        : await this.deps.shared.takeOver(acc.id, newEpoch(this.deps.clock.now()), { ticket: 0, timeMsc: this.deps.shardClock.now() + (this.deps.offsetOf?.(acc.server) ?? 0) });
      f.feed.seek(at);
      if (s.placeholder) s.first = { epoch: at.epoch, seq: at.seq, storedAt: at.storedAt };
      this.restart(acc, at.epoch, at.seq);
    }
    s.placeholder = false;
    const early = s.early;
    s.early = null;
    for (const fr of early) this.apply(acc, fr);
  }

  private onFrame(acc: AccountState, f: SharedFrame): void {
    if (acc.shared?.early) acc.shared.early.push(f);
    else this.apply(acc, f);
  }

  /** An owner's frame on this node: into the history, then to the live sockets. */
  private apply(acc: AccountState, f: SharedFrame): void {
    const h = acc.history;
    if (f.rewind) {
      if (f.epoch !== h.epoch || f.seq !== h.seq) this.restart(acc, f.epoch, f.seq);
      return;
    }
    if (f.seq === 0) {
      if (f.epoch !== h.epoch) this.restart(acc, f.epoch, 0, f.rebound ? 'ACCOUNT_REBOUND' : 'STREAM_GAP');
      return;
    }
    if (f.epoch === h.epoch && f.seq <= h.seq) return;
    if (f.epoch !== h.epoch || f.seq !== h.seq + 1) this.restart(acc, f.epoch, f.seq - 1); // the feed repairs gaps it can
    const e = acc.history.put(f.seq, f.frame, this.deps.clock.now());
    const { type, data } = frameParts(f.frame);
    if (type === 'POSITIONS' || type === 'ORDERS') acc.shared!.lastData[type] = data;
    this.events.deliver(acc, [e]);
  }

  /** This node's history starts over at (epoch, seq): sockets that had the old one reconnect. */
  private restart(acc: AccountState, epoch: string, seq: number, why: 'STREAM_GAP' | 'ACCOUNT_REBOUND' = 'STREAM_GAP'): void {
    const had = acc.shared?.placeholder === false;
    acc.history = new AccountHistory(epoch, seq, this.deps.limits);
    if (acc.shared) acc.shared.lastData = {};
    if (had) for (const s of [...acc.sockets]) if (s.stream !== 'held') this.out.end(s, why);
  }

  /** A resume this node's memory cannot serve: from the shared history, then this node's memory,
   *  then live. The read is bounded (AccountEvents.boundClusterWait): a read that ends after the
   *  socket was answered and closed does nothing. A read JetStream did not answer (SERVICE_UNAVAILABLE:
   *  its 5 s request timeout within the 10 s bound, nats-server frozen or restarting) is tried again
   *  until the bound answers 4010: it said nothing about the client's position, and recovered:false
   *  would have made the client resync, missing the TRADEs made before its late snapshot (`npm run
   *  chaos`, seed 1579256419 schedule 33). */
  resume(sock: Sock, since: StreamPosition): void {
    sock.stream = 'waiting';
    this.events.boundClusterWait(sock, 'resume');
    const acc = sock.acc;
    const failed = () => {
      if (this.events.answerResume(sock, false, 0)) this.events.requestSnapshot(sock);
    };
    const waiting = () => !sock.closed && sock.stream === 'waiting';
    const read = (): void => void this.deps.shared.replay(acc.id, since).then((r) => {
      if (sock.closed || sock.stream !== 'waiting') return;
      const h = acc.history;
      const last = since.seq + (r.recovered ? r.entries.length : 0);
      if (!r.recovered || h.epoch !== since.epoch || last < h.firstSeq - 1) return failed();
      const tail = Math.max(0, h.seq - last);
      if (!this.events.answerResume(sock, true, r.entries.length + tail)) return;
      // Paced by the socket's buffer as a replay from memory is: the rest as it drains.
      sock.cursor = since.seq;
      sock.backlog = { entries: r.entries, next: 0 };
      sock.stream = 'replaying';
      this.events.continueReplay(sock);
    }, (err: unknown) => {
      if (!waiting()) return;
      if (!(err instanceof ApiError && err.code === 'SERVICE_UNAVAILABLE')) return failed();
      setTimeout(() => waiting() && read(), RESUME_READ_RETRY_MS).unref?.();
    }).catch((err: unknown) => this.deps.log.error('shared resume failed', { accountId: acc.id, err: errorMessage(err) }));
    read();
  }
}
