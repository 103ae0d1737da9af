// A fresh socket on a P4 account (no snapshot: it is live from where the account stands when it
// starts) whose node took the account's first stream role only at a later try (JetStream did not
// answer the first) is told (4014) that it may have missed account events: the role was read from
// JetStream's head at that later try, past the frames the owner numbered and stored while the
// socket waited, and none of them reached it. Before, it got the frames numbered after the head
// read and nothing else, without a word: found by `npm run chaos` (seed 356670798, schedule 12: a
// node whose NATS link was down took the role ~5 s after the socket opened, after the next owner's
// resync had numbered fifteen frames; the socket's first account frame was seq 16). docs/cluster.md
// "Streams and resume". Two gateways in cluster mode on real nats-server and PostgreSQL; the
// history stream's direct gets (the head read) are switched off while the follower's first socket
// comes, so the follower's first try of the role times out (5 s) while the owner's stores
// (publishes) go through; switched on again, its next try reads the head.
import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { generateKey } from '../../src/auth/keys.js';
import { HISTORY_STREAM } from '../../src/cluster/jsHistory.js';
import { targetOwners } from '../../src/cluster/rendezvous.js';
import { SecretBox } from '../../src/crypto/secretBox.js';
import { seedBoundAccount, startClusterGateways, useClusterEngines } from '../helpers/cluster.js';
import { stopClusterFile } from '../helpers/clusterTeardown.js';
import type { TestGateway } from '../helpers/gateway.js';
import { expectAccountStream, mustOpen, type StreamClient } from '../helpers/stream-helpers.js';
import { orderSend } from '../helpers/trading.js';
import { until } from '../helpers/until.js';

const NODES = ['fresh-a', 'fresh-b'] as const;
const secretKey = randomBytes(32);
const apiKey = generateKey('api');
const account = randomUUID();
const ownerId = targetOwners(NODES, [account], new Map()).get(account)!;
const q = { apiKey: apiKey.value, id: account, heartbeat: '0' };

const engines = useClusterEngines();
let nc: NatsConnection;
let jsm: JetStreamManager;
let nodes: TestGateway[] = [];
const sockets: StreamClient[] = [];

beforeAll(async () => {
  await seedBoundAccount(engines.tenancy, { apiKey, account, login: 'fresh-wait', secretKey });
  const now = Date.now();
  await engines.tenancy.upsertBinding({
    seat_id: account, customer_id: 'c1', platform: 'P4', server: 'Sim-P4-Demo', login: 'fresh-wait',
    password_enc: new SecretBox(secretKey).seal('pw', account), build: null, created_at: now, updated_at: now,
  });
  nc = await connect({ servers: engines.nats.url });
  jsm = await jetstreamManager(nc);
  nodes = await startClusterGateways(engines, NODES, {
    shards: 1, leaseMs: 6_000, perNode: () => ({ secretKey: secretKey.toString('hex'), streamSnapshotStoreWaitMs: 60_000 }),
  });
}, 90_000);
afterAll(async () => {
  await Promise.all(sockets.map((s) => s.close()));
  await stopClusterFile({ gateways: nodes, nc });
});

async function open(g: TestGateway): Promise<StreamClient> {
  const c = await mustOpen(g.url, q);
  sockets.push(c);
  return c;
}

async function directGets(allow: boolean): Promise<void> {
  const info = await jsm.streams.info(HISTORY_STREAM);
  await jsm.streams.update(HISTORY_STREAM, { ...info.config, allow_direct: allow });
}

const tradesOf = (c: StreamClient): number[] => c.of('TRADE').map((f) => f.data.order as number);

it('a fresh P4 socket whose node took the account\'s role at a later try gets every TRADE after it opened, or 4014', async () => {
  const a = nodes.find((n) => n.gw.cluster!.nodeId === ownerId)!;
  const b = nodes.find((n) => n !== a)!;
  await until(() => nodes.every((n) => n.gw.cluster!.liveNodes().length === 2) && a.gw.cluster!.owned().includes(account), `${ownerId} to own the account`, 30_000);
  await until(async () => (await a.gw.services.shards.call(account, 'account.status', { accountId: account })).phase === 'connected', 'the owner to connect the account');
  // The owner's socket, live once a TRADE of an order sent after it opened arrives.
  const onOwner = await open(a);
  const warm = await orderSend(a.url, apiKey.value, account, 'warm');
  expect(warm.status).toBe(200);
  await onOwner.until((c) => tradesOf(c).includes(warm.ticket!), 20_000, 'the owner\'s TRADE');

  // The follower's first socket while JetStream answers no direct get: its first try of the role
  // waits for a head read that times out. An order meanwhile, numbered and stored by the owner.
  await directGets(false);
  let onFollower: StreamClient;
  let gap: Awaited<ReturnType<typeof orderSend>>;
  try {
    onFollower = await open(b);
    gap = await orderSend(a.url, apiKey.value, account, 'gap-1');
    expect(gap.status).toBe(200);
    // Numbered and stored by the owner (its socket gets a frame once JetStream has it).
    await onOwner.until((c) => tradesOf(c).includes(gap.ticket!), 20_000, 'the gap order\'s TRADE stored');
  } finally {
    await directGets(true);
  }
  // Orders after it, until the socket gets a TRADE or is closed: the role is taken at a later try
  // (the first direct get times out, 5 s), and what it reads first is past these orders too.
  const sent = [gap!.ticket!];
  for (let i = 1; !onFollower!.closed && tradesOf(onFollower!).length === 0; i++) {
    expect(i, 'a TRADE or a close on the follower\'s socket').toBeLessThanOrEqual(30);
    const after = await orderSend(a.url, apiKey.value, account, `after-${i}`);
    expect(after.status).toBe(200);
    sent.push(after.ticket!);
    await onFollower!.until((c) => c.closed ?? (tradesOf(c).length > 0 || undefined), 2_000, 'a TRADE').catch(() => undefined);
  }
  if (onFollower!.closed) {
    // Told: it may have missed events (the client reconnects and resyncs).
    expect(onFollower!.closed.code).toBe(4014);
    expect(tradesOf(onFollower!)).toEqual([]);
  } else {
    // Every TRADE since it opened, from the first.
    await onFollower!.until((c) => c.closed ?? (tradesOf(c).includes(sent.at(-1)!) || undefined), 20_000, 'the last TRADE');
    expect(tradesOf(onFollower!)).toEqual(sent);
    expectAccountStream(onFollower!.frames);
  }
}, 120_000);
