// A rebalance right after an owner's NATS outage keeps its sockets' account stream: the owner, its
// link down, keeps the account while a node joins (it sheds no surplus it could not hand over with
// its stream history); once the link is back it stores the frames it numbered meanwhile (their
// retries) before it releases the lease, so its own socket gets the order's TRADE once, never a
// 4014, and follows the next owner's frames after. Before: the account moved during the outage, or
// right after it with the frames unstored, and the socket was closed with 4014 (found replaying the
// stream scenario with a node relaunched just before a nats-server outage). docs/cluster.md
// "Stepping down". Three gateway processes, each reaching nats-server through a proxy of its own;
// real PostgreSQL and a simulator process.
import { beforeAll, describe, expect, it } from 'vitest';
import { useCluster, useNatsProxies, type ClusterAccount } from '../helpers/clusterProcs.js';
import { orderVia, retryingOrder } from '../helpers/clusterTraffic.js';
import { expectAccountStream, mustOpen } from '../helpers/stream-helpers.js';

/** Past JetStream's 5 s ack timeout: the owner's first store of the order's frames has failed. */
const CUT_MS = 7_000;
const proxies = useNatsProxies(['a', 'b', 'c']);
// Never stepping down within the test: only a rebalance moves the account. The lease is the
// default (CLUSTER_LEASE_MS, 10 s), not the helper's 1.5 s: the test is about an owner that keeps
// its lease through the outage, and a 1.5 s lease lapsed under load (CI, and 1 in 10 runs here at
// load 25-37: "cluster leases lost ... revoked" on the holder, the account taken by a survivor and the
// order through the holder 503; a lapse after the link was back, before the stores, closes the
// socket with 4014). A lapse moves the account as the spec says; it is not what this test checks.
const env = useCluster({ leaseMs: 10_000, env: { CLUSTER_STEP_DOWN_MS: '120000' }, nodeEnv: proxies.nodeEnv });

let acct: ClusterAccount;
beforeAll(async () => {
  acct = await env.cluster.account();
}, 90_000);

describe('a rebalance after the owner\'s NATS outage', () => {
  it('the owner keeps the account while its link is down, then stores what it numbered before handing it over: its socket gets the TRADE once and no 4014', async () => {
    // One account: it goes to one node (the rendezvous' largest share). Stopped (SIGTERM: handed
    // over, no lease to wait out), the account moves to a survivor; relaunched, that node is the
    // account's target again: a rebalance.
    const target = (await env.cluster.owner(acct.id)).owner;
    await env.cluster.term(target);
    const holder = (await env.cluster.owner(acct.id, { not: target, limitMs: 15_000 })).owner;
    const node = env.cluster.node(holder);
    const s = await mustOpen(node.url, { id: acct.id, heartbeat: '0' }, { 'x-api-key': acct.key });
    try {
      await s.until((c) => c.of('ORDERS').find((f) => f.data.snapshot === true), 15_000, 'the snapshot');
      const proxy = proxies.of(holder);
      proxy.target(1);
      proxy.cut();
      try {
        await env.cluster.launch(target);
        const sent = await orderVia(node, acct, 'cut-1');
        expect(sent.status, JSON.stringify(sent.body)).toBe(200);
        await new Promise((r) => setTimeout(r, CUT_MS));
        // Its link down: the holder kept the account (the joined node took nothing from it) and
        // sent nothing JetStream has not stored.
        expect((await env.cluster.lease(acct.id)).owner).toBe(holder);
        expect(s.of('TRADE')).toEqual([]);
      } finally {
        proxy.target(env.engines.nats.port);
      }
      await env.cluster.owner(acct.id, { not: holder, limitMs: 20_000 });
      await s.until((c) => c.closed ?? c.of('TRADE').find((f) => f.data.comment === 'cut-1'), 20_000, 'the TRADE (or a close)');
      expect(s.closed).toBeNull();
      // The socket follows the next owner's numbering with no gap.
      const after = await retryingOrder(env.cluster, acct, 'after-1', []);
      expect(after.status, JSON.stringify(after.body)).toBe(200);
      await s.until((c) => c.closed ?? c.of('TRADE').find((f) => f.data.order === after.ticket), 20_000, 'the next owner\'s TRADE');
      expect(s.closed).toBeNull();
      expect(s.of('TRADE').map((f) => f.data.comment)).toEqual(['cut-1', 'after-1']);
      expectAccountStream(s.frames);
    } finally {
      await s.close();
    }
  }, 120_000);
});
