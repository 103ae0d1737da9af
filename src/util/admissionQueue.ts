// At most `limit` tasks at a time; the others wait, each tenant's in arrival order, the tenants
// served in turn (round robin): a tenant with a thousand waiting does not delay another's one by a
// thousand. At most `maxQueued` wait per tenant; one more of that tenant is refused at once with
// `refuse()`'s error, whatever others have waiting. limit 0: no bound (every task runs at once).
// Used to pace broker logins on one node, per customer (src/http/routes/classicBinding.ts).
export class AdmissionQueue {
  private active = 0;
  private queued = 0;
  /** Tasks refused so far (a tenant's queue full). */
  refused = 0;
  /** Each tenant's waiting tasks, in arrival order. The Map's order is the turn: a tenant served goes
   *  to the back when it has more waiting; a tenant that starts waiting joins at the back. */
  private readonly waiting = new Map<string, (() => void)[]>();

  constructor(private readonly limit: number, private readonly maxQueued: number, private readonly refuse: () => Error) {}

  /** Tasks running, and waiting for a place. */
  get state(): { active: number; queued: number } {
    return { active: this.active, queued: this.queued };
  }

  async run<T>(tenant: string, task: () => Promise<T>): Promise<T> {
    if (this.limit === 0) return task();
    if (this.active >= this.limit) {
      const mine = this.waiting.get(tenant) ?? [];
      if (mine.length >= this.maxQueued) {
        this.refused++;
        throw this.refuse();
      }
      // The place is handed over by the task that ends (active is not lowered then), so a task
      // arriving meanwhile cannot take it ahead of those waiting.
      await new Promise<void>((resolve) => {
        mine.push(resolve);
        this.waiting.set(tenant, mine);
        this.queued++;
      });
    } else {
      this.active++;
    }
    try {
      return await task();
    } finally {
      this.handOn();
    }
  }

  /** The place of a task that ended: to the first waiting task of the tenant whose turn it is. */
  private handOn(): void {
    const turn = this.waiting.entries().next();
    if (turn.done) {
      this.active--;
      return;
    }
    const [tenant, tasks] = turn.value;
    const next = tasks.shift()!;
    this.waiting.delete(tenant);
    if (tasks.length > 0) this.waiting.set(tenant, tasks);
    this.queued--;
    next();
  }
}
