// The shards as their death and restart listeners see them (the stream hub, NearSources): calls
// recorded and answered ok, a shard's death and its new thread's start announced by the test.
// Accounts 'a…' run on shard 0, every other on shard 1.
export class FakeShards {
  readonly calls: Array<{ key: string; op: string; args: unknown }> = [];
  private readonly listeners = new Set<(shard: number) => void>();
  private readonly deathListeners = new Set<(shard: number) => void>();
  private n = 0;
  shardFor(id: string): number {
    return id.startsWith('a') ? 0 : 1;
  }
  call(key: string, op: string, args: unknown): Promise<never> {
    this.calls.push({ key, op, args });
    return Promise.resolve({ ok: true } as never);
  }
  restarts(): number {
    return this.n;
  }
  threadId(shard: number): number {
    return 100 * shard + this.n;
  }
  onRestart(listener: (shard: number) => void): () => void {
    this.listeners.add(listener);
    return () => void this.listeners.delete(listener);
  }
  onDeath(listener: (shard: number) => void): () => void {
    this.deathListeners.add(listener);
    return () => void this.deathListeners.delete(listener);
  }
  /** The shard's thread died (no new one is up yet). */
  die(shard: number): void {
    this.n++;
    for (const l of this.deathListeners) l(shard);
  }
  /** The shard's new thread is up. */
  restart(shard: number): void {
    for (const l of this.listeners) l(shard);
  }
}
