// Group commit for the ledger's statements (idempotencyLedger.ts): one statement of a kind is out at
// a time; what is submitted meanwhile leaves together as the next one. A lone item leaves at once
// (a sequential client waits for nothing more than before); under concurrent orders each statement
// carries all that arrived during the previous one's round trip, so PostgreSQL commits them once
// and the node writes, wakes and parses once. Each item's answer is its own: a batch that fails
// for a reason `retryAlone` names (a lock it would not wait for) is run again item by item.

interface Pending<I, R> {
  item: I;
  resolve(r: R): void;
  reject(err: unknown): void;
}

export interface GroupCommitOptions<I, R> {
  /** One item: the statement as without batching. */
  one(item: I): Promise<R>;
  /** Several: one statement answering each item, in order. */
  many(items: I[]): Promise<R[]>;
  /** The batch failed for a reason of its own (not the database's being away): each item again alone. */
  retryAlone(err: unknown): boolean;
  /** At most this many items per statement (default 64). */
  max?: number;
}

export class GroupCommit<I, R> {
  private queue: Pending<I, R>[] = [];
  private out = false;
  /** Statements sent with more than one item and the items they carried, lone ones, and batches whose
   *  items ran alone after all (tests, benches). */
  readonly stats = { batches: 0, batched: 0, alone: 0, retriedAlone: 0 };

  constructor(private readonly o: GroupCommitOptions<I, R>) {}

  submit(item: I): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      if (!this.out) void this.drain();
    });
  }

  private async drain(): Promise<void> {
    this.out = true;
    while (this.queue.length > 0) {
      const batch = this.queue.splice(0, this.o.max ?? 64);
      await this.run(batch);
    }
    this.out = false;
  }

  private async run(batch: Pending<I, R>[]): Promise<void> {
    if (batch.length === 1) {
      this.stats.alone++;
      const [p] = batch;
      await this.o.one(p!.item).then(p!.resolve, p!.reject);
      return;
    }
    try {
      const out = await this.o.many(batch.map((p) => p.item));
      this.stats.batches++;
      this.stats.batched += batch.length;
      batch.forEach((p, i) => p.resolve(out[i]!));
    } catch (err) {
      if (!this.o.retryAlone(err)) {
        for (const p of batch) p.reject(err);
        return;
      }
      this.stats.retriedAlone++;
      await Promise.all(batch.map((p) => this.o.one(p.item).then(p.resolve, p.reject)));
    }
  }
}
