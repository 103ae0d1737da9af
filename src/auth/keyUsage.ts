// When each key was last used, without a SQLite commit per request: a request only sets a number
// in a map (no allocation once the key is in it); the map is written in one transaction per
// flush period, and readers see the unflushed times too (latest()).
import type { Clock } from './throttle.js';

export interface UsageSink { touchKeys(times: Iterable<[string, number]>): void }

export class KeyUsage {
  private pending = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly sink: UsageSink, private readonly clock: Clock) {}

  /** The hot-path call: remembers that `keyId` was used now. */
  touch(keyId: string): void {
    this.pending.set(keyId, this.clock.now());
  }

  /** A use not yet written, if any (newer than the stored one). */
  latest(keyId: string): number | undefined {
    return this.pending.get(keyId);
  }

  /** Writes what is pending in one transaction. @returns how many keys were written. A write that
   *  fails (a full disk, say) keeps its times for the next flush (a later use meanwhile wins). */
  flush(): number {
    if (this.pending.size === 0) return 0;
    const batch = this.pending;
    this.pending = new Map();
    try {
      this.sink.touchKeys(batch);
    } catch (err) {
      for (const [id, at] of this.pending) batch.set(id, Math.max(at, batch.get(id) ?? at));
      this.pending = batch;
      throw err;
    }
    return batch.size;
  }

  /** Flushes every `periodMs` (the timer does not keep the process alive). */
  start(periodMs: number, onError: (err: unknown) => void): void {
    this.timer ??= setInterval(() => {
      try {
        this.flush();
      } catch (err) {
        onError(err);
      }
    }, periodMs).unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }
}
