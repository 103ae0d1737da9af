// NATS_STREAM_REPLICAS on a real 3-server JetStream cluster (docs/cluster.md "Streams and resume"):
// with 3 replicas the resume history outlives the nats-server that leads its stream. Two gateways in
// cluster mode, NATS_URL naming all three servers; the account's owner numbers frames into the
// stream; the stream's leader is moved to the server the other gateway is connected to and killed
// (SIGKILL); that gateway's NATS client fails over, and a client resuming there, which never had the
// account's frames in memory, is replayed the frames it missed from the surviving replicas, at once
// (during the elections too). With 1 replica the same kill leaves such a resume waiting on the dead
// server: ERROR and 4010 past STREAM_SNAPSHOT_STORE_WAIT_MS (cluster-resume-bound.test.ts).
import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateKey } from '../../src/auth/keys.js';
import { HISTORY_STREAM, JetStreamHistory } from '../../src/cluster/jsHistory.js';
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

const NODES = ['hist-a', 'hist-b'] as const;
const secretKey = randomBytes(32);
const apiKey = generateKey('api');
const account = randomUUID();
/** The lease plan's place for the one account among the two nodes (the node with the larger share):
 *  the owner; the other node only ever resumes it. */
const ownerId = targetOwners(NODES, [account], new Map()).get(account)!;
const q = { apiKey: apiKey.value, id: account };

let nats: NatsCluster;
let sim: BridgeSim;
let pool: PgPool;
let nc: NatsConnection;
let jsm: JetStreamManager;
/** The test's own reader of the history (the gateways' limits: opening it changes nothing). */
let history: JetStreamHistory;
const nodes: TestGateway[] = [];

beforeAll(async () => {
  let databaseUrl: string;
  [nats, sim, databaseUrl] = await Promise.all([startNatsCluster(3), startBridgeSim(), sharedPostgres().then((pg) => createDatabase(pg.url))]);
  pool = openPgPool(databaseUrl);
  await runPgMigrations(pool, databaseUrl);
  await seedBoundAccount(new PgTenancy(pool), { apiKey, account, login: 'replicated', secretKey });
  nc = await connect({ servers: nats.url.split(','), reconnectTimeWait: 100 });
  jsm = await jetstreamManager(nc);
  for (const nodeId of NODES) {
    nodes.push(await startTestGateway({
      brokerMode: 'bridge', bridgeUrl: sim.url, shards: 1, secretKey: secretKey.toString('hex'),
      natsUrl: nats.url, databaseUrl, nodeId, clusterLeaseMs: 6_000, natsStreamReplicas: 3,
      // A heartbeat every 50 ms: one would come before a slow resume's RESUMED if the hub sent it.
      streamHeartbeatMs: 50,
    }));
  }
  history = await JetStreamHistory.open({ nc, limits: { maxEvents: 10_000, maxAgeMs: 120_000 }, replicas: 3 });
}, 90_000);
afterAll(async () => {
  await stopClusterFile({ gateways: nodes, nc, pool, sim, nats });
});

const ACCOUNT = new Set(['POSITIONS', 'ORDERS', 'TRADE']);
const accountFrames = (c: StreamClient): Frame[] => c.frames.filter((f) => ACCOUNT.has(f.type));
const after = (c: StreamClient, at: Frame): string[] =>
  accountFrames(c).filter((f) => f.epoch === at.epoch && f.seq > at.seq).map((f) => JSON.stringify(f));
const serverOf = (gw: TestGateway): string | undefined => gw.gw.cluster!.natsConnection.info?.server_name;

/** The stream's leader (undefined while it has none, as during an election). */
async function leader(): Promise<string | undefined> {
  return (await jsm.streams.info(HISTORY_STREAM).catch(() => undefined))?.cluster?.leader;
}

/** Moves the stream's leadership (a random other replica takes it; one move at a time) until `name` leads it. */
async function leadOn(name: string): Promise<void> {
  await until(async () => {
    const now = await leader();
    if (now === name || now === undefined) return now === name;
    await nc.request(`$JS.API.STREAM.LEADER.STEPDOWN.${HISTORY_STREAM}`, undefined, { timeout: 5_000 }).catch(() => undefined);
    await until(async () => ![undefined, now].includes(await leader()), `${now} to hand ${HISTORY_STREAM} on`, 20_000);
    return false;
  }, `${name} to lead ${HISTORY_STREAM}`, 60_000);
}

describe('NATS_STREAM_REPLICAS=3 on a 3-server NATS cluster', () => {
  it('a start with another replica count changes the stream and says so (nodes that disagree flip it at each start)', async () => {
    const warned: unknown[][] = [];
    const log = { warn: (...a: unknown[]) => void warned.push(a) };
    const limits = { maxEvents: 10_000, maxAgeMs: 120_000 };
    await JetStreamHistory.open({ nc, limits, replicas: 2, log });
    expect((await jsm.streams.info(HISTORY_STREAM)).config.num_replicas).toBe(2);
    expect(String(warned[0]?.[0])).toMatch(/NATS_STREAM_REPLICAS=2 changed the stream history from 3 replicas to 2/);
    await JetStreamHistory.open({ nc, limits, replicas: 2, log });
    expect(warned).toHaveLength(1); // the same count again: nothing to say
    await JetStreamHistory.open({ nc, limits, replicas: 3, log });
    expect((await jsm.streams.info(HISTORY_STREAM)).config.num_replicas).toBe(3);
    expect(warned).toHaveLength(2);
  }, 60_000);

  it('the stream\'s leader SIGKILLed: the gateway fails over to another server and a resume there recovers the missed frames', async () => {
    const a = nodes.find((n) => n.gw.cluster!.nodeId === ownerId)!;
    const b = nodes.find((n) => n !== a)!;
    await until(() => nodes.every((n) => n.gw.cluster!.liveNodes().length === 2) && a.gw.cluster!.owned().includes(account), `${ownerId} to own the account, both nodes live`, 30_000);
    await until(async () => (await a.gw.services.shards.call(account, 'account.status', { accountId: account })).phase === 'connected', 'the owner to connect the account');
    // The test before took the stream to 2 replicas and back to 3: the third is added and catches up
    // by itself, after the update's answer (ci33, load 9: one peer listed when read at once).
    await until(async () => {
      const info = await jsm.streams.info(HISTORY_STREAM);
      return info.config.num_replicas === 3 && info.cluster?.replicas?.length === 2 && info.cluster.replicas.every((r) => r.current);
    }, 'the stream\'s 3 replicas, each current', 30_000);

    // A client on the owner: its position after the snapshot, then frames it misses, stored by the
    // owner before they reach any socket (the watcher's TRADEs mean JetStream acknowledged them).
    const watcher = await mustOpen(a.url, q);
    await watcher.next('ORDERS', 0, 20_000);
    const at = accountFrames(watcher).at(-1)!;
    for (let i = 0; i < 2; i++) expect((await orderSend(a.url, apiKey.value, account, `missed-${i}`)).status).toBe(200);
    await watcher.until((c) => c.of('TRADE').length >= 2 && accountFrames(c).at(-1)!.type === 'POSITIONS', 20_000, 'the two TRADEs and their POSITIONS');
    const missed = after(watcher, at);

    // The server hist-b is connected to leads the stream; it dies.
    const doomed = serverOf(b)!;
    await leadOn(doomed);
    expect(await leader()).toBe(doomed);
    await nats.server(doomed).kill();
    await until(() => serverOf(b) !== doomed && b.gw.cluster!.readiness().nats, 'hist-b to fail over to another nats-server', 20_000);
    // No wait for the elections (seconds): a replay's consumer is refused meanwhile, and afterwards
    // JetStream may place it on the dead server (a third of them). Those replays read by direct gets
    // instead, which any live replica answers.
    for (let i = 0; i < 3; i++) {
      const r = await history.replay(account, { epoch: at.epoch!, seq: at.seq });
      expect(r.recovered && r.entries.map((e) => JSON.stringify(JSON.parse(e.frame))), `replay ${i}`).toEqual(missed);
    }
    const resumed = await mustOpen(b.url, { ...q, since: `${at.epoch}:${at.seq}` });
    const first = await resumed.next('RESUMED', 0, 20_000);
    expect(resumed.frames[0]!.type).toBe('RESUMED');
    expect(first.data).toMatchObject({ recovered: true });
    await resumed.until((c) => after(c, at).length >= missed.length, 20_000, 'the missed frames');
    expect(after(resumed, at).slice(0, missed.length)).toEqual(missed);
    await Promise.all([watcher, resumed].map((c) => c.close()));
  }, 120_000);
});
