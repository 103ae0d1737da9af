// A node's near sources (docs/cluster.md "Streams"), the I/O around NearPlan: the follower's market
// subscriptions on the relay (StreamFollower) are mirrored here, and for each followed (server,
// symbol) an account this node runs on that server subscribes the symbol at its own broker session
// (its shard's stream.source). Both copies reach the hub, whose dedupe sends the first: the near one
// (one process hand-off) unless its session is down or gone, when the relay's copy still comes. The
// accounts running here come from the node's adoptions and releases; a shard that restarted holds no
// source any more, so its accounts' sources are sent again once it is up (ShardSet.onRestart).
import type { Logger } from '../log.js';
import type { ShardSet } from '../runtime/shardSet.js';
import { errorMessage } from '../util/errorMessage.js';
import { NearPlan, type NearCommand } from './nearPlan.js';
import type { StreamRelay } from './streamRelay.js';
import '../runtime/hosts/streamCommands.js';

export type FollowRelay = Pick<StreamRelay, 'follow' | 'unfollow' | 'followMarket' | 'unfollowMarket'>;

export interface NearSourcesOptions {
  /** This node's own shards (never the router: a source is an account running here). */
  shards: Pick<ShardSet, 'call' | 'shardFor' | 'onRestart'>;
  /** The broker server of an account (its binding), undefined when it has none. */
  serverOf: (accountId: string) => string | undefined;
  log: Logger;
}

export class NearSources {
  private readonly plan = new NearPlan();
  private readonly offRestart: () => void;

  constructor(private readonly o: NearSourcesOptions) {
    this.offRestart = o.shards.onRestart((shard) => this.run(this.plan.resend((id) => o.shards.shardFor(id) === shard)));
  }

  /** The relay as the follower uses it, with the near sources kept in step with its market subscriptions. */
  relayWith(relay: FollowRelay): FollowRelay {
    return {
      follow: (key) => relay.follow(key),
      unfollow: (key) => relay.unfollow(key),
      followMarket: (server, symbol) => {
        this.run(this.plan.want(server, symbol));
        return relay.followMarket(server, symbol);
      },
      unfollowMarket: (server, symbol) => {
        relay.unfollowMarket(server, symbol);
        this.run(this.plan.drop(server, symbol));
      },
    };
  }

  /** Accounts now running on this node's shards. */
  added(accountIds: readonly string[]): void {
    for (const id of accountIds) {
      const server = this.o.serverOf(id);
      if (server !== undefined) this.run(this.plan.added(id, server));
    }
  }

  /** Accounts that left this node (their shards dropped their sources). */
  removed(accountIds: readonly string[]): void {
    for (const id of accountIds) this.run(this.plan.removed(id));
  }

  /** Followed (server, symbol) pairs, and how many of them an account running here serves. */
  counts(): { wanted: number; served: number } {
    return this.plan.counts();
  }

  /** The account serving the (server, symbol) now (undefined: the relay alone). */
  sourceOf(server: string, symbol: string): string | undefined {
    return this.plan.sourceOf(server, symbol);
  }

  stop(): void {
    this.offRestart();
  }

  private run(cmds: NearCommand[]): void {
    for (const c of cmds) {
      if (c.op === 'source') {
        this.o.shards.call(c.accountId, 'stream.source', { accountId: c.accountId, server: c.server, symbol: c.symbol }).then((r) => {
          if (!r.ok) this.run(this.plan.refused(c.accountId, c.server, c.symbol));
        }, (err: unknown) => this.o.log.warn('near source not started', { accountId: c.accountId, symbol: c.symbol, err: errorMessage(err) }));
      } else {
        this.o.shards.call(c.accountId, 'stream.unsource', { accountId: c.accountId, symbol: c.symbol })
          .catch((err: unknown) => this.o.log.warn('near source not stopped', { accountId: c.accountId, symbol: c.symbol, err: errorMessage(err) }));
      }
    }
  }
}
