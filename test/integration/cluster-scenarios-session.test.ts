// Gateway sessions in a cluster (three gateway processes, a simulator process, real nats-server and
// PostgreSQL): an order through the classic gateway routes (/v1/connect, /v1/proxy/OrderSendSafe),
// sent to a node that does not own the account, is claimed in PostgreSQL by the owner (under an id
// it generates: those routes take none) before it reaches the broker, and executed once.
import { describe, expect, it } from 'vitest';
import { useCluster } from '../helpers/clusterProcs.js';

const env = useCluster();

describe('three nodes: gateway sessions', () => {
  it('a session order through a non-owner is claimed (fenced) in PostgreSQL under a generated id, answered, executed once', async () => {
    const acct = await env.cluster.account();
    const { owner, others } = await env.cluster.roles(acct.id);
    const b = env.cluster.node(others[0]!);
    const connect = await fetch(`${b.url}/v1/connect`, {
      method: 'POST', headers: { 'x-api-key': acct.key, 'content-type': 'application/json' }, body: JSON.stringify({ brokerAccountId: acct.id }),
    });
    const session = await connect.json() as { handle?: string };
    expect(connect.status, JSON.stringify(session)).toBe(200);
    const sent = await fetch(`${b.url}/v1/proxy/OrderSendSafe?handle=${session.handle}&symbol=BTCUSD&operation=0&volume=0.01`, { headers: { 'x-api-key': acct.key } });
    const body = await sent.text();
    expect(sent.status, body).toBe(200);

    const lease = await env.cluster.lease(acct.id);
    expect(lease.owner).toBe(owner);
    const claims = await env.cluster.claims(acct.id);
    expect(claims).toHaveLength(1);
    expect(claims[0]).toMatchObject({ state: 'result', epoch: lease.epoch });
    expect(claims[0]!.clientOrderId).toMatch(/^c-[0-9a-f-]{36}$/);
    expect(await env.cluster.brokerOrders(acct.login)).toHaveLength(1);
  }, 90_000);
});
