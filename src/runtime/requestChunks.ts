// The requests of one message from the main thread, worked through in chunks. Under load the main
// thread sends a turn's calls in one message: with 64 orders in flight that was all of them, so the
// shard booked 64, committed once and answered 64 at once, then slept while the main thread wrote
// the answers and read the clients' next requests, and the main thread and the clients waited while
// the shard worked: the two sides took turns (the shard ~20% asleep, the machine ~25% idle, over
// `bench http`'s concurrent orders). In chunks, the first chunk's answers leave after its own
// commit while the shard books the next. Each chunk is a commit group of its own (store/commitGroup.ts):
// no answer before its record is durable, as before.
import type { CommitGroup } from '../store/commitGroup.js';

/** Requests handled in one turn, their bookings in one commit: half of bench http's 64 in flight. */
export const CHUNK_REQUESTS = 32;

export interface RequestChunks<T> {
  /** Handles `batch` in chunks, after the requests of earlier batches still waiting. */
  run(batch: readonly T[]): void;
  /** Handles every waiting request now (the shard is stopping: each is answered, as before). */
  drain(): void;
}

/** `chunk` requests a turn: the next chunk runs a turn later (setImmediate), after the commit group
 *  of this one closed (its setImmediate comes first) and its answers were posted. */
export function requestChunks<T>(group: CommitGroup, handle: (request: T) => void, chunk = CHUNK_REQUESTS): RequestChunks<T> {
  let waiting: T[] = [];
  const runChunk = (batch: readonly T[]) => {
    const n = Math.min(batch.length, chunk);
    if (n > 1) group.openForTurn();
    for (let i = 0; i < n; i++) handle(batch[i]!);
    if (n < batch.length) {
      waiting = batch.slice(n);
      setImmediate(next);
    }
  };
  const next = () => {
    const rest = waiting;
    waiting = [];
    if (rest.length > 0) runChunk(rest);
  };
  return {
    run(batch) {
      // A batch arriving while another waits goes after it: requests are handled in arrival order.
      if (waiting.length > 0) for (const r of batch) waiting.push(r);
      else runChunk(batch);
    },
    drain() {
      const rest = waiting;
      waiting = [];
      for (const r of rest) handle(r);
    },
  };
}
