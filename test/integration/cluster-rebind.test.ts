// Cluster mode: what changes an existing account's binding (a re-bind, /Upgrade, the broker server
// correcting the platform at a later login) and the gateway sessions it ends, kept right in
// PostgreSQL and every node's SQLite. Real nats-server, embedded PostgreSQL, a simulator behind a
// bridge over loopback TCP, two in-process gateways in bridge mode.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateKey, hashSecret } from '../../src/auth/keys.js';
import { handleHash } from '../../src/http/routes/gateway.js';
import type { Shards } from '../../src/runtime/shardSet.js';
import { useClusterEngines } from '../helpers/cluster.js';
import { EMPTY_START_SETTLE_MS } from '../helpers/engines.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { until } from '../helpers/until.js';

const engines = useClusterEngines();
const secretKey = randomBytes(32).toString('hex');
const apiKey = generateKey('api');
const mgmtKey = generateKey('management');
const nodes: TestGateway[] = [];
const api = { 'x-api-key': apiKey.value };

beforeAll(async () => {
  const t = engines.tenancy;
  const now = Date.now();
  await t.createCustomer('c1', 'c1', now);
  await t.insertKey({ id: apiKey.id, customer_id: 'c1', kind: 'api', hash: hashSecret(apiKey.secret), label: 'bot', read_only: 0, account_scoped: 0, seat_id: null, created_at: now });
  await t.insertKey({ id: mgmtKey.id, customer_id: 'c1', kind: 'management', hash: hashSecret(mgmtKey.secret), label: 'ops', read_only: 0, account_scoped: 0, seat_id: null, created_at: now });
  // Both nodes at once (each migrates PostgreSQL or finds it done). A bind waits for its first connect
  // only briefly: the last test binds with the bridge stopped and would otherwise wait 3 s for nothing.
  nodes.push(...await Promise.all(['rebind-a', 'rebind-b'].map((nodeId) => startTestGateway({
    brokerMode: 'bridge', bridgeUrl: engines.sim.url, shards: 2, secretKey, reconnectBaseMs: 50, reconnectCapMs: 300, bindWaitMs: 500,
    natsUrl: engines.nats.url, databaseUrl: engines.databaseUrl, nodeId, clusterLeaseMs: 6_000, clusterSettleMs: EMPTY_START_SETTLE_MS, clusterOwnerWaitMs: 5_000,
  }))));
}, 60_000);
afterAll(async () => {
  for (const n of nodes) await n.stop().catch(() => undefined);
});

interface Binding { login: string; platform: string; build: number | null }
const pgBinding = async (id: string) => (await engines.pool.query<Binding>('SELECT login, platform, build FROM account_bindings WHERE seat_id = $1', [id])).rows[0];
const sqliteBinding = (n: TestGateway, id: string) =>
  n.gw.services.db.prepare<[string], Binding>('SELECT login, platform, build FROM account_bindings WHERE seat_id = ?').get(id);
const pgSession = async (hash: string) => (await engines.pool.query<{ state: string }>('SELECT state FROM gateway_sessions WHERE handle_hash = $1', [hash])).rows[0]?.state;
const ownerOf = (id: string) => nodes.find((n) => n.gw.cluster!.owned().includes(id))!;
const otherThan = (n: TestGateway) => nodes.find((x) => x !== n)!;

/** A new account bound through `via`, once a node owns it. */
async function account(via: TestGateway, user: string, server = 'Sim-P5-Demo'): Promise<string> {
  const r = await via.req('POST', '/ConnectEx', { headers: api, body: { user, password: 'pw', server } });
  expect(r.status, r.text).toBe(200);
  const id = r.body.id as string;
  await until(() => nodes.some((n) => n.gw.cluster!.owned().includes(id)), 'an owner for the account');
  return id;
}

const rebind = (via: TestGateway, id: string, user: string, server = 'Sim-P5-Demo') =>
  via.req('POST', `/ConnectEx?id=${id}`, { headers: api, body: { user, password: 'pw', server } });

async function upgrade(via: TestGateway, id: string, build: number): Promise<void> {
  const up = await via.req('POST', `/v1/accounts/${id}/upgrade`, { headers: { authorization: `Bearer ${mgmtKey.value}` }, body: { build } });
  expect(up.status, up.text).toBe(200);
}

/** A gateway session on the account, made through `via`: its handle and the handle's hash. */
async function session(via: TestGateway, id: string): Promise<{ handle: string; hash: string }> {
  const conn = await via.req('POST', '/v1/connect', { headers: api, body: { brokerAccountId: id } });
  expect(conn.status, conn.text).toBe(200);
  return { handle: conn.body.handle as string, hash: handleHash(conn.body.handle as string) };
}

/** Runs `around` in place of the node's account.bind calls (what a route asks its shards, through the router). */
function aroundBind(n: TestGateway, around: (args: { accountId: string; login: string }, bind: () => Promise<unknown>) => Promise<unknown>): () => void {
  const shards = n.gw.services.shards as { call: Shards['call'] };
  const call = shards.call;
  shards.call = ((key, op, args, opts) => {
    const run = () => call.call(n.gw.services.shards, key, op, args, opts);
    return op === 'account.bind' ? around(args as { accountId: string; login: string }, run) : run();
  }) as Shards['call'];
  return () => {
    shards.call = call;
  };
}

describe('cluster: a login held for an account being re-bound (PgTenancy)', () => {
  it('no other account gets it, new or re-bound, until the hold is released or expires', async () => {
    const t = engines.tenancy;
    const now = Date.now();
    // Bindings without seat rows: no account any node would start.
    const binding = (seat: string) => ({
      seat_id: seat, customer_id: 'c1', platform: 'P5' as const, server: 'Sim-P5-Demo', login: 'held', password_enc: 'sealed', build: null, created_at: now, updated_at: now,
    });
    expect(await t.claimLogin('held-x', 'Sim-P5-Demo', 'held')).toBe(true);
    expect(await t.claimLogin('held-x', 'Sim-P5-Demo', 'held')).toBe(true); // its own hold again (a retried re-bind)
    expect(await t.claimLogin('held-y', 'Sim-P5-Demo', 'held')).toBe(false);
    expect(await t.upsertBinding(binding('held-y'))).toBe(false);
    expect(await t.claimLogin('held-y', 'Sim-P5-Demo', 'other')).toBe(true); // another login is free
    await t.releaseLogin('held-x', 'Sim-P5-Demo', 'held');
    // Held 500 ms: long enough that the next statement still meets it on a loaded machine (50 ms
    // ran out before it in a full run here), short enough to wait out below.
    expect(await t.claimLogin('held-y', 'Sim-P5-Demo', 'held', 500)).toBe(true);
    expect(await t.upsertBinding(binding('held-x'))).toBe(false);
    // A hold its node never released (it died mid-bind) expires by PostgreSQL's clock.
    await until(() => t.upsertBinding(binding('held-x')), 'the expired hold to free the login');
  }, 30_000);
});

describe('cluster: a login re-bound on an existing account', () => {
  it('two accounts re-bound to one login at the same moment through two nodes: one gets it, the other 409 and keeps its login everywhere', async () => {
    const [a, b] = nodes as [TestGateway, TestGateway];
    const [first, second] = await Promise.all([account(a, 'r3-first'), account(b, 'r3-second')]);
    // Each bind that reaches the shards waits for the other (up to 2 s): both are in flight together.
    let arrived = 0;
    let bothIn: () => void = () => {};
    const both = new Promise<void>((resolve) => (bothIn = resolve));
    const hold = async (_args: unknown, bind: () => Promise<unknown>) => {
      if (++arrived === 2) bothIn();
      await Promise.race([both, new Promise((r) => setTimeout(r, 2_000))]);
      return bind();
    };
    const undo = [aroundBind(a, hold), aroundBind(b, hold)];
    let answers;
    try {
      answers = await Promise.all([rebind(a, first, 'r3-same'), rebind(b, second, 'r3-same')]);
    } finally {
      for (const u of undo) u();
    }
    expect(answers.map((r) => r.status).sort()).toEqual([200, 409]);
    const lost = answers.findIndex((r) => r.status === 409);
    expect(answers[lost]!.body.error).toBe('BROKER_LOGIN_IN_USE');
    const [winner, loser, loserLogin] = lost === 0 ? [second, first, 'r3-first'] : [first, second, 'r3-second'];
    // Only one shard was asked to bind it.
    expect(arrived).toBe(1);
    expect((await pgBinding(winner))!.login).toBe('r3-same');
    expect((await pgBinding(loser))!.login).toBe(loserLogin);
    // Every node's SQLite (the loser's owner's included, which its shard writes) has the same.
    for (const n of nodes) {
      expect(sqliteBinding(n, loser)!.login).toBe(loserLogin);
      await until(() => sqliteBinding(n, winner)!.login === 'r3-same', 'the winner\'s login in every mirror');
    }
    // The loser still trades on its own login, through either node.
    for (const n of nodes) {
      const details = await n.req('GET', `/AccountDetails?id=${loser}`, { headers: api });
      expect(details.status, details.text).toBe(200);
      expect(details.body.login).toBe(loserLogin);
    }
  }, 60_000);

  it('a re-bind and an /Upgrade racing: the newer write wins in PostgreSQL and every mirror', async () => {
    const [a, b] = nodes as [TestGateway, TestGateway];
    const id = await account(a, 'r4-first');
    // The upgrade lands after the owner bound the new login, before the re-bind answered: it is newer.
    let undo = aroundBind(a, async (args, bind) => {
      const r = await bind();
      if (args.accountId === id) await upgrade(b, id, 2_100);
      return r;
    });
    try {
      expect((await rebind(a, id, 'r4-second')).status).toBe(200);
    } finally {
      undo();
    }
    expect(await pgBinding(id)).toEqual({ login: 'r4-second', platform: 'P5', build: 2_100 });
    for (const n of nodes) await until(() => sqliteBinding(n, id)?.build === 2_100, 'the upgrade\'s build in every mirror');
    expect(sqliteBinding(ownerOf(id), id)).toEqual({ login: 'r4-second', platform: 'P5', build: 2_100 });

    // The other way round: a re-bind (no build: the server's own) after an upgrade is the newer write.
    undo = aroundBind(a, async (args, bind) => {
      if (args.accountId === id) await upgrade(b, id, 2_200);
      return bind();
    });
    try {
      expect((await rebind(a, id, 'r4-third')).status).toBe(200);
    } finally {
      undo();
    }
    expect(await pgBinding(id)).toEqual({ login: 'r4-third', platform: 'P5', build: null });
    for (const n of nodes) await until(() => sqliteBinding(n, id)?.login === 'r4-third' && sqliteBinding(n, id)?.build === null, 'the re-bind in every mirror');
  }, 60_000);
});

describe('cluster: the binding of an account a node runs', () => {
  it('is its shard\'s to write: a mirror pass never copies PostgreSQL\'s row over it, other nodes\' mirrors follow PostgreSQL', async () => {
    const id = await account(nodes[0]!, 'r5-mirror');
    const owner = ownerOf(id);
    const other = otherThan(owner);
    // What a pass that read PostgreSQL just before the owner's shard wrote would bring: not the shard's row.
    await engines.tenancy.setBuild(id, 4_242, Date.now());
    await Promise.all(nodes.map((n) => n.gw.cluster!.pg.mirror.sync()));
    expect(sqliteBinding(other, id)!.build).toBe(4_242);
    expect(sqliteBinding(owner, id)!.build).toBeNull();
    // The owner's next change copies its row (the whole of it) back to PostgreSQL.
    await upgrade(other, id, 2_300);
    expect(await pgBinding(id)).toEqual({ login: 'r5-mirror', platform: 'P5', build: 2_300 });
  }, 60_000);
});

describe('cluster: a gateway session its shard ends by itself', () => {
  it('re-bound to a login of the other platform: ended in PostgreSQL before the re-bind answers; no node resolves the handle', async () => {
    const id = await account(nodes[0]!, 'r1-p5');
    const owner = ownerOf(id);
    const other = otherThan(owner);
    const { handle, hash } = await session(other, id);
    expect(await pgSession(hash)).toBe('live');
    expect((await rebind(other, id, 'r1-p4', 'Sim-P4-Demo')).status).toBe(200);
    expect(await pgSession(hash)).toBe('invalidated');
    expect(await other.gw.cluster!.findSession(hash)).toBeUndefined();
    const viaOther = await other.req('GET', `/v1/proxy/AccountSummary?handle=${handle}`, { headers: api });
    expect(viaOther.status).toBe(404);
    expect(viaOther.body.error).toBe('SESSION_NOT_FOUND');
  }, 60_000);

  // Last: it stops the bridge (every account of the file loses its connection for a moment).
  it('a platform the broker server corrects at a login after the bind reaches PostgreSQL, and ends the session it no longer fits', async () => {
    const id = await account(nodes[1]!, 'r2-p5');
    const owner = ownerOf(id);
    const other = otherThan(owner);
    const { hash } = await session(owner, id);
    await engines.sim.stopBridge();
    try {
      // The bridge cannot be asked: bound anyway, as a P5 server until it tells.
      const r = await rebind(other, id, 'r2-p4', 'Sim-P4-Demo');
      expect(r.status, r.text).toBe(200);
      expect(await pgBinding(id)).toEqual({ login: 'r2-p4', platform: 'P5', build: null });
      expect(await pgSession(hash)).toBe('live');
    } finally {
      await engines.sim.restartBridge();
    }
    // The account's first login says P4: the owner's SQLite, then PostgreSQL and every mirror.
    await until(async () => (await pgBinding(id))?.platform === 'P4', 'the corrected platform in PostgreSQL');
    for (const n of nodes) await until(() => sqliteBinding(n, id)?.platform === 'P4', 'the corrected platform in every mirror');
    // The P5 session ended on the owner (no session command since): ended in PostgreSQL too.
    await until(async () => (await pgSession(hash)) === 'invalidated', 'the ended session in PostgreSQL');
    expect(await other.gw.cluster!.findSession(hash)).toBeUndefined();
  }, 60_000);
});
