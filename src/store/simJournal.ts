// The simulator store's writing side (SqliteSimStore in simStore.ts extends it with loading and reading;
// the schema is simSchema.ts): changes applied to an account's mirror and queued for the journal, their group commit
// with the claims of atomic bookings (bookAtomically) and its fail-stop, and the checkpoint passes
// scheduled after each commit.
import type Database from 'better-sqlite3';
import type { SimChange } from '../sim/persistence.js';
import { batchKey, encodeChange, journalTime } from './simCodec.js';
import { CheckpointRowStore, notePending, type CheckpointWrite, type ReadCheckpoint } from './simCheckpoint.js';
import { systemClock, type Clock } from '../util/clock.js';
import { errorMessage } from '../util/errorMessage.js';
import type { CommitGroup } from './commitGroup.js';
import { DirtyMarks } from './simDirty.js';
import { migrateSimStore } from './simSchema.js';
import { RequestRefs } from './requestRefs.js';
import type { Mirror } from './simMirror.js';
import { FailStop } from './simFailStop.js';
import { createLogger } from '../log.js';
import { FULL_DISK_RETRY_MS, FullDisk } from './fullDisk.js';
import { HeldWrites } from './heldWrites.js';

/** A claim of bookAtomically, as its commit writes it. */
type WrittenClaim = { write(booked: unknown): void };

/** Request ids are deduplicated for a day. */
export const REQUEST_TTL_MS = 86_400_000;

const REQUEST = 'R';

export abstract class SimJournal {
  /** Named for the declaration file (a protected member's type must be nameable). */
  protected readonly st: Record<'counterGet' | 'counterSet' | 'stateUpsert' | 'requestBatches' | 'journalRow' | 'stateGet' | 'journalInsert' | 'journalRange', Database.Statement>;
  protected readonly checkpoints: CheckpointRowStore;
  protected readonly mirrors = new Map<string, Mirror>();
  /** Mirrors with changes not checkpointed yet: a checkpoint pass runs after every commit, and
   *  walking every account there made each order, and each new account, cost O(accounts). */
  protected readonly dirtyMirrors = new Set<Mirror>();
  // Group commit: changes applied during one event-loop turn are committed together in one
  // transaction. Trade replies wait for whenDurable(), so nothing is acknowledged before it
  // is committed. Readers commit first, so reads see every applied change.
  private readonly groupCommit: boolean;
  private readonly checkpointMs: number;
  /** Records a checkpoint pass writes before it yields (checkpointDue); set when it left some due. */
  private readonly checkpointRows: number;
  private checkpointsLeft = false;
  /**
   * A pass (not `all`) before this instant finds no account due, so it is skipped, transaction and
   * walk of the dirty accounts included: the earliest age-due instant of the dirty accounts the
   * last pass left (Infinity: none), lowered as accounts turn dirty; -Infinity when unknown (an
   * account with checkpointRows records changed, a pass that stopped early or was undone). Most
   * commits fall due nothing: the empty pass after each cost the shard a BEGIN, a COMMIT and a
   * walk of every dirty account, right after the reply's post (issue 19).
   */
  private nextDueMs = -Infinity;
  /** Checkpoint ages: wall time by default (a write cadence, whatever clock the market runs on). */
  protected readonly clock: Clock;
  private queue: { m: Mirror; server: string; login: string; seq: number; time: number; data: string }[] = [];
  protected readonly marks: DirtyMarks;
  /** Mirrors marked by the commit in progress (unmarked again when it fails). */
  private marking: Mirror[] = [];
  /** Mirrors written by the checkpoint transaction in progress (their marks cleared with it), with
   *  what is needed to finish them once it commits or to undo it if it fails (a full disk). */
  private checkpointed: Array<{ m: Mirror; w: CheckpointWrite; marked: boolean; newRefs: string[]; checkpointedMs: number }> = [];
  private durable: Promise<void> | null = null;
  private resolveDurable: (() => void) | null = null;
  private rejectDurable: ((e: unknown) => void) | null = null;
  /** Commits the claims of atomic bookings (first) and the queued journal rows, in one transaction. */
  private readonly commitTx: Database.Transaction<() => void>;
  /** Claims of atomic bookings not committed yet: every commit of the queue takes them along, so a
   *  booking's journal rows are never durable without its claim. */
  private claims: WrittenClaim[] = [];
  /** What each claim's booking returned (undefined: it threw), at the claim's index. */
  private claimsBooked: unknown[] = [];
  /** Inside bookAtomically: changes wait for its commit, not for a scheduled one. */
  private booking = false;
  private readonly commitGroup: CommitGroup | undefined;
  private groupCommitQueued = false;
  private readonly allocTx: Database.Transaction<(server: string, count: number) => number>;
  private readonly checkpointTx: (all: boolean) => void;
  private checkpointsQueued = false;
  private checkpointsPostponed = false;
  /** A pass for accounts left dirty by the last one (not due yet) when no commit comes to run it. */
  private lateCheckpoints: NodeJS.Timeout | undefined;
  /** Poisoned by the first failed write: memory is then ahead of the disk (simFailStop.ts). */
  private readonly failStop: FailStop;
  /** Background writes that meet a full disk wait for room instead (fullDisk.ts). */
  private readonly fullDisk: FullDisk;
  /** A request waits for the queued changes (whenDurable, a claim): their commit failing, for
   *  whatever reason, poisons the store, since the request is answered that nothing happened. */
  private awaited = false;
  /** The retry of queued changes whose commit met a full disk (none of them awaited): they stay in
   *  the queue (readers read them there), so nothing is held in it but the retry and its reason. */
  private readonly journalWaits: HeldWrites<never>;

  constructor(
    protected readonly db: Database.Database,
    /** onError: the first failed write, once (the store refuses writes from then on). */
    options: { groupCommit?: boolean; checkpointMs?: number; checkpointRows?: number; onError?: (err: unknown) => void; clock?: Clock; commitGroup?: CommitGroup; fullDisk?: FullDisk } = {},
  ) {
    this.fullDisk = options.fullDisk ?? new FullDisk({ log: createLogger('warn', { component: 'simulator store' }), retryMs: FULL_DISK_RETRY_MS });
    this.journalWaits = new HeldWrites<never>({
      fullDisk: this.fullDisk, what: 'simulator journal',
      retry: () => {
        if (this.db.open && !this.failStop.poisoned) this.commitReporting();
      },
    });
    this.commitGroup = options.commitGroup;
    this.failStop = new FailStop(options.onError ?? ((err) => console.error(`simulator store: a commit failed; refusing writes until restarted: ${errorMessage(err)}`)));
    this.groupCommit = options.groupCommit ?? true;
    this.checkpointMs = options.checkpointMs ?? 1000;
    this.checkpointRows = Math.max(1, options.checkpointRows ?? 32);
    this.clock = options.clock ?? systemClock;
    migrateSimStore(db);
    this.checkpoints = new CheckpointRowStore(db);
    this.marks = new DirtyMarks(db);
    const p = (sql: string) => db.prepare(sql);
    this.st = {
      counterGet: p('SELECT next FROM sim_counters WHERE server = ?'),
      counterSet: p('INSERT INTO sim_counters (server, next) VALUES (?, ?) ON CONFLICT(server) DO UPDATE SET next = excluded.next'),
      stateUpsert: p('INSERT OR REPLACE INTO sim_state (server, login, kind, key, data) VALUES (?, ?, ?, ?, ?)'),
      requestBatches: p("SELECT data FROM sim_state WHERE server = ? AND login = ? AND kind = 'R' AND key >= ?"),
      journalRow: p('SELECT data FROM sim_journal WHERE server = ? AND time_ms = ? AND login = ? AND seq = ?'),
      stateGet: p('SELECT data FROM sim_state WHERE server = ? AND login = ? AND kind = ? AND key = ?'),
      journalInsert: p('INSERT INTO sim_journal (server, time_ms, login, seq, data) VALUES (?, ?, ?, ?, ?)'),
      journalRange: p('SELECT seq, data FROM sim_journal WHERE server = ? AND time_ms >= ? AND time_ms < ? AND login = ? ORDER BY time_ms, seq'),
    };
    const st = this.st;
    // The queue is emptied once its commit is done: a commit that meets a full disk keeps it (commitQueued).
    const insertQueued = () => {
      for (const it of this.queue) {
        st.journalInsert.run(it.server, it.time, it.login, it.seq, it.data);
        // The account's first row since its checkpoint: its mark goes in the same commit.
        if (!it.m.marked) {
          this.marks.mark(it.server, it.login, it.m.dirtyFrom ?? [it.time, it.seq]);
          it.m.marked = true;
          this.marking.push(it.m);
        }
      }
    };
    this.commitTx = db.transaction(() => {
      const claims = this.claims;
      const booked = this.claimsBooked;
      this.claims = [];
      this.claimsBooked = [];
      for (let i = 0; i < claims.length; i++) claims[i]!.write(booked[i]);
      insertQueued();
    });
    const checkpointTx = db.transaction((all: boolean) => this.checkpointDue(all));
    this.checkpointTx = (all: boolean) => {
      this.failStop.check();
      if (!all && this.clock.now() < this.nextDueMs) return;
      this.checkpointed = [];
      try {
        checkpointTx(all);
      } catch (err) {
        // Rolled back. On a full disk its mirrors are put back as they were (dirty, their records
        // pending, their marks set): the journal has every row the checkpoint would have covered,
        // and a later pass (checkpointLater) writes it once there is room. Any other failure poisons.
        if (this.fullDisk.postponed('simulator checkpoint', err)) this.undoCheckpoint();
        else this.failStop.poison(err);
        this.checkpointed = [];
        throw err;
      }
      // Committed: these accounts have no row after their checkpoint any more.
      for (const c of this.checkpointed) {
        this.checkpoints.committed(c.m, c.w);
        c.m.dirtyFrom = undefined;
      }
      this.checkpointed = [];
      this.fullDisk.wrote();
    };
    this.allocTx = db.transaction((server: string, count: number) => {
      const row = st.counterGet.get(server) as { next: number } | undefined;
      const first = row?.next ?? 100_001;
      st.counterSet.run(server, first + count);
      return first;
    });
  }

  allocateIds(server: string, count: number): number {
    this.failStop.check();
    return this.allocTx.immediate(server, count);
  }

  protected key(server: string, login: string): string {
    return `${server}\u0000${login}`;
  }

  /** Write checkpoints of dirty accounts (all of them when `all`, else those older than
   *  checkpointMs or with checkpointRows records changed), inside the checkpoint transaction. A pass
   *  writing every due account held the shard 0.3-18 ms (80 new positions an account a second) and
   *  the request arriving meanwhile waited (issue 19's p99): it now stops after ~checkpointRows
   *  records, the rest a turn later; an account's checkpoint stays whole. */
  private checkpointDue(all: boolean): void {
    const now = this.clock.now();
    let budget = this.checkpointRows;
    let nextDue = Infinity;
    for (const m of this.dirtyMirrors) {
      const records = (m.positions?.size ?? 0) + (m.activeOrders?.size ?? 0);
      if (!all && now - m.checkpointedMs < this.checkpointMs && records < this.checkpointRows) {
        nextDue = Math.min(nextDue, m.checkpointedMs + this.checkpointMs);
        continue;
      }
      if (!all && budget <= 0) {
        this.checkpointsLeft = true;
        this.nextDueMs = -Infinity;
        return;
      }
      budget -= records + 1;
      const a = m.account;
      this.checkpointed.push({ m, w: this.checkpoints.write(m), marked: m.marked, newRefs: m.newRefs, checkpointedMs: m.checkpointedMs });
      if (m.marked) {
        this.marks.clear(a.server, a.login);
        m.marked = false;
      }
      // Request ids since the last checkpoint, as one row pointing into the journal (keyed by
      // time so a load reads only the last day's batches).
      if (m.newRefs.length > 0) {
        const [t, q] = m.refs!.get(m.newRefs[m.newRefs.length - 1]!)!;
        this.st.stateUpsert.run(a.server, a.login, REQUEST, batchKey(t, q), m.refs!.batchJson(m.newRefs));
        m.newRefs = [];
      }
      if (m.refs && m.refs.size > 20_000) m.refs.prune(m.lastTimeMs - REQUEST_TTL_MS);
      this.dirtyMirrors.delete(m);
      m.checkpointedMs = now;
    }
    this.nextDueMs = nextDue;
  }

  /** The checkpoint transaction in progress failed: its mirrors as they were before it. */
  private undoCheckpoint(): void {
    for (const c of this.checkpointed) {
      this.checkpoints.undo(c.m, c.w);
      c.m.marked = c.marked;
      c.m.newRefs = c.newRefs;
      c.m.checkpointedMs = c.checkpointedMs;
      this.dirtyMirrors.add(c.m);
    }
    this.nextDueMs = -Infinity;
  }

  flush(): void {
    // Shutdown order is the host's business: a closed database has nothing left to flush to, and a
    // poisoned store nothing it may write.
    if (!this.db.open || this.failStop.poisoned) return;
    try {
      this.checkpoint();
    } catch {
      // The failed write poisoned the store and was reported once (onPoisoned). Nothing queued here
      // was answered to anyone (answers wait for their commit), so the stop goes on and the next
      // start restores from what is durable, as after any failed commit.
    }
  }

  /** Write every pending checkpoint now (before closing the database, and in tests). */
  checkpoint(): void {
    this.commitQueued();
    // Changes a full disk keeps waiting: no checkpoint may be ahead of the journal.
    if (this.queue.length > 0) throw this.journalWaits.reason;
    this.checkpointTx(true);
  }

  /** Nothing of `m` is only in memory: its checkpoint and marks are committed, no change waits. */
  protected clean(m: Mirror): boolean {
    return !this.failStop.poisoned && !this.dirtyMirrors.has(m) && m.dirtyFrom === undefined && !m.marked
      && m.newRefs.length === 0 && !m.positions?.size && !m.activeOrders?.size;
  }

  private mirrorFor(server: string, login: string): Mirror {
    const m = this.mirrors.get(this.key(server, login));
    if (!m) throw new Error(`simulator account ${server}/${login} is not loaded`);
    return m;
  }
  /** `open`: an account being loaded, its open records (kept up to date too). */
  protected applyToMirror(m: Mirror, c: SimChange, time: number, seq: number, open?: ReadCheckpoint): void {
    if (c.balance !== undefined) m.account.balance = c.balance;
    notePending(m, c, open);
    if (c.request && !m.refs?.has(c.request.requestId)) {
      (m.refs ??= new RequestRefs()).set(c.request.requestId, time, seq);
      m.newRefs.push(c.request.requestId);
    }
    this.markDirty(m);
    if ((m.positions?.size ?? 0) + (m.activeOrders?.size ?? 0) >= this.checkpointRows) this.nextDueMs = -Infinity;
  }

  /** `m` has changes to checkpoint: the next pass looks at it once it is due by age. */
  protected markDirty(m: Mirror): void {
    this.dirtyMirrors.add(m);
    const due = m.checkpointedMs + this.checkpointMs;
    if (due < this.nextDueMs) this.nextDueMs = due;
  }

  apply(server: string, login: string, change: SimChange): void {
    const m = this.mirrorFor(server, login);
    m.seq++;
    const time = Math.max(m.lastTimeMs, journalTime(change, m.lastTimeMs));
    m.lastTimeMs = time;
    m.dirtyFrom ??= [time, m.seq];
    this.applyToMirror(m, change, time, m.seq);
    this.queue.push({ m, server, login, seq: m.seq, time, data: encodeChange(change) });
    if (!this.groupCommit) {
      this.commitQueued();
      return;
    }
    if (this.durable === null) {
      this.durableChanges();
      // Trade replies waiting on whenDurable() get a failure; tick-triggered changes have no
      // waiter, so it is reported instead of crashing the thread from a timer.
      if (!this.booking) setImmediate(() => this.commitReporting());
    }
  }

  bookAtomically<T>(claim: { check(): void; write(booked: T | undefined): void }, book: () => T): Promise<T> {
    claim.check();
    let booked: T | undefined;
    let failed: { err: unknown } | undefined;
    this.booking = true;
    try {
      booked = book();
    } catch (err) {
      failed = { err };
    } finally {
      this.booking = false;
    }
    // The claim and what it booked, side by side: no closure per booking.
    this.claims.push(claim as WrittenClaim);
    this.claimsBooked.push(booked);
    const settle = failed
      ? () => {
          throw failed.err;
        }
      : () => booked as T;
    if (this.commitGroup?.isOpen) {
      // A batch is being worked through: commit with its other bookings at the end of the turn.
      const durable = this.durableChanges();
      if (!this.groupCommitQueued) {
        this.groupCommitQueued = true;
        this.commitGroup.onClose(() => {
          this.groupCommitQueued = false;
          this.commitReporting();
        });
      }
      return durable.then(settle);
    }
    try {
      // IMMEDIATE: the write lock first (waiting as busy_timeout says), held only for the claim's
      // row and the journal's, not while the trade runs: other shards' connections write the same file.
      this.commitQueued();
      return failed ? Promise.reject(failed.err) : Promise.resolve(booked as T);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /** The promise of the changes applied so far (made when the first of them is queued). */
  private durableChanges(): Promise<void> {
    if (this.durable === null) {
      this.durable = new Promise<void>((resolve, reject) => {
        this.resolveDurable = resolve;
        this.rejectDurable = reject;
      });
      // Waiters get the rejection; without one it must not become an unhandled rejection
      // (the failure is reported through onError).
      this.durable.catch(() => undefined);
    }
    return this.durable;
  }

  /** commitQueued from a timer or a turn's end: waiters get a failure, the store's poisoning reports it. */
  private commitReporting(): void {
    try {
      this.commitQueued();
    } catch {
      // Reported once, when it poisoned the store.
    }
  }

  /** Commit what is queued now (also called by readers). Changes no request waits for that meet a
   *  full disk stay queued (the store's readers read them from the queue meanwhile) and are
   *  committed by a retry once there is room; any other failed commit poisons the store. */
  commitQueued(): void {
    if (this.queue.length === 0 && this.claims.length === 0) return;
    const awaited = this.awaited || this.claims.length > 0;
    let written: boolean;
    try {
      // Changes a request waits for may not wait for room: their commit failing fails (below).
      written = this.journalWaits.attempt(() => {
        this.failStop.check();
        // With claims: IMMEDIATE, the write lock taken up front (see bookAtomically).
        if (this.claims.length > 0) this.commitTx.immediate();
        else this.commitTx();
      }, [], !awaited);
    } catch (err) {
      this.unmark();
      // The memory now holds what the disk does not (the bookings, the mirrors): nothing more is
      // written from it, and what was queued is dropped (the shard restarts from disk).
      const reject = this.rejectDurable;
      this.durable = this.resolveDurable = this.rejectDurable = null;
      this.failStop.poison(err);
      this.queue = [];
      this.claims = [];
      this.claimsBooked = [];
      this.awaited = false;
      reject?.(err);
      throw err;
    }
    if (!written) {
      // Rolled back, for lack of room. Nobody was told anything of these changes (their events wait
      // for the commit): they are the simulator's own (ticks, the clock), and stay queued, written
      // as they are once there is room (the retry, or any commit before it).
      this.unmark();
      return;
    }
    const resolve = this.resolveDurable;
    this.durable = this.resolveDurable = this.rejectDurable = null;
    this.queue = [];
    this.marking = [];
    this.awaited = false;
    // Rows a full disk kept waiting are written (the retry disarmed, the episode over: attempt).
    resolve?.();
    this.scheduleCheckpoints();
  }

  /** A commit rolled back: the marks it wrote are not on disk. */
  private unmark(): void {
    for (const m of this.marking) m.marked = false;
    this.marking = [];
  }

  /** The queued rows of an account in [fromMs, toMs) (a full disk keeps them waiting), in order. */
  protected queuedRows(server: string, login: string, fromMs: number, toMs: number): Array<{ seq: number; time: number; data: string }> {
    if (this.queue.length === 0) return [];
    return this.queue.filter((it) => it.server === server && it.login === login && it.time >= fromMs && it.time < toMs);
  }

  /**
   * Checkpoints that fell due are written a turn after the journal commit, in a transaction of
   * their own: a checkpoint serializes the account's whole state (every open position), and an
   * order's reply, which waits for the journal commit, should not wait for that too. The journal
   * is committed first, so a checkpoint is never ahead of it.
   */
  private scheduleCheckpoints(): void {
    if (this.checkpointsQueued) return;
    this.checkpointsQueued = true;
    setImmediate(() => {
      this.checkpointsQueued = false;
      if (!this.db.open || this.failStop.poisoned) return;
      try {
        // Changes queued meanwhile are committed first, and their waiters answered before the
        // checkpoints (a turn later; only once, so a busy shard still gets its checkpoints).
        if (this.queue.length > 0 && !this.checkpointsPostponed) {
          this.checkpointsPostponed = true;
          this.commitQueued();
          return;
        }
        this.checkpointsPostponed = false;
        this.commitQueued();
        // Unless changes wait for room (a full disk): the checkpoint comes after them, never ahead.
        if (this.queue.length === 0) this.checkpointTx(false);
      } catch {
        // Reported once, when it poisoned the store.
      }
      if (this.checkpointsLeft) {
        this.checkpointsLeft = false;
        this.scheduleCheckpoints();
      }
      this.checkpointLater();
    });
  }

  /**
   * Accounts a pass left dirty (checkpointed less than checkpointMs ago) wait for the next commit's
   * pass; on a shard that went quiet that could be never, and their marks (sim_dirty) would keep a
   * restart reading the journal from then on, every shard's rows included. One timer while any is
   * dirty: a quiet shard checkpoints them and stops; idle, nothing runs.
   */
  private checkpointLater(): void {
    if (this.lateCheckpoints || this.dirtyMirrors.size === 0 || !this.db.open || this.failStop.poisoned) return;
    this.lateCheckpoints = setTimeout(() => {
      this.lateCheckpoints = undefined;
      this.scheduleCheckpoints();
    }, Math.min(this.checkpointMs, 0x7fffffff));
    this.lateCheckpoints.unref();
  }

  whenDurable(): Promise<void> {
    if (this.durable === null) return Promise.resolve();
    // A request waits: its commit may not wait for room (it fails, and the store with it), and is
    // made now if a full disk kept the changes before it waiting.
    this.awaited = true;
    if (this.journalWaits.retrying) setImmediate(() => this.commitReporting());
    return this.durable;
  }

  pendingCommit(): Promise<void> | null {
    return this.durable;
  }

}
