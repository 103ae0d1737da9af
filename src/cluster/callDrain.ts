// The owner's calls in progress, per account, so a handover can wait for them: the shard's release
// stops an account's records at once, and an order still at the broker then ends without its
// answer (503, retry with the same id: the next owner asks the broker, fencedShards.ts). Counted in front of the
// owner's whole side (fencing, claims, shards), so a call that passed the lease check before the
// handover began is waited for too; the handover itself refuses new ones (leaseOf answers no).
import type { ArgsOf, CommandName, ResultOf } from '../runtime/protocol.js';
import type { CallOptions } from '../runtime/shardSet.js';
import type { LocalShards } from './router.js';

export class CallDrain implements LocalShards {
  private readonly running = new Map<string, number>();
  private readonly idle = new Map<string, Array<() => void>>();

  constructor(private readonly inner: LocalShards) {}

  async call<C extends CommandName>(key: string, op: C, args: ArgsOf<C>, opts?: CallOptions): Promise<ResultOf<C>> {
    this.running.set(key, (this.running.get(key) ?? 0) + 1);
    try {
      return await this.inner.call(key, op, args, opts);
    } finally {
      const left = this.running.get(key)! - 1;
      if (left > 0) this.running.set(key, left);
      else {
        this.running.delete(key);
        for (const w of this.idle.get(key) ?? []) w();
        this.idle.delete(key);
      }
    }
  }

  /** Resolves once none of these accounts has a call in progress, or after `limitMs`. */
  async drain(keys: readonly string[], limitMs: number): Promise<void> {
    const busy = keys.filter((k) => this.running.has(k));
    if (busy.length === 0) return;
    let timer: NodeJS.Timeout | undefined;
    const bound = new Promise<void>((resolve) => (timer = setTimeout(resolve, limitMs)));
    const idle = Promise.all(busy.map((k) => new Promise<void>((resolve) => this.idle.set(k, [...(this.idle.get(k) ?? []), resolve]))));
    await Promise.race([idle, bound]);
    clearTimeout(timer);
  }
}
