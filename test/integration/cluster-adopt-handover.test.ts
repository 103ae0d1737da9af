// An account a node acquires and hands over (or loses) before its shards were told to start it: the
// start (adopt) waits for the account's gateway sessions read from PostgreSQL, and the handover does
// not, so its release reached the shards first. The start that came after it ran the account, with
// its broker connection, on a node that no longer held the lease, for good: two nodes ran it (seen in
// CI under load as cluster-wired's "only the owner runs the account": 1 actor on the other node for
// 15 s). Here the sessions' read is held by a lock on gateway_sessions until the handover is done.
// Two cluster-mode gateways (real nats-server, PostgreSQL, a bridged simulator).
import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateKey } from '../../src/auth/keys.js';
import { targetOwners } from '../../src/cluster/rendezvous.js';
import { createLogger } from '../../src/log.js';
import { seedBoundAccount, useClusterEngines } from '../helpers/cluster.js';
import { shardActors, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { until } from '../helpers/until.js';

const engines = useClusterEngines();
const secretKey = randomBytes(32);
const apiKey = generateKey('api');
const account = randomUUID();
const nodes: TestGateway[] = [];

async function startNode(nodeId: string, lines?: string[]): Promise<TestGateway> {
  const gw = await startTestGateway({
    brokerMode: 'bridge', bridgeUrl: engines.sim.url, shards: 1, secretKey: secretKey.toString('hex'),
    natsUrl: engines.nats.url, databaseUrl: engines.databaseUrl, nodeId, clusterLeaseMs: 6_000, clusterOwnerWaitMs: 3_000, clusterSettleMs: 0,
  }, lines ? { log: createLogger('info', {}, (l) => lines.push(l)) } : {});
  nodes.push(gw);
  return gw;
}

beforeAll(async () => {
  await seedBoundAccount(engines.tenancy, { apiKey, account, login: 'adopt', secretKey });
}, 60_000);
afterAll(async () => {
  for (const n of nodes) await n.stop().catch(() => undefined);
});

describe('an account handed over before its shards started it', () => {
  it('is not started on the node that handed it over once its start may go on: only the new owner runs it', async () => {
    // The second node's id: one the lease plan places the account on, so the first sheds it to it.
    const second = Array.from({ length: 64 }, (_, i) => `adopt-b${i}`).find((id) => targetOwners(['adopt-a', id], [account], new Map()).get(account) === id)!;
    const lock = await engines.pool.connect();
    let locked = true;
    const aLines: string[] = [];
    try {
      await lock.query('BEGIN');
      await lock.query('LOCK TABLE gateway_sessions IN ACCESS EXCLUSIVE MODE');
      const a = await startNode('adopt-a', aLines);
      // a holds the lease; its start of the account waits for the sessions' read.
      await until(() => a.gw.cluster!.owned().includes(account), 'the first node to take the account');
      expect(await shardActors(a)).toBe(0);
      const b = await startNode(second);
      // a hands it over to b (released in PostgreSQL; b's own start waits on the lock too).
      await until(async () => !a.gw.cluster!.owned().includes(account) && aLines.some((l) => l.includes('"accounts leave this node"')), 'the first node to hand the account over');
      await until(() => b.gw.cluster!.owned().includes(account), 'the second node to take the account');
      await lock.query('COMMIT');
      locked = false;
      // a's start goes on after the handover: it says it does not start the account.
      await until(() => aLines.some((l) => l.includes('"accounts gone before their start: not started here"')), 'the first node to drop its late start', 15_000)
        .catch(async (err: Error) => {
          throw new Error(`${err.message}; actors on the first node now: ${await shardActors(a)}`);
        });
      expect(await shardActors(a)).toBe(0);
      await until(async () => (await b.gw.services.shards.call(account, 'account.status', { accountId: account })).phase === 'connected', 'the new owner to connect the account');
      expect(await shardActors(a)).toBe(0);
    } finally {
      if (locked) await lock.query('ROLLBACK').catch(() => undefined);
      lock.release();
    }
  }, 60_000);
});
