// Accounts this node's shards run, as the owner's side of routing sees them (router.ts LocalShards).
import type { ArgsOf, CommandName, ResultOf } from '../runtime/protocol.js';
import type { CallOptions, ShardSet } from '../runtime/shardSet.js';
import type { PgNode } from './pgNode.js';
import type { LocalShards } from './router.js';

/**
 * The node's shards as the owner's side sees them: a call for an account whose lease was just
 * acquired but whose shard has not been told yet (the tenancy mirror pass before adopting) waits
 * for the adoption, up to the owner wait, instead of finding the account not held.
 */
export class Adoptions implements LocalShards {
  private readonly ids = new Set<string>();
  private readonly waiters = new Map<string, Array<() => void>>();
  constructor(private readonly set: ShardSet, private readonly keeper: PgNode['keeper'], private readonly waitMs: number) {}

  call<C extends CommandName>(key: string, op: C, args: ArgsOf<C>, opts?: CallOptions): Promise<ResultOf<C>> {
    if (this.ids.has(key) || !this.keeper.leaseOf(key)) return this.set.call(key, op, args, opts);
    return new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, this.waitMs);
      this.waiters.set(key, [...(this.waiters.get(key) ?? []), () => { clearTimeout(timer); resolve(); }]);
    }).then(() => this.set.call(key, op, args, opts));
  }

  add(ids: string[]): void {
    for (const id of ids) {
      this.ids.add(id);
      for (const w of this.waiters.get(id) ?? []) w();
      this.waiters.delete(id);
    }
  }

  delete(ids: string[]): void {
    for (const id of ids) this.ids.delete(id);
  }

  /** The account runs on this node's shards (started, not handed over or lost since). */
  has(id: string): boolean {
    return this.ids.has(id);
  }
}
