// Fail-stop of the simulator's store. A commit that fails (SQLITE_FULL, IOERR, BUSY past
// busy_timeout...) leaves the simulator's memory ahead of the disk: the booking it carried stays in
// the SimAccount and the store's mirror while its claim and journal row were rolled back. Writing on
// from that memory (the account's next checkpoint, a later commit) would make the failed booking
// durable without its claim, and a retry after a restart would book the order again. So, as storage
// engines do, the first failed write poisons the store: it refuses every write from then on, and the
// shard restarts from what is durable (src/runtime/shardWorker.ts, its supervisor rehydrates it).

/** The error every write of a poisoned store throws (the first failure is its cause). */
export class StorePoisonedError extends Error {
  constructor(readonly first: unknown) {
    super('simulator store refuses writes after a failed commit; the shard restarts from disk', { cause: first });
    this.name = 'StorePoisonedError';
  }
}

export class FailStop {
  private failed: StorePoisonedError | undefined;

  /** Called once, with the first failure (the shard ends on it; tests and tools log it). */
  constructor(private readonly onPoisoned: (err: unknown) => void) {}

  get poisoned(): boolean {
    return this.failed !== undefined;
  }

  /** Throws when poisoned: call before any write. */
  check(): void {
    if (this.failed) throw this.failed;
  }

  /** A write failed: refuse every later one, and report the first failure once. */
  poison(err: unknown): void {
    if (this.failed) return;
    this.failed = new StorePoisonedError(err);
    this.onPoisoned(err);
  }
}
