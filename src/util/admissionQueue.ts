// At most `limit` tasks at a time, the others waiting in arrival order (FIFO), at most `maxQueued`
// of them; one more is refused at once with `refuse()`'s error. limit 0: no bound (every task runs
// at once). Used to pace broker logins on one node (src/http/routes/classicBinding.ts).
export class AdmissionQueue {
  private active = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(private readonly limit: number, private readonly maxQueued: number, private readonly refuse: () => Error) {}

  /** Tasks running, and waiting for a place. */
  get state(): { active: number; queued: number } {
    return { active: this.active, queued: this.waiting.length };
  }

  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.limit === 0) return task();
    if (this.active >= this.limit) {
      if (this.waiting.length >= this.maxQueued) throw this.refuse();
      // The place is handed over by the task that ends (active is not lowered then), so a task
      // arriving meanwhile cannot take it ahead of those waiting.
      await new Promise<void>((resolve) => this.waiting.push(resolve));
    } else {
      this.active++;
    }
    try {
      return await task();
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.active--;
    }
  }
}
