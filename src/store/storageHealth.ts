// Whether DATA_DIR can take writes. A full disk must not turn an order into a 500 "internal error"
// or into an order the gateway could not record: while the file system holding DATA_DIR has less
// than the reserve free, or since a write failed for lack of space (SQLITE_FULL, ENOSPC), trading
// calls are refused with 503 STORAGE_UNAVAILABLE before anything is sent, /readyz answers 503 and
// /metrics shows it. A check every `checkMs` ends the episode by itself once space is back. One log
// line when an episode starts and one when it ends, however many requests it refused. A shard whose
// background writes wait for room (its FullDisk's episode, told as a storage.waiting event), or the
// main thread's own (the stream history's), makes the disk full too, until a write succeeded again:
// such writes wait for room the reserve check may not see (a quota), and an order's commit would
// meet the same disk.
import { statfsSync } from 'node:fs';
import { apiError, type ApiError } from '../errors.js';
import type { Logger } from '../log.js';
import type { FullDiskEpisode } from './fullDisk.js';

export interface StorageHealthOptions {
  dir: string;
  /** Free bytes below which the disk counts as full (SQLite needs room to grow its WAL and checkpoint it). */
  minFreeBytes: number;
  /** How old the last look at the file system may be before a caller's question refreshes it; the background check runs twice per period. */
  checkMs: number;
  log: Logger;
  now: () => number;
  /** Free bytes of the file system holding `dir`, as an unprivileged process may use them (injected in unit tests). */
  freeBytes?: (dir: string) => number;
}

export interface StorageStatus {
  available: boolean;
  /** At the last check; null if the file system could not be asked. */
  freeBytes: number | null;
  /** When the current episode began (ms), when the disk is full. */
  fullSince?: number;
  /** Why, when the disk is full: what found it full first in the episode. */
  reason?: string;
  /** Shards whose background writes wait for room (since when, which writers: the first to meet the
   *  full disk first, comma-separated), when any do. */
  shardsWaiting?: ShardWaiting[];
  /** The main thread's background writes (the stream history's batches), when they wait for room. */
  mainWaiting?: { since: number; what: string };
}

export interface ShardWaiting { shard: number; since: number; what: string }

const statfsFree = (dir: string) => {
  const s = statfsSync(dir);
  return s.bavail * s.bsize;
};

export class StorageHealth {
  private full: { since: number; reason: string } | undefined;
  private checkedAt = Number.NEGATIVE_INFINITY;
  private free: number | null = null;
  private timer: NodeJS.Timeout | undefined;
  /** Episodes of a full disk since start (a counter in /metrics). */
  episodes = 0;
  /** Threads whose background writes wait for room now: shards by index, and 'main' (see shardReport, mainReport). */
  private readonly waiting = new Map<number | 'main', { since: number; what: string }>();
  /** Episodes of shards' background writes waiting since start (a counter in /metrics). */
  shardEpisodes = 0;

  constructor(private readonly o: StorageHealthOptions) {}

  start(): this {
    this.check();
    // Twice per checkMs, so a caller's question finds a look younger than checkMs and does not
    // make one: at one period, a question came just before the timer now and then, and that first
    // call of check() from available() (a branch the order path's optimized code had never seen)
    // threw the route's optimized code out, to be recompiled mid-stream (~18 ms of a compiler
    // thread; issue 19, the p99).
    this.timer = setInterval(() => this.check(), Math.max(1, Math.floor(this.o.checkMs / 2)));
    this.timer.unref();
    return this;
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** Looks at the file system now. */
  check(): void {
    this.checkedAt = this.o.now();
    try {
      this.free = (this.o.freeBytes ?? statfsFree)(this.o.dir);
    } catch (err) {
      // Not knowing is not "full": writes will tell (reportFull) if it is.
      this.free = null;
      this.o.log.warn('cannot read the free space of DATA_DIR', { dir: this.o.dir, err: err instanceof Error ? err.message : String(err) });
      return;
    }
    if (this.free < this.o.minFreeBytes) this.enter(`${mb(this.free)} free, below the ${mb(this.o.minFreeBytes)} reserve`);
    else if (this.full && this.waiting.size === 0) this.leave();
  }

  /**
   * A shard's background writes began waiting for room, or the wait is over (a write succeeded,
   * or the shard started afresh). While any shard waits the disk is full (trading calls 503);
   * once none does, it is full only as long as the free space says so.
   */
  shardReport(shard: number, e: FullDiskEpisode): void {
    if (e.waiting && !this.waiting.has(shard)) this.shardEpisodes++;
    this.report(shard, `shard ${shard}'s`, e);
  }

  /** The same for the main thread's own background writes (the stream history's batches). */
  mainReport(e: FullDiskEpisode): void {
    this.report('main', "the main thread's", e);
  }

  private report(thread: number | 'main', whose: string, e: FullDiskEpisode): void {
    if (e.waiting) {
      const on = this.waiting.get(thread);
      if (on) {
        on.what = e.what; // another of its writers waits too (the episode and its reason go on)
        return;
      }
      const now = this.o.now();
      this.waiting.set(thread, { since: now, what: e.what });
      this.checkedAt = now;
      this.enter(`${whose} background writes wait for room: ${e.what}, ${e.err}`);
    } else if (this.waiting.delete(thread) && this.waiting.size === 0 && this.full) {
      this.check();
    }
  }

  /** How many shards' background writes wait for room now (a gauge in /metrics). */
  get shardsWaiting(): number {
    return this.waiting.size - (this.waiting.has('main') ? 1 : 0);
  }

  /** A write failed for lack of space: full until a later check finds room. */
  reportFull(reason: string): void {
    if (this.full) return;
    this.checkedAt = this.o.now();
    this.enter(reason);
  }

  /** Whether writes may go ahead; refreshed from the file system when the last look is older than checkMs. */
  available(): boolean {
    if (this.o.now() - this.checkedAt >= this.o.checkMs) this.check();
    return this.full === undefined;
  }

  status(): StorageStatus {
    const available = this.available();
    const main = this.waiting.get('main');
    return {
      available, freeBytes: this.free, ...(this.full ? { fullSince: this.full.since, reason: this.full.reason } : {}),
      ...(this.shardsWaiting > 0 ? { shardsWaiting: [...this.waiting].flatMap(([t, w]) => (t === 'main' ? [] : [{ shard: t, ...w }])) } : {}),
      ...(main ? { mainWaiting: { ...main } } : {}),
    };
  }

  /** Throws 503 STORAGE_UNAVAILABLE while the disk is full: called before a trade is recorded or sent. */
  assertWritable(): void {
    if (!this.available()) throw storageUnavailable(this.full!.reason, this.o.checkMs);
  }

  private enter(reason: string): void {
    if (this.full) return;
    this.full = { since: this.o.now(), reason };
    this.episodes++;
    this.o.log.error('DATA_DIR is full: trading calls answer 503 STORAGE_UNAVAILABLE (nothing is sent) until space is freed', { dir: this.o.dir, reason });
  }

  private leave(): void {
    const since = this.full!.since;
    this.full = undefined;
    this.o.log.info('DATA_DIR has room again: trading resumed', { dir: this.o.dir, free: this.free === null ? null : mb(this.free), fullForMs: this.o.now() - since });
  }
}

function mb(bytes: number): string {
  return `${(bytes / 1_048_576).toFixed(1)} MiB`;
}

/** The 503 of a full disk, with a message an operator can act on. */
export function storageUnavailable(reason: string, retryMs = 5_000): ApiError {
  return apiError('STORAGE_UNAVAILABLE', `the gateway's disk (DATA_DIR) is full (${reason}): nothing was recorded or sent to the broker; the operator must free space, then retry`, {
    headers: { 'retry-after': String(Math.max(1, Math.ceil(retryMs / 1000))) },
  });
}
