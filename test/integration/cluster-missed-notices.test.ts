// A node that missed tenancy notices (core NATS delivers at most once: its link cut, or the notice
// lost while it stayed connected) must not go on with stale keys, limits or seats: its next mirror
// pass, every second, drops what the missed notice would have (tenancyMirror.ts `changed`). Before,
// such a node accepted a revoked or replaced key for as long as its auth cache held it, kept a key's
// old limits while its buckets lived, and kept a removed seat's sockets open. Two gateways in cluster
// mode on real nats-server and PostgreSQL; node B reaches nats-server and PostgreSQL through TCP
// proxies the test cuts, and the account runs on A. The other way round, a node that gets the notice
// but cannot reach PostgreSQL for its pass marks the keys revoked in its SQLite: before, dropping them
// from its cache read them back live from there.
import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { DEFAULT_CUSTOMER } from '../../src/auth/bootstrap.js';
import { generateKey, hashSecret } from '../../src/auth/keys.js';
import type { ClusterTenancy } from '../../src/cluster/clusterTenancy.js';
import { targetOwners } from '../../src/cluster/rendezvous.js';
import { ownerConnected, seedBoundAccount, startClusterGateways, useClusterEngines } from '../helpers/cluster.js';
import { stopClusterFile } from '../helpers/clusterTeardown.js';
import { TEST_MANAGEMENT_KEY, type TestGateway } from '../helpers/gateway.js';
import { openStream, type StreamClient } from '../helpers/stream-helpers.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcpProxy.js';
import { until } from '../helpers/until.js';

const NODES = ['missed-a', 'missed-b'] as const;
const secretKey = randomBytes(32);
const customer = randomUUID();
const account = randomUUID();
const ownerId = targetOwners(NODES, [account], new Map()).get(account)!;
const bId = NODES.find((n) => n !== ownerId)!;
/** Keys of the operator's customer (the test management key's), in PostgreSQL before the nodes start. */
const keys = { stream: generateKey('api'), revoked: generateKey('api'), limited: generateKey('api'), replaced: generateKey('api'), scoped: generateKey('api'), cutOff: generateKey('api') };
const mk = { authorization: `Bearer ${TEST_MANAGEMENT_KEY}` };
/** Well past the bound (a pass every second): a broken case fails instead of hanging. */
const BOUND_LIMIT_MS = 10_000;

const engines = useClusterEngines();
let proxy: TcpProxy;
let pgProxy: TcpProxy;
let nodes: TestGateway[] = [];
let a: TestGateway;
let b: TestGateway;
const sockets: StreamClient[] = [];

beforeAll(async () => {
  await seedBoundAccount(engines.tenancy, { apiKey: keys.stream, account, login: 'missed-notices', secretKey, customer: { id: customer, name: DEFAULT_CUSTOMER } });
  const now = Date.now();
  for (const [label, k] of Object.entries(keys)) {
    if (k === keys.stream) continue;
    const scoped = k === keys.scoped;
    await engines.tenancy.insertKey({ id: k.id, customer_id: customer, kind: 'api', hash: hashSecret(k.secret), label, read_only: 0, account_scoped: scoped ? 1 : 0, seat_id: scoped ? account : null, created_at: now });
  }
  proxy = await startTcpProxy(Number(new URL(engines.nats.url).port));
  pgProxy = await startTcpProxy(engines.postgres.port);
  const viaProxy = new URL(engines.databaseUrl);
  viaProxy.port = String(pgProxy.port);
  nodes = await startClusterGateways(engines, NODES, {
    shards: 1, leaseMs: 6_000,
    perNode: (id) => ({ secretKey: secretKey.toString('hex'), ...(id === bId ? { natsUrl: `nats://127.0.0.1:${proxy.port}`, databaseUrl: viaProxy.toString() } : {}) }),
  });
  ({ owner: a, other: b } = await ownerConnected(nodes, account, ownerId));
}, 90_000);
afterAll(async () => {
  await Promise.all(sockets.map((s) => s.close()));
  await stopClusterFile({ gateways: nodes });
  await proxy?.close();
  await pgProxy?.close();
});

const natsUp = async (g: TestGateway): Promise<boolean> => ((await (await fetch(`${g.url}/readyz`)).json()) as { cluster?: { nats: boolean } }).cluster?.nats === true;
const whoami = async (g: TestGateway, key: string): Promise<number> => (await g.req('GET', '/v1/whoami', { headers: { 'x-api-key': key } })).status;
/** Statuses of three requests in a row (a limit of 1/s answers the second 429). */
const burst = async (g: TestGateway, key: string): Promise<number[]> => [await whoami(g, key), await whoami(g, key), await whoami(g, key)];

it('B\'s NATS link cut: a key revoked and another\'s limits lowered through A; B refuses the revoked key (401) and holds the new limits (429) while its link is still down', async () => {
  // B has both keys cached (auth entries, buckets at the default limits).
  expect(await whoami(b, keys.revoked.value)).toBe(200);
  expect(await burst(b, keys.limited.value)).toEqual([200, 200, 200]);

  proxy.target(1);
  proxy.cut();
  try {
    await until(async () => !(await natsUp(b)), 'B\'s NATS connection down');
    expect((await a.req('DELETE', `/v1/keys/${keys.revoked.id}`, { headers: mk })).status).toBe(200);
    expect((await a.req('PUT', `/v1/keys/${keys.limited.id}/limits`, { headers: mk, body: { requestsPerSec: 1, ordersPerSec: null } })).status).toBe(200);

    await until(async () => (await whoami(b, keys.revoked.value)) === 401, 'B to refuse the key revoked through A', BOUND_LIMIT_MS);
    await until(async () => (await burst(b, keys.limited.value)).includes(429), 'B to hold the limits set through A', BOUND_LIMIT_MS);
    expect(await natsUp(b)).toBe(false); // caught up without a reconnect
  } finally {
    proxy.target(Number(new URL(engines.nats.url).port));
    await until(() => natsUp(b), 'B\'s NATS connection back', 30_000);
  }
}, 120_000);

it('B cut off from PostgreSQL gets the notice of a key revoked through A: it refuses the key (401) although its pass fails, and still does once PostgreSQL is back', async () => {
  expect(await whoami(b, keys.cutOff.value)).toBe(200);
  pgProxy.target(1);
  pgProxy.cut();
  try {
    expect((await a.req('DELETE', `/v1/keys/${keys.cutOff.id}`, { headers: mk })).status).toBe(200);
    await until(async () => (await whoami(b, keys.cutOff.value)) === 401, 'B to refuse the key revoked through A, its mirror pass failing', BOUND_LIMIT_MS);
  } finally {
    pgProxy.target(engines.postgres.port);
  }
  // A pass that succeeds copies PostgreSQL's row over B's mark: still refused.
  await until(async () => (await b.gw.cluster!.pg.pool.query('SELECT 1').catch(() => undefined))?.rowCount === 1, 'B to reach PostgreSQL again', 30_000);
  await b.gw.cluster!.pg.mirror.sync();
  expect(await whoami(b, keys.cutOff.value)).toBe(401);
}, 120_000);

it('B connected but its notices lost: a key replaced and the seat removed through A; B refuses the old key and the seat\'s scoped key (401) and closes the seat\'s socket', async () => {
  // Just after the cases before (B's links cut and back) B may still answer 503 for a socket of an account owned
  // elsewhere (nothing follows it yet): opened once B serves it.
  let onB: StreamClient | undefined;
  await until(async () => {
    const r = await openStream(b.url, { apiKey: keys.stream.value, id: account, heartbeat: '0' });
    if ('refused' in r && r.status !== 503) throw new Error(`stream refused: ${r.status} ${JSON.stringify(r.body)}`);
    if ('refused' in r) return false;
    sockets.push((onB = r));
    return true;
  }, 'a socket of the account on B');
  expect(await whoami(b, keys.replaced.value)).toBe(200);
  expect(await whoami(b, keys.scoped.value)).toBe(200);
  // What B would miss were the notices lost on their way: it hears none of them from here.
  (b.gw.cluster!.tenancy as ClusterTenancy).close();

  const replaced = await a.req('POST', `/v1/keys/${keys.replaced.id}/replace`, { headers: mk, body: {} });
  expect(replaced.status).toBe(201);
  const removed = await a.req('DELETE', `/v1/seats/${account}`, { headers: mk });
  expect({ status: removed.status, revoked: removed.body.revokedKeys }).toEqual({ status: 200, revoked: [keys.scoped.id] });

  await until(async () => (await whoami(b, keys.replaced.value)) === 401, 'B to refuse the key replaced through A', BOUND_LIMIT_MS);
  await until(async () => (await whoami(b, keys.scoped.value)) === 401, 'B to refuse the removed seat\'s key', BOUND_LIMIT_MS);
  expect(await whoami(b, replaced.body.key as string)).toBe(200);
  await until(() => onB!.closed !== null, 'B to close the removed seat\'s socket', BOUND_LIMIT_MS);
  expect(await natsUp(b)).toBe(true);
}, 120_000);

