// Issue 20's routing scenario with three gateway processes in cluster mode, a simulator process,
// real nats-server and PostgreSQL: an order through a node that does not own the account is
// executed once at the broker (by the owner) and answered as if local.
import { describe, expect, it } from 'vitest';
import { useCluster } from '../helpers/clusterProcs.js';
import { orderVia, type Answer } from '../helpers/clusterTraffic.js';
import { assertLedger } from '../helpers/orderLedger.js';

const env = useCluster();

describe('three nodes: routing', () => {
  it('an order through a node that does not own the account: 200 from that node, once at the broker; its retry on the third node replays it', async () => {
    const acct = await env.cluster.account();
    const { owner, others } = await env.cluster.roles(acct.id);
    expect(others).toHaveLength(2);
    const [b, c] = others.map((id) => env.cluster.node(id));
    const log: Answer[] = [];
    const first = await orderVia(b!, acct, 'route-1');
    log.push(first);
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    expect(first.answeredBy).toBe(b!.id); // x-tagw-node: the node reached, not the owner
    expect(first.replay).toBe(false);
    expect(first.ticket).toBeGreaterThan(0);
    const again = await orderVia(c!, acct, 'route-1');
    log.push(again);
    expect(again).toMatchObject({ status: 200, ticket: first.ticket, replay: true, answeredBy: c!.id });
    // The owner itself answers the same order the same way.
    const onOwner = await orderVia(env.cluster.node(owner), acct, 'route-1');
    log.push(onOwner);
    expect(onOwner).toMatchObject({ status: 200, ticket: first.ticket, replay: true, answeredBy: owner });
    const broker = await env.cluster.brokerOrders(acct.login);
    expect(broker).toStrictEqual([{ ticket: first.ticket, clientOrderId: 'route-1' }]);
    assertLedger(log, broker);
  }, 60_000);
});
