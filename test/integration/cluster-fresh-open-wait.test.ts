// A fresh /v1/stream socket on a P4 account (no snapshot: it is live from where the account
// stands) whose stream.open at the owner is still under way gets every frame numbered after it
// came: its node already follows the account (another socket there), so the socket opens at once
// and its account stream starts once the open is answered. Frames the node's feed delivered while
// the open waited were marked sent meanwhile; the socket was then placed at what was sent then,
// past them, and got only later TRADEs without a word (`npm run chaos`, seed 61222032 schedule 24:
// a P4 socket re-opened on a follower while the dead owner's lease ran out; its open was answered
// 2.5 s later and its first frame was TRADE seq 6; seq 4, an order answered 200 meanwhile, never
// came). docs/cluster.md "Streams and resume". Two gateways in cluster mode on real nats-server and
// PostgreSQL; the follower's forwarded stream.open is held while an order runs at the owner.
import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import { generateKey } from '../../src/auth/keys.js';
import { AccountRouter } from '../../src/cluster/router.js';
import { targetOwners } from '../../src/cluster/rendezvous.js';
import { ownerConnected, seedBoundAccount, startClusterGateways, useClusterEngines } from '../helpers/cluster.js';
import { stopClusterFile } from '../helpers/clusterTeardown.js';
import type { TestGateway } from '../helpers/gateway.js';
import { expectAccountStream, mustOpen, type StreamClient } from '../helpers/stream-helpers.js';
import { orderSend } from '../helpers/trading.js';
import { until } from '../helpers/until.js';

const NODES = ['openwait-a', 'openwait-b'] as const;
const secretKey = randomBytes(32);
const apiKey = generateKey('api');
const account = randomUUID();
const ownerId = targetOwners(NODES, [account], new Map()).get(account)!;
const q = { apiKey: apiKey.value, id: account, heartbeat: '0' };

const engines = useClusterEngines();
let nodes: TestGateway[] = [];
const sockets: StreamClient[] = [];

beforeAll(async () => {
  await seedBoundAccount(engines.tenancy, { apiKey, account, login: 'fresh-open-wait', secretKey, p4: true });
  nodes = await startClusterGateways(engines, NODES, { shards: 1, leaseMs: 6_000, perNode: () => ({ secretKey: secretKey.toString('hex') }) });
}, 90_000);
afterAll(async () => {
  await Promise.all(sockets.map((s) => s.close()));
  await stopClusterFile({ gateways: nodes });
});

async function open(g: TestGateway): Promise<StreamClient> {
  const c = await mustOpen(g.url, q);
  sockets.push(c);
  return c;
}

const tradesOf = (c: StreamClient): number[] => c.of('TRADE').map((f) => f.data.order as number);

it('a fresh P4 socket on a follower whose stream.open is still under way gets the TRADE of an order run meanwhile', async () => {
  const { owner, other: follower } = await ownerConnected(nodes, account, ownerId);
  // The follower follows the account already: the next socket there is upgraded at once.
  const first = await open(follower);
  const warm = await orderSend(owner.url, apiKey.value, account, 'warm');
  expect(warm.status).toBe(200);
  await first.until((c) => tradesOf(c).includes(warm.ticket!), 20_000, 'the warm TRADE on the follower');

  // The follower's next stream.open for the account (forwarded to the owner) is held.
  const call = AccountRouter.prototype.call;
  let release = (): void => undefined;
  const released = new Promise<void>((r) => { release = r; });
  let reached = false;
  const spy = vi.spyOn(AccountRouter.prototype, 'call').mockImplementation(function (this: AccountRouter, key: string, op: string, args: unknown, opts?: unknown) {
    const run = () => (call as (...a: unknown[]) => Promise<unknown>).call(this, key, op, args, opts);
    if (key !== account || op !== 'stream.open' || reached) return run() as never;
    reached = true;
    return released.then(run) as never;
  });
  let fresh: StreamClient;
  let during: Awaited<ReturnType<typeof orderSend>>;
  try {
    fresh = await open(follower);
    await until(() => reached, 'the fresh socket\'s stream.open held');
    during = await orderSend(owner.url, apiKey.value, account, 'during');
    expect(during.status).toBe(200);
    // The follower's feed delivered it (to its other socket) while the fresh socket's open waited.
    await first.until((c) => tradesOf(c).includes(during.ticket!), 20_000, 'the TRADE on the follower');
  } finally {
    release();
    spy.mockRestore();
  }
  const after = await orderSend(owner.url, apiKey.value, account, 'after');
  expect(after.status).toBe(200);
  await fresh!.until((c) => c.closed ?? (tradesOf(c).includes(after.ticket!) || undefined), 20_000, 'the later TRADE or a close');
  // Its node holds what was sent since it came: it gets it (a 4014 would be kept too, not needed).
  expect(fresh!.closed).toBeNull();
  expect(tradesOf(fresh!)).toEqual([during!.ticket!, after.ticket!]);
  expectAccountStream(fresh!.frames);
}, 120_000);
