// A follower node's /v1/stream socket of a fresh account (no account event yet) whose first event
// comes after the history's age (STREAM_HISTORY_MAX_AGE_MS, 2 minutes by default: everything stored
// of the account, its epoch's marker and the owner's fence, aged out of JetStream) got 4014 "account
// events may have been missed" instead of that event's TRADE (seen operating three nodes: a socket
// on node-b of an account node-a owns, an order after 130 s, closed 4014; one with an earlier event
// got its TRADE). Two cluster nodes on real nats-server and PostgreSQL, the age 2 s.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startClusterGateways, useClusterEngines } from '../helpers/cluster.js';
import { mgmt, type TestGateway } from '../helpers/gateway.js';
import { mustOpen } from '../helpers/stream-helpers.js';
import { until } from '../helpers/until.js';

const engines = useClusterEngines();
const AGE_MS = 2_000;
let nodes: TestGateway[];

beforeAll(async () => {
  nodes = await startClusterGateways(engines, ['idle-follower-a', 'idle-follower-b'], { shards: 1, leaseMs: 6_000, perNode: () => ({ streamHistoryMaxAgeMs: AGE_MS, logLevel: (process.env.IDLE_LOG as 'debug') ?? 'silent' }) });
}, 60_000);
afterAll(async () => {
  await Promise.all((nodes ?? []).map((n) => n.stop()));
});

describe('a follower socket of a fresh account, idle past the history age', { timeout: 60_000 }, () => {
  it.each(['P5', 'P4'] as const)('%s: gets the first order\'s TRADE, not 4014', async (platform) => {
    const [a] = nodes as [TestGateway, TestGateway];
    const key = (await a.req('POST', '/v1/keys', { headers: mgmt(a.managementKey), body: { label: `idle-${platform}` } })).body.key as string;
    const r = await a.req('POST', '/ConnectEx', { headers: { 'x-api-key': key }, body: { user: `idle-${platform}`, password: 'pw', server: `Sim-${platform}-Demo` } });
    expect(r.status, r.text).toBe(200);
    const id = r.body.id as string;
    await until(() => nodes.some((n) => n.gw.cluster!.owned().includes(id)), 'the account to be held');
    const follower = nodes.find((n) => !n.gw.cluster!.owned().includes(id))!;
    const c = await mustOpen(follower.url, { id, heartbeat: '0' }, { 'x-api-key': key });
    if (platform === 'P5') await c.next('ORDERS', 0, 15_000);
    await new Promise((resolve) => setTimeout(resolve, AGE_MS * 2));
    const order = await follower.req('GET', `/OrderSend?${new URLSearchParams({ id, symbol: 'BTCUSD', operation: 'Buy', volume: '0.01', clientOrderId: `idle-${platform}` })}`, { headers: { 'x-api-key': key } });
    expect(order.status, order.text).toBe(200);
    await c.next('TRADE', 0, 15_000);
    expect(c.closed).toBeNull();
    await c.close();
  });
});
