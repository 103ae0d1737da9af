// One node's /v1/stream account history in SQLite (docs/stream.md "History"): each batch of account
// events is written in one transaction before its frames leave (so a restarted gateway never finds
// a client ahead of it), then handed to `deliver`. On a full DATA_DIR a batch waits in memory with
// its frames unsent, later batches wait behind it, and the write is tried again every retryMs: once
// it is done the frames are sent, in order, each once (docs/storage.md). Snapshots that describe
// lists as of waiting frames wait with them (afterStored). What waits is bounded (heldMaxBytes,
// STREAM_HISTORY_HELD_MAX_BYTES): an account whose frame does not fit has its waiting frames dropped
// (never sent) and begins a new epoch (its sockets told: 4014), sent unstored until a write puts
// that epoch on disk where it stands; a restart meanwhile knows nothing of it, so cannot contradict it.
// A new epoch (a rotation, a fresh stream: epochBegun) is written here too, fresh (the rows of the
// one before deleted in the same transaction), in order with what waits. The invariant: a frame is
// sent only if it is stored, or its epoch is one no disk holds.
import type { Logger } from '../log.js';
import { FULL_DISK_RETRY_MS, FullDisk } from '../store/fullDisk.js';
import { HeldWrites, type Scheduler } from '../store/heldWrites.js';
import type { StreamHistoryStore, StreamWrite } from '../store/streamHistory.js';
import type { Clock } from '../util/clock.js';
import { errorMessage } from '../util/errorMessage.js';
import type { HistoryEntry } from './history.js';
import type { AccountState } from './state.js';

/** An entry recorded for an account in an epoch, on its way to the history and the sockets. */
export interface Pending { acc: AccountState; epoch: string; entry: HistoryEntry }

export interface HistoryWritesDeps {
  log: Logger;
  clock: Clock;
  history: StreamHistoryStore;
  /** The main thread's: a history write that meets a full DATA_DIR waits for room (src/store/fullDisk.ts). */
  fullDisk?: FullDisk;
  /** Tests: the retry's timers (default: the system's). */
  scheduler?: Scheduler;
}

/** What the account streams do with what HistoryWrites decides (accountEvents.ts). */
export interface HistoryWritesHooks {
  /** Stored entries to the account's live sockets. */
  deliver(acc: AccountState, entries: readonly HistoryEntry[]): void;
  /** The account's frames no longer fit in memory while the disk is full: its waiting frames (never
   *  sent) are dropped, so its stream must begin a new epoch, and its sockets be told (4014). */
  overflow(acc: AccountState): void;
  /** Whether the account's stream is still kept here (only those get their epoch written). */
  kept(acc: AccountState): boolean;
}

/** A frame's cost in memory while it waits: its text, and about this much for its entry and Pending. */
const ENTRY_OVERHEAD_BYTES = 160;

export class HistoryWrites {
  /** Recorded, not stored yet: a full disk keeps them (and their frames) until a retry writes them. */
  private readonly unstored: HeldWrites<Pending>;
  /** Snapshots waiting for those entries (they describe lists as of them). */
  private waiters: Array<() => void> = [];
  /** Accounts whose epoch is on no disk yet (begun while writes waited or the disk was full): the
   *  next write that succeeds writes it fresh, where it stands (with the account's frames that waited). */
  private readonly unwritten = new Set<AccountState>();
  /** Of those, the accounts whose frames this episode could not hold (over `heldMaxBytes`): their
   *  epoch's frames are sent without being stored until that write succeeds. */
  private readonly unheld = new Set<AccountState>();
  /** A write or a hold is under way (a new epoch begun from inside it waits for the retry). */
  private busy = 0;
  /** Since start: account streams that began a new epoch so (tagw_stream_history_overflows_total). */
  overflows = 0;
  private overflowLogged = false;

  constructor(
    private readonly deps: HistoryWritesDeps, private readonly hooks: HistoryWritesHooks,
    /** STREAM_HISTORY_HELD_MAX_BYTES: the most account frames a full disk holds in memory. */
    private readonly heldMaxBytes = Number.POSITIVE_INFINITY,
  ) {
    this.unstored = new HeldWrites<Pending>({
      fullDisk: deps.fullDisk ?? new FullDisk({ log: deps.log, retryMs: FULL_DISK_RETRY_MS }),
      what: 'stream history',
      retry: (batch) => this.store(batch),
      sizeOf: (p) => p.entry.frame.length + ENTRY_OVERHEAD_BYTES,
      ...(deps.scheduler ? { scheduler: deps.scheduler } : {}),
    });
  }

  /** Whether entries wait for room (their frames unsent). */
  get waiting(): boolean {
    return this.unstored.held.length > 0;
  }

  /** The memory the waiting frames take (about: tagw_stream_history_held_bytes). */
  get heldBytes(): number {
    return this.unstored.size;
  }

  /** Runs `f` once what waits now is stored and sent (after the write that stores it). */
  afterStored(f: () => void): void {
    this.waiters.push(f);
  }

  /**
   * The account's stream began a new epoch here (AccountStreams.rotate, or a stream begun fresh):
   * written now when nothing waits (fresh: the rows of the epoch before go in the same transaction),
   * else by the write that stores what waits, in order (its frames wait behind it, stored before
   * sent). An account over the bound stays so: its new epoch's frames go out unstored (no disk holds
   * that epoch, not even at seq 0) until a write puts it on disk where it stands. Until it is
   * written a restart finds the epoch before, which holds nothing not sent as it was.
   */
  epochBegun(acc: AccountState): void {
    this.unwritten.add(acc);
    if (this.waiting || this.busy > 0) {
      this.unstored.hold([]); // the retry (or the next write) writes it
      return;
    }
    this.store([], acc);
  }

  /** A batch: written and sent now, or behind entries a full disk keeps waiting (the retry writes them all, in order). */
  write(batch: Pending[]): void {
    if (this.unheld.size > 0) {
      // Their new epoch is not on disk yet: nothing of it was stored, nothing is held for it.
      for (const [acc, entries] of byAccount(batch.filter((p) => this.unheld.has(p.acc)))) this.hooks.deliver(acc, entries);
      batch = batch.filter((p) => !this.unheld.has(p.acc));
    }
    if (this.waiting) {
      this.hold(batch);
      return;
    }
    this.store(batch);
  }

  /**
   * Writes the entries (one transaction), then sends them. A full disk keeps them, unsent, and
   * tries again every retryMs. Any other failure is logged and the frames are sent (a restart may
   * not find them: docs/stream.md). The same transaction writes the epochs not on disk yet, fresh:
   * an account's with its entries, or where it stands (its frames unstored over the bound, or none
   * yet); from then on every account's frames are stored before they are sent. `begun`: the account
   * whose new epoch this write is for (not in the streams' map yet when it is a new stream's); its
   * stream's sockets are being closed, so the snapshots waiting for stored frames wait for the next write.
   */
  private store(batch: Pending[], begun?: AccountState): void {
    this.busy++;
    try {
      this.storeNow(batch, begun);
    } finally {
      this.busy--;
    }
  }

  private storeNow(batch: Pending[], begun: AccountState | undefined): void {
    const byAcc = byAccount(batch);
    // A stream released meanwhile (no socket got them): its frames are not written (its history was
    // dropped, and a stream of the account begun since, maybe from that history, numbers its own).
    for (const acc of byAcc.keys()) if (!this.hooks.kept(acc)) byAcc.delete(acc);
    const unwritten = [...this.unwritten].filter((acc) => acc === begun || this.hooks.kept(acc));
    try {
      const writes: StreamWrite[] = unwritten.filter((acc) => !byAcc.has(acc)).map((acc) => ({
        // Up to what was sent (a frame numbered since is still on its way here: stored with its batch).
        accountId: acc.id, epoch: acc.history.epoch, seq: acc.history.sent, deal: acc.deals.mark, entries: [], keepFrom: acc.history.sent + 1, fresh: true,
      }));
      for (const [acc, entries] of byAcc) {
        writes.push({
          accountId: acc.id, epoch: acc.history.epoch, seq: acc.history.seq, deal: acc.deals.mark, entries, keepFrom: acc.history.firstSeq,
          ...(this.unwritten.has(acc) ? { fresh: true } : {}),
        });
      }
      if (!this.unstored.attempt(() => this.deps.history.write(writes, this.deps.clock.now()))) {
        this.hold(batch);
        return;
      }
      this.endEpisode();
    } catch (err) {
      this.deps.log.error('stream history write failed', { err: errorMessage(err) });
    }
    for (const [acc, entries] of byAcc) this.hooks.deliver(acc, entries);
    if (begun) return;
    const waiters = this.waiters;
    this.waiters = [];
    for (const f of waiters) f();
  }

  /** Holds the entries, each unless its account's waiting frames would pass `heldMaxBytes`: that
   *  account's are then dropped (none of them was sent) and its stream begins a new epoch. */
  private hold(batch: readonly Pending[]): void {
    this.busy++;
    try {
      this.holdNow(batch);
    } finally {
      this.busy--;
    }
  }

  private holdNow(batch: readonly Pending[]): void {
    const max = this.heldMaxBytes;
    for (const p of batch) {
      if (p.epoch !== p.acc.history.epoch || this.unheld.has(p.acc)) continue;
      if (this.unstored.size + p.entry.frame.length + ENTRY_OVERHEAD_BYTES <= max) {
        this.unstored.hold([p]);
        continue;
      }
      const acc = p.acc;
      const dropped = this.unstored.remove((q) => q.acc === acc).length + 1;
      this.unheld.add(acc);
      this.unwritten.add(acc);
      this.overflows++;
      if (!this.overflowLogged) {
        this.overflowLogged = true;
        this.deps.log.error('DATA_DIR is full and the stream history\'s waiting frames reached STREAM_HISTORY_HELD_MAX_BYTES: accounts whose frames do not fit begin a new epoch (their sockets close 4014, a resume answers recovered:false)', {
          heldMaxBytes: max, heldBytes: this.unstored.size, accountId: acc.id, droppedFrames: dropped,
        });
      }
      this.hooks.overflow(acc); // its new epoch: epochBegun, over the bound
    }
    // Nothing left to hold for an account's new epoch, but its position must reach the disk.
    if (this.unwritten.size > 0) this.unstored.hold([]);
  }

  /** A write succeeded: every epoch is on disk, accounts over the bound are stored again from here on. */
  private endEpisode(): void {
    if (this.overflowLogged) {
      this.deps.log.info('stream history: the accounts that began a new epoch for lack of room are stored again', { overflowsSinceStart: this.overflows });
    }
    this.overflowLogged = false;
    this.unwritten.clear();
    this.unheld.clear();
  }

  /** Shutdown: what a full disk kept is tried once more; what still cannot be written was never sent. */
  stop(): void {
    this.unstored.stop();
  }
}

/** A batch's entries by account, in order; entries of an epoch that ended meanwhile (its sockets are closed) left out. */
export function byAccount(batch: readonly Pending[]): Map<AccountState, HistoryEntry[]> {
  const byAcc = new Map<AccountState, HistoryEntry[]>();
  for (const p of batch) {
    if (p.epoch !== p.acc.history.epoch) continue;
    let list = byAcc.get(p.acc);
    if (!list) byAcc.set(p.acc, (list = []));
    list.push(p.entry);
  }
  return byAcc;
}
