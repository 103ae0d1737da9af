// A /v1/stream socket on a node that follows a P4 account (no snapshot: account frames are all it
// gets) whose NATS connection drops while the owner numbers and stores an order's frames: once the
// connection is back, the socket gets them, with no later order to show the gap. Before, a
// follower's feed took what it missed only from the owner's next frame, and none came: chaos seed
// 604312773 (schedule 13), a P4 socket on a node frozen through a nats-server restart got none of
// the TRADEs stored meanwhile, the account's clients being stuck elsewhere (docs/cluster.md,
// "Streams and resume"). Two gateways in cluster mode on real nats-server and PostgreSQL; the
// follower reaches nats-server through a TCP proxy the test cuts.
import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { generateKey } from '../../src/auth/keys.js';
import { targetOwners } from '../../src/cluster/rendezvous.js';
import { ownerConnected, seedBoundAccount, startClusterGateways, useClusterEngines } from '../helpers/cluster.js';
import { stopClusterFile } from '../helpers/clusterTeardown.js';
import type { TestGateway } from '../helpers/gateway.js';
import { expectAccountStream, mustOpen, type StreamClient } from '../helpers/stream-helpers.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcpProxy.js';
import { orderSend } from '../helpers/trading.js';
import { until } from '../helpers/until.js';

const NODES = ['recon-a', 'recon-b'] as const;
const secretKey = randomBytes(32);
const apiKey = generateKey('api');
const account = randomUUID();
const ownerId = targetOwners(NODES, [account], new Map()).get(account)!;
const followerId = NODES.find((n) => n !== ownerId)!;
const q = { apiKey: apiKey.value, id: account, heartbeat: '0' };

const engines = useClusterEngines();
let proxy: TcpProxy;
let nodes: TestGateway[] = [];
const sockets: StreamClient[] = [];

beforeAll(async () => {
  await seedBoundAccount(engines.tenancy, { apiKey, account, login: 'follower-reconnect', secretKey, p4: true });
  proxy = await startTcpProxy(Number(new URL(engines.nats.url).port));
  nodes = await startClusterGateways(engines, NODES, {
    shards: 1, leaseMs: 6_000,
    perNode: (id) => ({ secretKey: secretKey.toString('hex'), ...(id === followerId ? { natsUrl: `nats://127.0.0.1:${proxy.port}` } : {}) }),
  });
}, 90_000);
afterAll(async () => {
  await Promise.all(sockets.map((s) => s.close()));
  await stopClusterFile({ gateways: nodes });
  await proxy?.close();
});

async function open(g: TestGateway): Promise<StreamClient> {
  const c = await mustOpen(g.url, q);
  sockets.push(c);
  return c;
}

const tradesOf = (c: StreamClient): number[] => c.of('TRADE').map((f) => f.data.order as number);
const natsUp = async (g: TestGateway): Promise<boolean> => ((await (await fetch(`${g.url}/readyz`)).json()) as { cluster?: { nats: boolean } }).cluster?.nats === true;

it('a follower\'s P4 socket gets the frames the owner stored while the follower\'s NATS connection was down, once it is back, with no later order', async () => {
  const { owner, other: follower } = await ownerConnected(nodes, account, ownerId);
  const onOwner = await open(owner);
  const onFollower = await open(follower);
  const warm = await orderSend(owner.url, apiKey.value, account, 'warm');
  expect(warm.status).toBe(200);
  for (const s of [onOwner, onFollower]) await s.until((c) => tradesOf(c).includes(warm.ticket!), 20_000, 'the warm TRADE');

  // The follower's connection down; an order meanwhile, numbered and stored by the owner.
  proxy.target(1);
  proxy.cut();
  await until(async () => !(await natsUp(follower)), 'the follower\'s NATS connection down');
  const missed = await orderSend(owner.url, apiKey.value, account, 'missed');
  expect(missed.status).toBe(200);
  await onOwner.until((c) => tradesOf(c).includes(missed.ticket!), 20_000, 'the TRADE stored by the owner');
  proxy.target(Number(new URL(engines.nats.url).port));
  await until(() => natsUp(follower), 'the follower\'s NATS connection back');

  // No order after it: the socket gets the TRADE all the same (or is told it missed it), never silence.
  await onFollower.until((c) => c.closed ?? (tradesOf(c).includes(missed.ticket!) || undefined), 20_000, 'the TRADE stored while the follower was away');
  expect(onFollower.closed).toBeNull();
  expect(tradesOf(onFollower)).toEqual([warm.ticket, missed.ticket]);
  expectAccountStream(onFollower.frames);
}, 120_000);
