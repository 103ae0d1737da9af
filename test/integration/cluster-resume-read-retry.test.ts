// A resume whose read of the shared history JetStream does not answer in time (its 5 s request
// timeout, inside the 10 s bound: nats-server frozen or restarting) reads again instead of answering
// recovered:false: no answer says nothing about the client's position (docs/stream.md "Resuming").
// Before, the client was told to resync and its snapshot came late, after the owner had numbered
// TRADEs that never reached it (`npm run chaos`, seed 1579256419 schedule 33: two accepted orders'
// TRADEs missing after a resume read timed out and nats-server froze again). Two gateways on a real
// nats-server and PostgreSQL, a simulator process; the resuming node reaches nats-server through a
// proxy that holds its first direct get (the replay's head read) past the request timeout.
import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { generateKey } from '../../src/auth/keys.js';
import { runPgMigrations } from '../../src/cluster/pgMigrations.js';
import { openPgPool, type PgPool } from '../../src/cluster/pgPool.js';
import { PgTenancy } from '../../src/cluster/pgTenancy.js';
import { targetOwners } from '../../src/cluster/rendezvous.js';
import { seedBoundAccount } from '../helpers/cluster.js';
import { stopClusterFile } from '../helpers/clusterTeardown.js';
import { createDatabase, startNats, type Engine } from '../helpers/engines.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { sharedPostgres } from '../helpers/postgres.js';
import { startBridgeSim, type BridgeSim } from '../helpers/sim-helpers.js';
import { mustOpen } from '../helpers/stream-helpers.js';
import { streamMatcher, startTcpProxy, type TcpProxy } from '../helpers/tcpProxy.js';
import { orderSend } from '../helpers/trading.js';
import { until } from '../helpers/until.js';

const NODES = ['retry-a', 'retry-b'] as const;
const secretKey = randomBytes(32);
const apiKey = generateKey('api');
const account = randomUUID();
/** Node A: the account's owner as the lease plan places it over the two nodes; node B resumes it
 *  from the shared history. */
const ownerId = targetOwners(NODES, [account], new Map()).get(account)!;
const otherId = NODES.find((n) => n !== ownerId)!;
const ACCOUNT = new Set(['POSITIONS', 'ORDERS', 'TRADE']);
/** JetStream's request timeout (jsHistory: 5 s) and some: the held read has timed out when it passes. */
const HOLD_MS = 6_500;

let nats: Engine;
let proxy: TcpProxy;
let sim: BridgeSim;
let pool: PgPool;
let A: TestGateway;
let B: TestGateway;

beforeAll(async () => {
  let databaseUrl: string;
  [nats, sim, databaseUrl] = await Promise.all([startNats(), startBridgeSim(), sharedPostgres().then((pg) => createDatabase(pg.url))]);
  proxy = await startTcpProxy(Number(new URL(nats.url).port));
  pool = openPgPool(databaseUrl);
  await runPgMigrations(pool, databaseUrl);
  await seedBoundAccount(new PgTenancy(pool), { apiKey, account, login: 'retry-login', secretKey });
  const settings = { brokerMode: 'bridge' as const, bridgeUrl: sim.url, shards: 1, secretKey: secretKey.toString('hex'), databaseUrl, clusterLeaseMs: 6_000 };
  A = await startTestGateway({ ...settings, natsUrl: nats.url, nodeId: ownerId });
  B = await startTestGateway({ ...settings, natsUrl: `nats://127.0.0.1:${proxy.port}`, nodeId: otherId });
}, 90_000);
afterAll(async () => {
  await stopClusterFile({ gateways: [A, B].filter(Boolean), pool, sim, nats: { stop: async () => { await proxy?.close(); await nats?.stop(); } } });
});

it('a resume whose shared-history read JetStream did not answer in time reads again and recovers exactly what was missed', async () => {
  const q = { apiKey: apiKey.value, id: account };
  await until(() => A.gw.cluster!.owned().includes(account), 'node A to own the account', 30_000);
  await until(async () => (await A.gw.services.shards.call(account, 'account.status', { accountId: account })).phase === 'connected', 'the owner to connect the account');
  // The client's position on the owner, then an order it misses (stored: its TRADE reached a socket).
  const watcher = await mustOpen(A.url, q);
  await watcher.next('ORDERS', 0, 20_000);
  const at = watcher.frames.filter((f) => ACCOUNT.has(f.type)).at(-1)!;
  expect((await orderSend(A.url, apiKey.value, account, 'retry-missed')).status).toBe(200);
  await watcher.until((c) => c.of('TRADE').length >= 1, 20_000, 'the TRADE');
  // Node B follows the account from now on: its memory begins after the client's position.
  const follower = await mustOpen(B.url, q);
  await follower.next('ORDERS', 0, 20_000);
  await follower.close();
  const missed = watcher.frames.filter((f) => ACCOUNT.has(f.type) && f.epoch === at.epoch && f.seq > at.seq);
  expect(missed.some((f) => f.type === 'TRADE')).toBe(true);

  // B's first direct get from now on (the replay's head read) and what follows it wait HOLD_MS.
  const seen = streamMatcher();
  let held = 0;
  proxy.watch((dir, chunk, conn) => {
    if (held > 0 || dir !== 'up' || !seen(dir, conn, chunk, ['$JS.API.DIRECT.GET'])) return undefined;
    held++;
    return { delayMs: HOLD_MS };
  });
  const resumed = await mustOpen(B.url, { ...q, since: `${at.epoch}:${at.seq}` });
  await resumed.until((c) => c.frames.length > 0 || c.closed, HOLD_MS + 15_000, 'the resume answered');
  proxy.watch(undefined);
  expect(held).toBe(1);
  expect(resumed.frames[0]!.type).toBe('RESUMED');
  expect(resumed.frames[0]!.data).toMatchObject({ recovered: true, replayed: missed.length });
  await resumed.until((c) => c.frames.filter((f) => ACCOUNT.has(f.type)).length >= missed.length, 10_000, 'the missed frames');
  expect(resumed.frames.filter((f) => ACCOUNT.has(f.type)).slice(0, missed.length)).toEqual(missed);
  await Promise.all([watcher.close(), resumed.close()]);
}, 120_000);
