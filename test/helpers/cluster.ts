// Cluster pieces for tests: a node's NATS link, owner cache and router over a real nats-server,
// and an in-memory lease table standing in for PostgreSQL's account_leases (the truth the caches
// look up on a miss; every change is announced by the node that makes it, as leases do).
import { NatsLink } from '../../src/cluster/natsLink.js';
import { OwnerCache, type OwnerInfo } from '../../src/cluster/owners.js';
import { AccountRouter, type LocalShards } from '../../src/cluster/router.js';
import { StreamRelay } from '../../src/cluster/streamRelay.js';
import { createLogger } from '../../src/log.js';
import type { ShardEvent } from '../../src/runtime/protocol.js';

export class MemoryLeases {
  private readonly rows = new Map<string, OwnerInfo>();
  lookups = 0;

  lookup = async (accountId: string): Promise<OwnerInfo> => {
    this.lookups++;
    return this.rows.get(accountId) ?? { owner: null, epoch: 0 };
  };

  /** A change of owner (null: released or expired), announced through `by`'s cache. */
  set(accountId: string, owner: string | null, by?: OwnerCache): OwnerInfo {
    const prev = this.rows.get(accountId);
    const info = { owner, epoch: owner === null ? (prev?.epoch ?? 0) : (prev?.epoch ?? 0) + 1 };
    this.rows.set(accountId, info);
    by?.announce(accountId, info);
    return info;
  }
}

export interface TestNode {
  id: string;
  link: NatsLink;
  owners: OwnerCache;
  router: AccountRouter;
  relay: StreamRelay;
  events: ShardEvent[];
  close(): Promise<void>;
}

export async function startNode(id: string, natsUrl: string, shards: LocalShards, leases: MemoryLeases, opts: { ownerWaitMs?: number; recheckMs?: number } = {}): Promise<TestNode> {
  const log = createLogger('silent');
  const link = await NatsLink.connect({ url: natsUrl, name: id, log, reconnectWaitMs: 50 });
  const owners = new OwnerCache({ link, lookup: leases.lookup, log });
  const router = new AccountRouter({ nodeId: id, link, shards, owners, log, ownerWaitMs: opts.ownerWaitMs ?? 2_000, recheckMs: opts.recheckMs ?? 50 });
  router.serve();
  const events: ShardEvent[] = [];
  const relay = new StreamRelay({ link, log, onEvent: (ev) => events.push(ev) });
  await link.nc.flush();
  return {
    id, link, owners, router, relay, events,
    async close() {
      relay.close();
      router.close();
      owners.close();
      await link.close();
    },
  };
}
