// One node's /v1/stream account history in SQLite (docs/stream.md "History"): each batch of account
// events is written in one transaction before its frames leave (so a restarted gateway never finds
// a client ahead of it), then handed to `deliver`. On a full DATA_DIR a batch waits in memory with
// its frames unsent, later batches wait behind it, and the write is tried again every retryMs: once
// it is done the frames are sent, in order, each once (docs/storage.md). Snapshots that describe
// lists as of waiting frames wait with them (afterStored).
import type { Logger } from '../log.js';
import type { FullDisk } from '../store/fullDisk.js';
import type { StreamHistoryStore } from '../store/streamHistory.js';
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
}

export class HistoryWrites {
  /** Recorded, not stored yet: a full disk keeps them (and their frames) until a retry writes them. */
  private unstored: Pending[] = [];
  private retry: NodeJS.Timeout | undefined;
  /** Snapshots waiting for those entries (they describe lists as of them). */
  private waiters: Array<() => void> = [];

  constructor(private readonly deps: HistoryWritesDeps, private readonly deliver: (acc: AccountState, entries: readonly HistoryEntry[]) => void) {}

  /** Whether entries wait for room (their frames unsent). */
  get waiting(): boolean {
    return this.unstored.length > 0;
  }

  /** Runs `f` once what waits now is stored and sent (after the write that stores it). */
  afterStored(f: () => void): void {
    this.waiters.push(f);
  }

  /** A batch: written and sent now, or behind entries a full disk keeps waiting (the retry writes them all, in order). */
  write(batch: Pending[]): void {
    if (this.unstored.length > 0) {
      for (const p of batch) this.unstored.push(p);
      return;
    }
    this.store(batch);
  }

  /**
   * Writes the entries (one transaction), then sends them. A full disk keeps them, unsent, and
   * tries again every retryMs. Any other failure is logged and the frames are sent (a restart may
   * not find them: docs/stream.md).
   */
  private store(batch: Pending[]): void {
    const byAcc = byAccount(batch);
    try {
      this.deps.history.write([...byAcc].map(([acc, entries]) => ({
        accountId: acc.id, epoch: acc.history.epoch, seq: acc.history.seq, deal: acc.deals.mark, entries, keepFrom: acc.history.firstSeq,
      })), this.deps.clock.now());
      this.deps.fullDisk?.wrote();
    } catch (err) {
      const fullDisk = this.deps.fullDisk;
      if (fullDisk?.postponed('stream history', err)) {
        this.unstored = batch.filter((p) => p.epoch === p.acc.history.epoch);
        this.retry ??= setTimeout(() => this.storeUnstored(), fullDisk.retryMs);
        this.retry.unref();
        return;
      }
      this.deps.log.error('stream history write failed', { err: errorMessage(err) });
    }
    for (const [acc, entries] of byAcc) this.deliver(acc, entries);
    const waiters = this.waiters;
    this.waiters = [];
    for (const f of waiters) f();
  }

  /** The entries a full disk kept: tried again (see `store`). */
  private storeUnstored(): void {
    clearTimeout(this.retry);
    this.retry = undefined;
    const batch = this.unstored;
    this.unstored = [];
    if (batch.length > 0) this.store(batch);
  }

  /** Shutdown: what a full disk kept is tried once more; what still cannot be written was never sent. */
  stop(): void {
    this.storeUnstored();
    clearTimeout(this.retry);
    this.retry = undefined;
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
