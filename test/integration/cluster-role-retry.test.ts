// A node that could not take an account's stream role (JetStream did not answer any of the tries)
// serves a local epoch meanwhile, and takes the role again a few seconds later: its sockets of the
// local epoch are told (4014) once the account's real epoch is found, and new sockets get the
// owner's epoch and frames. Before, the role was never taken again: on a node following the account,
// every later socket got a snapshot of an epoch no other node knew, then no account frame at all.
// Two gateways in cluster mode on real nats-server and PostgreSQL; the history stream (TAGW_HISTORY)
// is deleted while the follower takes its role (every try then fails at once), and made again.
import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { generateKey } from '../../src/auth/keys.js';
import { HISTORY_STREAM, JetStreamHistory } from '../../src/cluster/jsHistory.js';
import { runPgMigrations } from '../../src/cluster/pgMigrations.js';
import { openPgPool, type PgPool } from '../../src/cluster/pgPool.js';
import { PgTenancy } from '../../src/cluster/pgTenancy.js';
import { targetOwners } from '../../src/cluster/rendezvous.js';
import { ownerConnected, seedBoundAccount } from '../helpers/cluster.js';
import { stopClusterFile } from '../helpers/clusterTeardown.js';
import { createDatabase, startNats, type NatsEngine } from '../helpers/engines.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { sharedPostgres } from '../helpers/postgres.js';
import { startBridgeSim, type BridgeSim } from '../helpers/sim-helpers.js';
import { mustOpen, type Frame, type StreamClient } from '../helpers/stream-helpers.js';
import { orderSend } from '../helpers/trading.js';

const NODES = ['role-a', 'role-b'] as const;
const secretKey = randomBytes(32);
const apiKey = generateKey('api');
const account = randomUUID();
const ownerId = targetOwners(NODES, [account], new Map()).get(account)!;
const q = { apiKey: apiKey.value, id: account, heartbeat: '0' };

let nats: NatsEngine;
let sim: BridgeSim;
let pool: PgPool;
let nc: NatsConnection;
let jsm: JetStreamManager;
const nodes: TestGateway[] = [];
const sockets: StreamClient[] = [];

beforeAll(async () => {
  let databaseUrl: string;
  [nats, sim, databaseUrl] = await Promise.all([startNats(), startBridgeSim(), sharedPostgres().then((pg) => createDatabase(pg.url))]);
  pool = openPgPool(databaseUrl);
  await runPgMigrations(pool, databaseUrl);
  await seedBoundAccount(new PgTenancy(pool), { apiKey, account, login: 'role-retry', secretKey });
  nc = await connect({ servers: nats.url });
  jsm = await jetstreamManager(nc);
  for (const nodeId of NODES) {
    nodes.push(await startTestGateway({
      brokerMode: 'bridge', bridgeUrl: sim.url, shards: 1, secretKey: secretKey.toString('hex'),
      natsUrl: nats.url, databaseUrl, nodeId, clusterLeaseMs: 6_000,
      // The follower's first socket waits through every try of the role (its bound past them).
      streamSnapshotStoreWaitMs: 60_000,
    }));
  }
}, 90_000);
afterAll(async () => {
  await Promise.all(sockets.map((s) => s.close()));
  await stopClusterFile({ gateways: nodes, nc, pool, sim, nats });
});

const ACCOUNT = new Set(['POSITIONS', 'ORDERS', 'TRADE']);
const epochOf = (c: StreamClient): string | undefined => c.frames.find((f: Frame) => ACCOUNT.has(f.type))?.epoch;

async function open(g: TestGateway, waitMs = 20_000): Promise<StreamClient> {
  const c = await mustOpen(g.url, q);
  sockets.push(c);
  await c.until((x) => x.of('POSITIONS').some((f) => f.data.snapshot), waitMs, 'the snapshot');
  return c;
}

it('the follower takes the role again after every try failed: its local epoch\'s socket gets 4014, a new socket the owner\'s epoch and TRADEs', async () => {
  const { owner: a, other: b } = await ownerConnected(nodes, account, ownerId);
  const onOwner = await open(a);
  const ownerEpoch = epochOf(onOwner)!;

  // The follower's first socket while the history stream is gone: each of its tries fails at once.
  await jsm.streams.delete(HISTORY_STREAM);
  const local = await open(b, 60_000);
  expect(epochOf(local)).not.toBe(ownerEpoch); // served meanwhile, from an epoch of its own
  await JetStreamHistory.open({ nc, limits: { maxEvents: 10_000, maxAgeMs: 120_000 } });
  // The owner stores its next frames again (its epoch, without the start marker the deletion took).
  expect((await orderSend(a.url, apiKey.value, account, 'after-1')).status).toBe(200);
  await onOwner.until((c) => c.of('TRADE').length >= 1, 20_000, 'the TRADE on the owner');

  // The role taken again: the local epoch's socket is told, a new one follows the owner.
  await local.until((c) => c.closed, 20_000, 'the local epoch\'s socket closed');
  expect(local.closed!.code).toBe(4014);
  const again = await open(b);
  expect(epochOf(again)).toBe(ownerEpoch);
  expect((await orderSend(a.url, apiKey.value, account, 'after-2')).status).toBe(200);
  const trade = await again.until((c) => c.of('TRADE').at(-1), 20_000, 'a TRADE on the follower');
  expect(trade.epoch).toBe(ownerEpoch);
}, 120_000);
