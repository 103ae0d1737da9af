// One run at a time per key, and a run asked for while one is out starts when it ends (every caller
// meanwhile shares that next run). A run reads its state when it starts, so the last run of a key
// always saw the newest state: copies to another store (PostgreSQL, a mirror) land newest last,
// whatever order concurrent statements would otherwise commit in.
export class LatestRuns<T> {
  private readonly running = new Map<string, Promise<T>>();
  private readonly queued = new Map<string, Promise<T>>();

  constructor(private readonly run: (key: string) => Promise<T>) {}

  /** The next run of `key` that starts after this call: the one starting now, or the queued one. */
  request(key: string): Promise<T> {
    const queued = this.queued.get(key);
    if (queued) return queued;
    const running = this.running.get(key);
    if (!running) return this.start(key);
    const next = running.catch(() => undefined).then(() => {
      this.queued.delete(key);
      return this.start(key);
    });
    this.queued.set(key, next);
    return next;
  }

  /** Once every run started or queued by now has ended (failed ones too). */
  async settled(): Promise<void> {
    while (this.running.size + this.queued.size > 0) {
      await Promise.allSettled([...this.running.values(), ...this.queued.values()]);
    }
  }

  private start(key: string): Promise<T> {
    const p: Promise<T> = this.run(key).finally(() => {
      if (this.running.get(key) === p) this.running.delete(key);
    });
    this.running.set(key, p);
    return p;
  }
}
