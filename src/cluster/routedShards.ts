// Shards as the node's routes and stream hub see them in cluster mode (clusterNode.ts composes it).
import type { ArgsOf, CommandName, ResultOf } from '../runtime/protocol.js';
import type { CallOptions, Shards, ShardSet } from '../runtime/shardSet.js';
import type { AccountRouter } from './router.js';
import type { StreamFollower } from './streamFollow.js';

/** Shards as routes see them in cluster mode: an account's calls go to its owner; commands for a
 *  shard index, and seat timers (no lease: a seat is an account only once bound), stay here. */
export class RoutedShards implements Shards {
  constructor(private readonly set: ShardSet, private readonly router: AccountRouter, private readonly follower: StreamFollower) {}
  call<C extends CommandName>(key: string, op: C, args: ArgsOf<C>, opts?: CallOptions): Promise<ResultOf<C>> {
    if (op.startsWith('seat.')) return this.set.call(key, op, args, opts);
    // The stream hub's commands also start (or stop) this node's relay subscriptions for them.
    return this.follower.call(key, op, args, () => this.router.call(key, op, args, opts));
  }
  callShard<C extends CommandName>(shard: number, op: C, args: ArgsOf<C>, opts?: CallOptions): Promise<ResultOf<C>> {
    return this.set.callShard(shard, op, args, opts);
  }
  shardFor(key: string): number { return this.set.shardFor(key); }
  get size(): number { return this.set.size; }
  allReady(): boolean { return this.set.allReady(); }
  restarts(): number { return this.set.restarts(); }
  onDeath(listener: (shard: number) => void): () => void { return this.set.onDeath(listener); }
  onRestart(listener: (shard: number) => void): () => void { return this.set.onRestart(listener); }
  opensLost(key: string): void {
    this.router.opensLost(key);
    this.follower.forget(key);
  }
  queueDepths(): number[] { return this.set.queueDepths(); }
  health(): ReturnType<ShardSet['health']> { return this.set.health(); }
  kill(shard: number): Promise<void> { return this.set.kill(shard); }
  threadId(shard: number): number | undefined { return this.set.threadId(shard); }
}
