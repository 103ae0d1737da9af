// A resume the cluster cannot answer in time is told so, never left silent (docs/stream.md
// "Resuming", docs/cluster.md's failure table): NATS_STREAM_REPLICAS=1 on a real 3-server NATS
// cluster, two gateways, and the one nats-server that holds the history (TAGW_HISTORY) SIGKILLed.
// A client resuming on the gateway that does not own the account, which cannot serve the position
// from its memory, waits on the lost server: for the account's role (the account never seen there)
// or for the history's read (its role taken before the kill), by `since=` or by a since=message
// socket's first message. Past STREAM_SNAPSHOT_STORE_WAIT_MS
// its first and only frame is ERROR SERVICE_UNAVAILABLE and the socket closes with 4010: the client
// keeps its position and reconnects with it. Before, that socket got nothing for ~28 s (five tries
// of the role, each a JetStream request's 5 s timeout), then RESUMED recovered:false.
import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { generateKey } from '../../src/auth/keys.js';
import { SecretBox } from '../../src/crypto/secretBox.js';
import { HISTORY_STREAM } from '../../src/cluster/jsHistory.js';
import { runPgMigrations } from '../../src/cluster/pgMigrations.js';
import { openPgPool, type PgPool } from '../../src/cluster/pgPool.js';
import { PgTenancy } from '../../src/cluster/pgTenancy.js';
import { targetOwners } from '../../src/cluster/rendezvous.js';
import { seedBoundAccount } from '../helpers/cluster.js';
import { stopClusterFile } from '../helpers/clusterTeardown.js';
import { createDatabase } from '../helpers/engines.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { startNatsCluster, type NatsCluster } from '../helpers/natsCluster.js';
import { sharedPostgres } from '../helpers/postgres.js';
import { startBridgeSim, type BridgeSim } from '../helpers/sim-helpers.js';
import { mustOpen, type Frame, type StreamClient } from '../helpers/stream-helpers.js';
import { orderSend } from '../helpers/trading.js';
import { until } from '../helpers/until.js';

const NODES = ['bound-a', 'bound-b'] as const;
/** The bound under test, short: the resumes end in seconds (default 10 s). */
const WAIT_MS = 2_000;
const secretKey = randomBytes(32);
const apiKey = generateKey('api');
/** `unseen`: the resuming node never had it (its role is taken at the resume); `followed`: the
 *  resuming node follows it from before the kill (its memory starts after the client's position). */
const accounts = { unseen: randomUUID(), followed: randomUUID() };
const owners = targetOwners(NODES, Object.values(accounts), new Map());

let nats: NatsCluster;
let sim: BridgeSim;
let pool: PgPool;
const nodes = new Map<string, TestGateway>();

beforeAll(async () => {
  let databaseUrl: string;
  [nats, sim, databaseUrl] = await Promise.all([startNatsCluster(3), startBridgeSim(), sharedPostgres().then((pg) => createDatabase(pg.url))]);
  pool = openPgPool(databaseUrl);
  await runPgMigrations(pool, databaseUrl);
  const tenancy = new PgTenancy(pool);
  await seedBoundAccount(tenancy, { apiKey, account: accounts.unseen, login: 'bound-unseen', secretKey });
  // The second seat of the same customer and key.
  const now = Date.now();
  await tenancy.insertSeat({ id: accounts.followed, customer_id: 'c1', private_hosting: 0, region: null, created_at: now });
  await tenancy.upsertSeatState({ seat_id: accounts.followed, status: 'ACTIVE', ready_at: now, updated_at: now });
  await tenancy.upsertBinding({
    seat_id: accounts.followed, customer_id: 'c1', platform: 'P5', server: 'Sim-P5-Demo', login: 'bound-followed',
    password_enc: new SecretBox(secretKey).seal('pw', accounts.followed), build: null, created_at: now, updated_at: now,
  });
  for (const nodeId of NODES) {
    nodes.set(nodeId, await startTestGateway({
      brokerMode: 'bridge', bridgeUrl: sim.url, shards: 1, secretKey: secretKey.toString('hex'),
      natsUrl: nats.url, databaseUrl, nodeId, clusterLeaseMs: 6_000, natsStreamReplicas: 1,
      streamSnapshotStoreWaitMs: WAIT_MS,
      // A heartbeat every 50 ms: one would come before the answer if the hub sent it.
      streamHeartbeatMs: 50,
    }));
  }
}, 90_000);
afterAll(async () => {
  await stopClusterFile({ gateways: nodes.values(), pool, sim, nats });
});

const ACCOUNT = new Set(['POSITIONS', 'ORDERS', 'TRADE']);
const owner = (account: string): TestGateway => nodes.get(owners.get(account)!)!;
const other = (account: string): TestGateway => nodes.get(NODES.find((n) => n !== owners.get(account))!)!;
const q = (account: string) => ({ apiKey: apiKey.value, id: account });

/** The account's position on a socket of its owner, after an order's frames were stored (the TRADE
 *  reached a socket: JetStream acknowledged it), so the resuming node's memory never reaches back to it. */
async function positionWithMissed(account: string): Promise<{ at: Frame; watcher: StreamClient }> {
  const gw = owner(account);
  await until(() => gw.gw.cluster!.owned().includes(account), `${owners.get(account)} to own ${account}`, 30_000);
  await until(async () => (await gw.gw.services.shards.call(account, 'account.status', { accountId: account })).phase === 'connected', 'the owner to connect the account');
  const watcher = await mustOpen(gw.url, q(account));
  await watcher.next('ORDERS', 0, 20_000);
  const at = watcher.frames.filter((f) => ACCOUNT.has(f.type)).at(-1)!;
  expect((await orderSend(gw.url, apiKey.value, account, `missed-${account.slice(0, 4)}`)).status).toBe(200);
  await watcher.until((c) => c.of('TRADE').length >= 1, 20_000, 'the TRADE');
  return { at, watcher };
}

describe('NATS_STREAM_REPLICAS=1, the history\'s nats-server SIGKILLed', () => {
  it('a resume on the node that does not own the account, waiting for its role or for the history\'s read, gets ERROR SERVICE_UNAVAILABLE then 4010 within the bound, and no other frame', async () => {
    await until(() => [...nodes.values()].every((n) => n.gw.cluster!.liveNodes().length === 2), 'both nodes live', 30_000);
    const unseen = await positionWithMissed(accounts.unseen);
    const followed = await positionWithMissed(accounts.followed);
    // The resuming node follows `followed` from here: its memory begins after the client's position.
    const follower = await mustOpen(other(accounts.followed).url, q(accounts.followed));
    await follower.next('ORDERS', 0, 20_000);
    await follower.close();

    const nc = await connect({ servers: nats.url.split(',') });
    const info = await (await jetstreamManager(nc)).streams.info(HISTORY_STREAM);
    await nc.close();
    expect(info.config.num_replicas).toBe(1);
    const doomed = info.cluster!.leader!;
    await nats.server(doomed).kill();
    const serverOf = (gw: TestGateway) => gw.gw.cluster!.natsConnection.info?.server_name;
    await until(() => [...nodes.values()].every((n) => serverOf(n) !== doomed && n.gw.cluster!.readiness().nats), 'both gateways on a live nats-server', 20_000);

    const t0 = Date.now();
    const resumes = await Promise.all([unseen, followed].map(({ at }, i) =>
      mustOpen(other(Object.values(accounts)[i]!).url, { ...q(Object.values(accounts)[i]!), since: `${at.epoch}:${at.seq}` })));
    // The same resume as a first message (since=message), sent at once while the role is being taken
    // (no heartbeats: a held socket gets them before its message).
    const byMessage = await mustOpen(other(accounts.unseen).url, { ...q(accounts.unseen), since: 'message', heartbeat: '0' });
    byMessage.send({ action: 'resume', since: `${unseen.at.epoch}:${unseen.at.seq}` });
    for (const [i, r] of [...resumes, byMessage].entries()) {
      const which = Object.keys(accounts)[i] ?? 'unseen, since=message';
      await r.until((c) => c.closed, WAIT_MS + 4_000, `${which}: the resume answered and closed`);
      expect(r.frames.map((f) => f.type), which).toEqual(['ERROR']);
      expect(r.frames[0]!.data, which).toMatchObject({ error: 'SERVICE_UNAVAILABLE' });
      expect(r.closed!.code, which).toBe(4010);
    }
    expect(Date.now() - t0).toBeGreaterThanOrEqual(WAIT_MS - 100); // told by the bound, not by a failure

    // The client's position was good all along: with the server back, a resume with the same since
    // on the same node recovers exactly what it missed (the answer while it waits is ERROR and 4010 again).
    await nats.server(doomed).restart();
    const since = `${followed.at.epoch}:${followed.at.seq}`;
    const missed = followed.watcher.frames.filter((f) => ACCOUNT.has(f.type) && f.epoch === followed.at.epoch && f.seq > followed.at.seq);
    let again: StreamClient | undefined;
    await until(async () => {
      await again?.close();
      again = await mustOpen(other(accounts.followed).url, { ...q(accounts.followed), since });
      const first = await again.until((c) => c.frames[0] ?? (c.closed ? { type: 'CLOSED', data: null } as Frame : undefined), WAIT_MS + 4_000, 'an answer');
      if (first.type === 'RESUMED') return true;
      expect(first.type).toBe('ERROR'); // still not read in time: told so again
      return false;
    }, 'a resume with the same since answered once the server is back', 30_000);
    expect(again!.frames[0]!.data).toMatchObject({ recovered: true, replayed: missed.length });
    await again!.until((c) => c.frames.filter((f) => ACCOUNT.has(f.type)).length >= missed.length, 10_000, 'the missed frames');
    expect(again!.frames.filter((f) => ACCOUNT.has(f.type)).slice(0, missed.length)).toEqual(missed);
    await Promise.all([unseen.watcher, followed.watcher, again!].map((w) => w.close()));
  }, 120_000);
});
