// Background writes held in memory while DATA_DIR is full, and tried again (docs/storage.md). The
// one loop its writers shared, each by hand before (the idempotency outcomes of a shard's
// TradeRecords, the stream history's batches in HistoryWrites, the simulator journal's queued
// rows, a seat's state row, which FullDisk.write retried with a timer of its own per write): a
// write that meets a full disk keeps what it could not write, one retry timer runs every retryMs
// while anything waits, and a stop tries once more. What is held is written in the order held; a
// writer of state rows, one a key (a seat's: keyOf), has the latest row of a key win, so a retry
// never writes an older row after a newer one written at once. Which errors mean "no room", and the
// one log line per episode, are FullDisk's (fullDisk.ts). Timers come from a scheduler passed in
// (a test's own, or the system's), so the helper's states can be driven by a test without time.
import type { FullDisk } from './fullDisk.js';

/** Where the retry timer comes from: the system's (unref'd: a waiting write keeps no process alive) or a test's. */
export interface Scheduler {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export const systemScheduler: Scheduler = {
  setTimeout: (fn, ms) => setTimeout(fn, ms).unref(),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

export interface HeldWritesOptions<T> {
  /** The thread's: "no room" and the episode's log line and report. */
  fullDisk: FullDisk;
  /** The writer, as the episode's log line names it. */
  what: string;
  /** Writes what was held (from the timer, or `flush`): the writer's own write again, which holds
   *  it once more when the disk is still full. `items` may be empty for a writer that keeps its
   *  pending rows itself (the simulator journal's queue). */
  retry: (items: T[]) => void;
  /** An item's size, for a writer that bounds what it holds (`size`); default 0. */
  sizeOf?: (item: T) => number;
  /** A writer of state rows, one a key (a seat's state): the latest row of a key wins. A held row is
   *  dropped once a newer one of its key is written, and replaced by one held after it, so a retry
   *  never writes an older row over a newer one. Without it what is held is written in the order
   *  held (an append-only writer also keeps a later row behind what is held: HistoryWrites). */
  keyOf?: (item: T) => string;
  scheduler?: Scheduler;
}

export class HeldWrites<T> {
  private items: T[] = [];
  private bytes = 0;
  private timer: unknown;
  private armed = false;
  /** The full disk's error that holds them, while they wait. */
  reason: unknown;

  constructor(private readonly o: HeldWritesOptions<T>) {}

  /** Whether writes wait for room (items held, or a retry armed for a writer's own pending rows). */
  get waiting(): boolean {
    return this.items.length > 0 || this.armed;
  }

  /** Whether a retry is armed. */
  get retrying(): boolean {
    return this.armed;
  }

  /** What is held, oldest first. */
  get held(): readonly T[] {
    return this.items;
  }

  /** The sum of the held items' sizes (sizeOf). */
  get size(): number {
    return this.bytes;
  }

  /**
   * Runs `write`. True: it is done, and a full-disk episode on is over (FullDisk.wrote); with
   * `keyOf` the held rows of the keys written leave memory (older); the retry is disarmed unless
   * items are still held. False: it met a full disk: `items` are held (behind what is held already;
   * with `keyOf` in place of the held rows of their keys) and the retry armed. Any other failure is thrown, nothing held. With
   * `mayWait` false (a write a request waits for) a full disk is thrown like any other failure.
   */
  attempt(write: () => void, items: readonly T[] = [], mayWait = true): boolean {
    try {
      write();
    } catch (err) {
      if (!mayWait || !this.o.fullDisk.postponed(this.o.what, err)) throw err;
      this.reason = err;
      this.hold(items);
      return false;
    }
    this.supersede(items);
    if (this.items.length === 0) {
      this.disarm();
      this.reason = undefined;
    }
    this.o.fullDisk.wrote();
    return true;
  }

  /** Holds `items` behind what waits (with `keyOf`: in place of the held rows of their keys; no
   *  write tried now) and arms the retry. */
  hold(items: readonly T[]): void {
    for (const it of items) {
      this.supersede([it]);
      this.items.push(it);
      this.bytes += this.o.sizeOf?.(it) ?? 0;
    }
    this.arm();
  }

  /** Takes the held items `drop` picks out of memory (a writer giving up on them); returns them. */
  remove(drop: (item: T) => boolean): T[] {
    const out: T[] = [];
    const keep: T[] = [];
    for (const it of this.items) (drop(it) ? out : keep).push(it);
    if (out.length === 0) return out;
    this.items = keep;
    for (const it of out) this.bytes -= this.o.sizeOf?.(it) ?? 0;
    return out;
  }

  /** With `keyOf`: the held rows of the keys of `items` (newer rows) leave memory. */
  private supersede(items: readonly T[]): void {
    const keyOf = this.o.keyOf;
    if (!keyOf || items.length === 0 || this.items.length === 0) return;
    const keys = new Set(items.map(keyOf));
    this.remove((it) => keys.has(keyOf(it)));
  }

  /** What waits, now: the retry disarmed and the held items handed to `retry` (the timer does this every retryMs). */
  flush(): void {
    if (this.waiting) this.retryNow();
  }

  /** Shutdown: tried once more; what still cannot be written stays with the writer, no retry armed. */
  stop(): void {
    this.flush();
    this.disarm();
  }

  /** The retry (`retry` does not throw: from a timer that would end the thread). */
  private retryNow(): void {
    this.disarm();
    const items = this.items;
    this.items = [];
    this.bytes = 0;
    this.o.retry(items);
  }

  private arm(): void {
    if (this.armed) return;
    this.armed = true;
    this.timer = (this.o.scheduler ?? systemScheduler).setTimeout(() => {
      this.armed = false;
      this.retryNow();
    }, this.o.fullDisk.retryMs);
  }

  private disarm(): void {
    if (!this.armed) return;
    (this.o.scheduler ?? systemScheduler).clearTimeout(this.timer);
    this.armed = false;
    this.timer = undefined;
  }
}
