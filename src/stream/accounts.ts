// Account streams of /v1/stream (main thread): which accounts have stream state here, the pairing of
// stream.open/stream.close with the shard, how long an account's stream is kept without sockets (so
// a client that reconnects misses nothing), its history's lifecycle (loaded, picked up after a
// restart, dropped when continuity is lost), the per-account reference counts of symbols and
// timeframes, and shard restarts. The events themselves: accountEvents.ts.
import type { Config } from '../config.js';
import type { Logger } from '../log.js';
import type { Timeframe } from '../market/timeframes.js';
import type { StreamOpenResult } from '../runtime/hosts/streamCommands.js';
import { NO_VERSION } from '../runtime/hosts/listVersion.js';
import type { Shards } from '../runtime/shardSet.js';
import type { StreamHistoryStore } from '../store/streamHistory.js';
import type { TenancyStore } from '../store/tenancy.js';
import { errorMessage } from '../util/errorMessage.js';
import { DealLedger, tradesIn } from './deals.js';
import { AccountHistory, newEpoch } from './history.js';
import type { Outbox } from './outbox.js';
import type { SharedHistory } from './shared.js';
import type { AccountState } from './state.js';
import type { Topics } from './topics.js';
import type { Clock } from '../util/clock.js';
import { FULL_DISK_RETRY_MS, FullDisk } from '../store/fullDisk.js';
import { HeldWrites, type Scheduler } from '../store/heldWrites.js';

export interface AccountStreamDeps {
  config: Config;
  shards: Shards;
  tenancy: TenancyStore;
  log: Logger;
  /** This gateway's clock: history times, ages and expiries. */
  clock: Clock;
  inflight: { draining: boolean };
  /** Where account histories are kept across restarts. */
  history: StreamHistoryStore;
  /** The main thread's background writes (the history's batches) that meet a full DATA_DIR wait for room. */
  fullDisk?: FullDisk;
  /** Tests: the timers of the retries on a full disk (default: the system's). */
  scheduler?: Scheduler;
  /** Cluster mode: the account stream numbered by its owner, kept in JetStream (none: one node, SQLite). */
  shared?: SharedHistory;
  /** The broker login bound to an account, from this thread's own database connection. */
  bindingOf?: (accountId: string) => { platform: 'P4' | 'P5'; server: string } | undefined;
}

export class AccountStreams {
  readonly accounts = new Map<string, AccountState>();
  /** Seats seen ACTIVE (the last seat status): an upgrade asks no shard for them. One entry per
   *  streamed seat, gone with the seat (forget). */
  readonly activeSeats = new Set<string>();
  /** Called when an account's stream is open at the shard with no resync done yet (accountEvents). */
  onOpened: (acc: AccountState) => void = () => undefined;
  /** Cluster mode: an account began another epoch here, or its state left this node (sharedAccounts.ts). */
  onRotated: (acc: AccountState, rebound: boolean) => void = () => undefined;
  onReleased: (acc: AccountState) => void = () => undefined;
  /** An account entered `accounts` (the hub's sweep runs while any is there). */
  onActive: () => void = () => undefined;
  /** One node: an account's stream began a new epoch here (fresh, or rotated), not written yet:
   *  AccountEvents has it written (HistoryWrites.epochBegun: fresh, in order with what waits). */
  onEpoch: (acc: AccountState) => void = () => undefined;

  /** The periodic "still alive" mark (touch) when it met a full disk: tried again every retryMs,
   *  one log line an episode (FullDisk's) instead of one a period. */
  private readonly marks: HeldWrites<never>;
  /** The histories of streams whose hold is over (releaseIfUnused), when dropping them met a full
   *  disk: tried again every retryMs until done. One of an account whose stream begins again
   *  meanwhile is not done (create: the new epoch's fresh write replaces those rows, in its order). */
  private readonly drops: HeldWrites<string>;
  private readonly offDeath: () => void;

  constructor(private readonly deps: AccountStreamDeps, private readonly topics: Topics, private readonly out: Outbox) {
    const fullDisk = deps.fullDisk ?? new FullDisk({ log: deps.log, retryMs: FULL_DISK_RETRY_MS });
    this.marks = new HeldWrites<never>({
      fullDisk,
      what: 'stream history mark',
      retry: () => {
        try {
          this.touch();
        } catch (err) {
          this.deps.log.error('stream history failed', { err: errorMessage(err) });
        }
      },
      ...(deps.scheduler ? { scheduler: deps.scheduler } : {}),
    });
    this.drops = new HeldWrites<string>({
      fullDisk, what: 'stream history drop', keyOf: (id) => id, retry: (ids) => this.dropHistory(ids),
      ...(deps.scheduler ? { scheduler: deps.scheduler } : {}),
    });
    this.offDeath = deps.shards.onDeath((shard) => this.shardDied(shard));
  }

  private get limits() {
    return { maxEvents: this.deps.config.streamHistoryMaxEvents, maxAgeMs: this.deps.config.streamHistoryMaxAgeMs };
  }

  /** A new account state, its history picked up from the store when it was kept until recently. */
  private create(id: string, platform: AccountState['platform'], server: string, phase: AccountState['phase']): AccountState {
    const now = this.deps.clock.now();
    // A stream whose hold ended, its history's drop waiting for room: it ended, so it is not picked
    // up, and the drop is not done after the new epoch's write (which deletes those rows itself).
    const ended = this.drops.remove((q) => q === id).length > 0;
    // Cluster mode: a placeholder until the account's role is taken (the owner's numbering, or its feed).
    const stored = this.deps.shared || ended ? undefined : this.deps.history.load(id);
    let kept: { history: AccountHistory; deals: DealLedger };
    let needsResync = false;
    const picked = stored !== undefined && stored.aliveAt >= now - this.limits.maxAgeMs;
    if (picked) {
      kept = { history: new AccountHistory(stored.epoch, stored.seq, this.limits, stored.entries), deals: new DealLedger(stored.deal, tradesIn(stored.entries)) };
      kept.history.trim(now);
      needsResync = true; // what happened while nobody listened did not arrive as events
    } else {
      kept = this.freshHistory(now, server);
    }
    const acc: AccountState = {
      id, platform, server, phase, sockets: new Set(), symbolRefs: new Map(), candleRefs: new Map(), opens: 0, openCalls: 0,
      // A picked-up stream holds live deals from the start: one made before them may be missing until its resync.
      ...kept, positions: null, orders: null, posV: NO_VERSION, ordV: NO_VERSION, needsResync, heldDeals: needsResync ? [] : null, retainTimer: null,
    };
    if (!picked) this.epochBegun(acc);
    return acc;
  }

  /** A new epoch. Its deals start now, on the server's market clock (the broker's deal times are on
   *  it: the shards' clock, plus a bridged simulator's offset once its server is known). */
  private freshHistory(now: number, server: string): { history: AccountHistory; deals: DealLedger } {
    const offsetMs = this.topics.servers?.get(server)?.info.clockOffsetMs ?? 0;
    return { history: new AccountHistory(newEpoch(now), 0, this.limits), deals: new DealLedger({ ticket: 0, timeMsc: this.topics.shardClock.now() + offsetMs }) };
  }

  /** One node: the new epoch is stored (a client whose snapshot is at seq 0 of it can resume after
   *  a restart too), at once or, on a full disk, in order with the history's waiting writes, the rows
   *  of the epoch before deleted in the same transaction (historyWrites.ts). Cluster mode: JetStream's. */
  private epochBegun(acc: AccountState): void {
    if (!this.deps.shared) this.onEpoch(acc);
  }

  /** Continuity lost (rebound, deals not readable, its frames over what a full disk may hold): a new
   *  epoch, nothing known of the lists. (A shard restart is not one: goOn.) */
  rotate(acc: AccountState, rebound = false): void {
    Object.assign(acc, this.freshHistory(this.deps.clock.now(), acc.server));
    acc.positions = acc.orders = null;
    acc.posV = acc.ordV = NO_VERSION;
    acc.needsResync = false;
    acc.heldDeals = null;
    this.epochBegun(acc);
    this.onRotated(acc, rebound);
  }

  /**
   * Stream state for an account with no socket yet, from what this thread knows without asking the
   * shard: its seat ACTIVE (cached, or in seat_state), its broker login bound (account_bindings), and
   * its server's clock (seen before). Undefined when any of that is missing: then the shard decides.
   * The phase is a placeholder until the socket's stream.open answers (milliseconds).
   */
  fromRecords(id: string): AccountState | undefined {
    const binding = this.deps.bindingOf?.(id);
    if (!binding || !this.topics.servers.has(binding.server)) return undefined;
    if (!this.activeSeats.has(id)) {
      if (this.deps.tenancy.seatState(id)?.status !== 'ACTIVE') return undefined;
      this.activeSeats.add(id);
    }
    return this.create(id, binding.platform, binding.server, 'connecting');
  }

  /** Cluster mode: an account this node owns whose events come with no socket here (other nodes'
   *  sockets follow it): its state is kept to number them (its server's clock is learned before). */
  headless(id: string): AccountState | undefined {
    const binding = this.deps.bindingOf?.(id);
    if (!binding) return undefined;
    const acc = this.create(id, binding.platform, binding.server, 'connected');
    this.accounts.set(id, acc);
    this.onActive();
    return acc;
  }

  /** A stream.open answered: the account's state here, one open more. */
  noteOpen(id: string, open: StreamOpenResult): AccountState {
    if (open.serverInfo) this.topics.noteServer(open.serverInfo);
    let acc = this.accounts.get(id);
    if (!acc) {
      acc = this.create(id, open.platform, open.server, open.phase);
      this.accounts.set(id, acc);
      this.onActive();
    } else {
      acc.phase = open.phase;
    }
    acc.opens++;
    this.opened(acc);
    return acc;
  }

  /** A socket's stream.open is done: a retention hold is no longer needed (the socket holds its own). */
  opened(acc: AccountState): void {
    if (acc.retainTimer && acc.opens > 1) {
      clearTimeout(acc.retainTimer);
      acc.retainTimer = null;
      this.releaseNow(acc.id);
    }
    if (acc.needsResync) this.onOpened(acc);
  }

  /**
   * Every stream.open is paired with one stream.close (when its socket closes or the upgrade fails).
   * The last one of an account is held for streamHistoryMaxAgeMs first: its events keep coming into
   * the history, so a client that reconnects within that time resumes without a gap.
   */
  releaseIfUnused(id: string): void {
    const acc = this.accounts.get(id);
    if (acc && acc.opens === 1 && acc.sockets.size === 0 && !acc.retainTimer && !this.deps.inflight.draining && !this.stopped) {
      acc.retainTimer = setTimeout(() => {
        acc.retainTimer = null;
        if (this.accounts.get(id) !== acc || acc.sockets.size > 0) return;
        this.releaseNow(id);
        if (this.accounts.has(id)) return;
        this.dropHistory([id]); // nobody listens any more: the epoch ends
      }, this.deps.config.streamHistoryMaxAgeMs);
      acc.retainTimer.unref();
      return;
    }
    this.releaseNow(id);
  }

  /** The seat is gone: no hold, no history, not ACTIVE (its sockets are closed already). */
  forget(id: string): void {
    this.activeSeats.delete(id);
    const acc = this.accounts.get(id);
    if (acc?.retainTimer) {
      clearTimeout(acc.retainTimer);
      acc.retainTimer = null;
      if (acc.sockets.size === 0) this.releaseNow(id);
    }
    this.deps.history.drop(id);
    this.drops.remove((q) => q === id); // done
  }

  /** Drops the histories of streams that ended. On a full disk they wait for room (`drops`: tried
   *  again every retryMs, one log line an episode); any other failure is logged. (Before, a drop
   *  that met a full disk was logged and never tried again: a restart within the age limit picked
   *  the ended stream up.) The retry may find none left (begun again meanwhile): the empty write
   *  then ends what this writer waited for. */
  private dropHistory(ids: string[]): void {
    try {
      this.drops.attempt(() => {
        for (const id of ids) this.deps.history.drop(id);
      }, ids);
    } catch (err) {
      this.deps.log.warn('stream history not dropped', { accountIds: ids, err: errorMessage(err) });
    }
  }

  private releaseNow(id: string): void {
    const acc = this.accounts.get(id);
    if (acc) this.dropOpen(acc);
    // At shutdown every socket's release fails (the shards stop; their stream state goes with them):
    // not worth one warning per socket.
    this.deps.shards.call(id, 'stream.close', { accountId: id }).catch((err: unknown) => {
      if (!this.deps.inflight.draining) this.deps.log.warn('stream.close failed', { accountId: id, err: errorMessage(err) });
    });
  }

  /** One stream.open fewer for the account here; its state goes with the last one and the last socket. */
  dropOpen(acc: AccountState): void {
    acc.opens--;
    if (acc.opens <= 0 && acc.sockets.size === 0 && this.accounts.get(acc.id) === acc) {
      if (acc.retainTimer) clearTimeout(acc.retainTimer);
      acc.retainTimer = null;
      this.accounts.delete(acc.id);
      this.onReleased(acc);
    }
  }

  /**
   * After a restart: the accounts whose stream was still kept when the gateway stopped are opened
   * again at once (held as after their last socket closed), so what happens before their clients
   * reconnect goes into the history.
   */
  restore(): void {
    if (this.deps.shared) return; // the history is the cluster's (JetStream), not this node's
    const since = this.deps.clock.now() - this.limits.maxAgeMs;
    for (const id of this.deps.history.aliveSince(since)) {
      if (!this.accounts.has(id)) void this.keep(id);
    }
  }

  /** Opens the account's stream and holds it as after its last socket closed (a restart picked it
   *  up; in cluster mode, this node acquired an account whose stream is kept). */
  async keep(id: string): Promise<AccountState | undefined> {
    try {
      const open = await this.deps.shards.call(id, 'stream.open', { accountId: id });
      if (this.stopped) return void this.releaseNow(id);
      const acc = this.noteOpen(id, open);
      if (acc.sockets.size === 0 && acc.opens === 1) this.releaseIfUnused(id); // starts the hold
      else this.releaseNow(id);
      return acc;
    } catch (err) {
      this.deps.log.warn('stream history not picked up', { accountId: id, err: errorMessage(err) });
      return undefined;
    }
  }

  private stopped = false;

  /** Shutdown: no hold outlives the gateway (the history stays in the store for the next start). */
  stop(): void {
    this.stopped = true;
    this.marks.stop();
    this.drops.stop();
    this.offDeath();
    for (const acc of this.accounts.values()) {
      if (acc.retainTimer) clearTimeout(acc.retainTimer);
      acc.retainTimer = null;
    }
  }

  /** Periodic: the kept streams are alive (a restart within the age limit picks them up), history
   *  trimmed by age. On a full disk the mark is tried again every retryMs (the latest, whole) until
   *  it is written; any other failure is thrown (the hub logs it). */
  touch(): void {
    const now = this.deps.clock.now();
    const list: { accountId: string; keepFrom: number }[] = [];
    for (const acc of this.accounts.values()) {
      acc.history.trim(now);
      list.push({ accountId: acc.id, keepFrom: acc.history.firstSeq });
    }
    if (list.length && !this.deps.shared) this.marks.attempt(() => this.deps.history.touch(list, now));
  }

  // ---- reference counts of what the account's sockets want at the broker ------------------------

  incRef(m: Map<string, number>, k: string): void {
    m.set(k, (m.get(k) ?? 0) + 1);
  }

  decSymbol(acc: AccountState, symbol: string): void {
    const n = (acc.symbolRefs.get(symbol) ?? 1) - 1;
    if (n > 0) {
      acc.symbolRefs.set(symbol, n);
      return;
    }
    acc.symbolRefs.delete(symbol);
    this.deps.shards.call(acc.id, 'stream.unsub', { accountId: acc.id, symbol }).catch(() => undefined);
  }

  decCandle(acc: AccountState, k: string): void {
    const n = (acc.candleRefs.get(k) ?? 1) - 1;
    if (n > 0) {
      acc.candleRefs.set(k, n);
      return;
    }
    acc.candleRefs.delete(k);
    const [symbol, tf] = k.split('|') as [string, Timeframe];
    this.deps.shards.call(acc.id, 'stream.unsub', { accountId: acc.id, symbol, timeframes: [tf] }).catch(() => undefined);
  }

  // ---- shard restarts ---------------------------------------------------------------------------

  /** A shard whose thread died (ShardSet.onDeath) lost the stream state of its accounts
   *  (subscriptions, listeners, events in flight): their sockets are closed with RUNTIME_RESTARTED at
   *  once, not when a new thread is ready (one crashing while it rehydrates may never be), so clients
   *  learn of the hole, reconnect, resubscribe and resume. The account stream itself goes on in the
   *  same epoch (goOn). A socket that reconnects meanwhile waits for the new thread (its stream.open
   *  goes there), and is closed again if that thread dies too. */
  private shardDied(shard: number): void {
    const shards = this.deps.shards;
    const shared = this.deps.shared;
    for (const acc of [...this.accounts.values()]) {
      if (shards.shardFor(acc.id) !== shard) continue;
      // Cluster mode: an account whose lease another node holds runs on that node's shard: this
      // node's opens of it (its sockets', a hold's) are there, whether or not it took its role in the
      // stream yet, and its stream goes on as that owner numbers it. Before, one whose role was not
      // taken yet (a hold of a socket gone before its open was answered) was let go of here without a
      // close: the owner counted the open for good.
      if (shared && !shared.holds(acc.id)) continue;
      this.goOn(acc);
    }
  }

  /**
   * The shard running an account numbered here died. The numbering is this thread's, not the
   * shard's: every frame sent was stored first (one node: SQLite, before it is sent; cluster mode:
   * JetStream), and this state is what was numbered. So the epoch goes on: a client resumes
   * (recovered:true, on any node in cluster mode) and a follower node's sockets stream on, opened
   * again on the new thread (AccountRouter.shardDied). What the dead thread had in flight (a deal, a
   * list change) is resynced with the broker (missed deals as TRADEs, then a snapshot pair; live deals
   * wait behind it) once the stream opens or connects there, as after a gateway SIGKILL. The state
   * stays rather than being taken up again from the store: JetStream's head may not hold yet what is
   * still being stored (numbered again, one seq would be two frames); on one node the frames a full
   * disk keeps waiting would be dropped (never sent, so safe, but lost to every client). Before, a new
   * epoch began: every resume answered recovered:false (in cluster mode the other nodes' sockets
   * closed 4014).
   *
   * Its sockets' opens went with the thread: closing them releases nothing (openState 'failed'; a
   * stream.close sent for one would take an open made on the new thread, a reconnect's), and only the
   * opens still under way (sent again to the new thread: openCalls) are counted. One node: a stream
   * with no open left (held after its last socket, or every socket just closed) is opened again on
   * the new thread and held as after its last socket (reopen), so what happens there goes into its
   * history.
   */
  private goOn(acc: AccountState): void {
    acc.opens = acc.openCalls; // sent again to the new thread, which counts them (a socket's may be closed already)
    for (const s of acc.sockets) if (s.openState !== 'pending') s.openState = 'failed';
    this.deps.shards.opensLost?.(acc.id);
    if (acc.retainTimer) clearTimeout(acc.retainTimer);
    acc.retainTimer = null;
    if (!acc.shared || !acc.shared.placeholder) {
      acc.needsResync = true;
      acc.heldDeals ??= [];
    } else if (acc.opens === 0) {
      // Cluster mode, nothing numbered here yet: the account's next event takes the role again.
      this.accounts.delete(acc.id);
      this.onReleased(acc);
    }
    for (const s of [...acc.sockets]) this.out.end(s, 'RUNTIME_RESTARTED');
    if (!this.deps.shared && acc.opens === 0) void this.reopen(acc);
  }

  /** One node: the stream of an account whose shard died, opened again on the new thread and held (a
   *  socket that came meanwhile keeps it too). If the thread does not answer (a shard that crashes at
   *  every start, past the call timeout) and nothing else opened it, the state goes: the history
   *  stays stored, and a socket within streamHistoryMaxAgeMs of its last alive mark picks it up (the
   *  same epoch, resynced), as after a restart; later, a new epoch. */
  private async reopen(acc: AccountState): Promise<void> {
    if (await this.keep(acc.id)) return;
    if (this.accounts.get(acc.id) === acc && acc.opens <= 0 && acc.sockets.size === 0) {
      this.accounts.delete(acc.id);
      this.onReleased(acc);
    }
  }
}
