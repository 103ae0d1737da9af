// Issue 20: "while an account has no owner (takeover) the request waits up to a bound", also when the
// request reaches the owner as it hands the account over. Two cluster-mode gateways (real nats-server,
// PostgreSQL, a bridged simulator): the owner is stopped (SIGTERM's close: it hands its accounts
// over, waiting first for an order it has at a slow broker), and an order forwarded to it meanwhile
// is refused there before anything ran. That refusal used to come back to the client as a 503 at
// once; now the forwarding node waits for the next owner (itself) and the order is placed there. The
// owner wait is 20 s, far past the handover, so an answer that waited it out would be a 503 too.
import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateKey } from '../../src/auth/keys.js';
import { seedBoundAccount, useClusterEngines } from '../helpers/cluster.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { orderSend } from '../helpers/trading.js';
import { until } from '../helpers/until.js';

const OWNER_WAIT_MS = 20_000;
const engines = useClusterEngines();
const secretKey = randomBytes(32);
const apiKey = generateKey('api');
const account = randomUUID();
const nodes: TestGateway[] = [];

async function startNode(nodeId: string): Promise<TestGateway> {
  const gw = await startTestGateway({
    brokerMode: 'bridge', bridgeUrl: engines.sim.url, shards: 1, secretKey: secretKey.toString('hex'),
    natsUrl: engines.nats.url, databaseUrl: engines.databaseUrl, nodeId, clusterLeaseMs: 6_000, clusterOwnerWaitMs: OWNER_WAIT_MS,
    // An order that meets the new owner's login still under way waits for it, as on one node.
    brokerWaitMs: 15_000,
  });
  nodes.push(gw);
  return gw;
}

/** One /OrderSend through `gw`, with the node that answered it. */
async function orderVia(gw: TestGateway, clientOrderId: string): Promise<{ status: number; node: string | null; body: unknown }> {
  const r = await fetch(`${gw.url}/OrderSend?id=${account}&symbol=BTCUSD&operation=Buy&volume=0.01&clientOrderId=${clientOrderId}`, { headers: { 'x-api-key': apiKey.value } });
  return { status: r.status, node: r.headers.get('x-tagw-node'), body: await r.json() };
}

beforeAll(async () => {
  await seedBoundAccount(engines.tenancy, { apiKey, account, login: 'handover', secretKey });
}, 60_000);
afterAll(async () => {
  for (const n of nodes) await n.stop().catch(() => undefined);
});

describe('a request that reaches an owner handing its account over', () => {
  it('waits for the next owner and is placed there, not refused with a 503', async () => {
    const a = await startNode('handover-a');
    const b = await startNode('handover-b');
    await until(() => [a, b].some((n) => n.gw.cluster!.owned().includes(account)), 'a node to take the account\'s lease');
    const [owner, other] = a.gw.cluster!.owned().includes(account) ? [a, b] : [b, a];
    await until(async () => (await owner.gw.services.shards.call(account, 'account.status', { accountId: account })).phase === 'connected', 'the owner to connect the account');
    const { epoch } = (await engines.pool.query<{ epoch: string }>('SELECT epoch FROM account_leases WHERE account_id = $1', [account])).rows[0]!;

    // A slow broker: the first order is still out when the handover starts, which waits for it.
    const slow = engines.sim.sim.faults.set({ server: 'Sim-P5-Demo', login: 'handover', kind: 'latency', latencyMs: 3_000 });
    try {
      let firstAnswered = false;
      const first = orderSend(other.url, apiKey.value, account, 'handover-1').finally(() => (firstAnswered = true));
      await until(async () => (await engines.pool.query("SELECT 1 FROM idempotency WHERE account_id = $1 AND client_order_id = 'handover-1'", [account])).rowCount === 1, 'the owner to claim the first order');
      const stopping = owner.stop();
      nodes.splice(nodes.indexOf(owner), 1);
      await until(() => !owner.gw.cluster!.owns(account), 'the owner to start handing the account over');
      // The handover is still waiting for the first order, so the account is not released yet: the
      // other node's cache still names the owner, and the second order is forwarded there.
      const second = orderVia(other, 'handover-2');
      const sentDuringHandover = !firstAnswered;
      // The first order keeps the latency it met at the broker (the handover still waits for it);
      // the next owner's login and the second order need not wait 3 s a request as well.
      engines.sim.sim.faults.clear(slow.id);
      expect(await first).toMatchObject({ status: 200, replay: false });
      const placed = await second;
      expect(sentDuringHandover).toBe(true);
      // Before: 503 "this node no longer holds account ... (it is being taken over)", at once.
      expect(placed, JSON.stringify(placed.body)).toMatchObject({ status: 200, node: other.gw.cluster!.nodeId });
      await stopping;
      // Placed by the new owner, under its lease: claimed at a later epoch, once at the broker.
      const claim = await engines.pool.query<{ epoch: string; state: string }>("SELECT epoch, state FROM idempotency WHERE account_id = $1 AND client_order_id = 'handover-2'", [account]);
      expect(claim.rows).toHaveLength(1);
      expect(Number(claim.rows[0]!.epoch)).toBeGreaterThan(Number(epoch));
      expect(claim.rows[0]!.state).toBe('result');
      const again = await orderSend(other.url, apiKey.value, account, 'handover-2');
      expect(again).toMatchObject({ status: 200, replay: true, ticket: (placed.body as { ticket: number }).ticket });
      // The first order was answered by the old owner before it let go: a retry replays it.
      expect(await orderSend(other.url, apiKey.value, account, 'handover-1')).toMatchObject({ status: 200, replay: true });
    } finally {
      engines.sim.sim.faults.clear(slow.id);
    }
  }, 90_000);
});
