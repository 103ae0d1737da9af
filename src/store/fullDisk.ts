// Writes no request waits for (a thread's background writes: the embedded simulator's equity points,
// stops and expirations, its checkpoint passes) that meet a full DATA_DIR. A request's write is
// refused before it is made (503 STORAGE_UNAVAILABLE, src/store/storageHealth.ts); a background
// write cannot be refused, and it must not stop the thread either (a shard that stops restarts its
// accounts' actors and connections, and a bot sees errors; before, the simulator's store took the
// full disk for a failed commit and stopped its shard). So its writer keeps what it could not write,
// in memory, and writes it once there is room: tried again every `retryMs`. Which errors mean "no
// room" is errors.ts's isStorageFull, as for requests. One line when a thread's episode begins, one
// when a write succeeds again, however many writes waited; `report` hears the same two moments, and
// each other writer whose writes meet the full disk in the episode (a shard tells its main thread:
// runtime/storageEvent.ts), so /readyz names every writer that waits, not only the first.
import { isStorageFull } from '../errors.js';
import type { Logger } from '../log.js';
import { errorMessage } from '../util/errorMessage.js';

export interface FullDiskOptions {
  log: Logger;
  /** How long a postponed write waits before it is tried again (ms). */
  retryMs: number;
  /** Told when an episode begins (writes wait), when another writer's writes wait in it, and when
   *  it ends (a write succeeded again). */
  report?: (episode: FullDiskEpisode) => void;
}

/** An episode's beginning, or another writer waiting in it (`what`: the writers whose writes wait,
 *  in the order they met the full disk, comma-separated; `err`: the first's error), or its end. */
export type FullDiskEpisode = { waiting: true; what: string; err: string } | { waiting: false };

/** The default wait before a postponed write is tried again (the gateway's STORAGE_CHECK_MS default). */
export const FULL_DISK_RETRY_MS = 1_000;

/** The thread's FullDisk (a shard's context holds it; one is made from its logger where none was given). */
export function fullDiskOf(ctx: { fullDisk?: FullDisk; log: Logger }): FullDisk {
  return (ctx.fullDisk ??= new FullDisk({ log: ctx.log, retryMs: FULL_DISK_RETRY_MS }));
}

export class FullDisk {
  /** The writers whose writes met the full disk in the current episode, first first (empty: none on). */
  private inEpisode: string[] = [];
  /** The first one's error. */
  private firstErr = '';
  /** Writes postponed since start (named in the line that ends an episode). */
  postponedWrites = 0;

  constructor(private readonly o: FullDiskOptions) {}

  get retryMs(): number {
    return this.o.retryMs;
  }

  /**
   * A background write failed. True: for lack of space, so it is postponed (the caller keeps what
   * it could not write and tries again after retryMs); the episode's first is logged. False: any
   * other failure, which the caller handles as before.
   */
  postponed(what: string, err: unknown): boolean {
    if (!isStorageFull(err)) return false;
    this.postponedWrites++;
    if (this.inEpisode.length === 0) {
      this.inEpisode = [what];
      this.firstErr = errorMessage(err);
      this.o.log.error('DATA_DIR is full: background writes wait in memory until there is room (nothing is dropped)', { what, err: this.firstErr });
      this.o.report?.({ waiting: true, what, err: this.firstErr });
    } else if (!this.inEpisode.includes(what)) {
      // Another writer waits in the episode: no line of its own, but it is named.
      this.inEpisode.push(what);
      this.o.report?.({ waiting: true, what: this.inEpisode.join(', '), err: this.firstErr });
    }
    return true;
  }

  /** A write succeeded: the episode, if one is on, is over. */
  wrote(): void {
    if (this.inEpisode.length === 0) return;
    this.o.log.info('DATA_DIR has room again: the postponed background writes are done', { first: this.inEpisode[0], postponedSinceStart: this.postponedWrites });
    this.inEpisode = [];
    this.o.report?.({ waiting: false });
  }
}
