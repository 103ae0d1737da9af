// Audit rows in cluster mode survive the node's death (docs/cluster.md, failures). A tenancy write
// (keys, seats, limits) inserts its row in the change's own transaction: both commit or neither, so a
// node killed after the commit and before its answer leaves the change with its row, and a row that
// cannot be written undoes the change. Before, the row was made after the answer was built: such a
// kill left the change without its row. Any other audited action (an upgrade, a fault) is answered
// only once its row is in PostgreSQL, or on the node's disk while PostgreSQL is away, and a row left
// on disk is written by the node's next start (before, it waited in the node's memory, and the answer
// did not wait for it: a kill right after the answer lost it). A gateway process in cluster mode
// (SIGKILL is real), a simulator process, real nats-server and PostgreSQL, the node reaching
// PostgreSQL through a TCP proxy the test delays or cuts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPgPool, type PgPool } from '../../src/cluster/pgPool.js';
import { CLUSTER_MANAGEMENT_KEY, ClusterProcs, readyz, startEngines, type Engines, type Readiness } from '../helpers/clusterProcs.js';
import { freePort } from '../helpers/engines.js';
import { sharedPostgres } from '../helpers/postgres.js';
import { cleanupProcesses } from '../helpers/process.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcpProxy.js';
import { until } from '../helpers/until.js';

let engines: Engines;
let proxy: TcpProxy;
let cluster: ClusterProcs;
let id: string;
let db: PgPool;
// A row of its own (PgTenancy.addAudit), not the one a binding's copy carries (bindingRecords.ts).
const AUDIT_INSERT = 'INSERT INTO audit_log (customer_id, at, actor_key_id, action, target, detail_json, ref) VALUES';

beforeAll(async () => {
  engines = await startEngines(await sharedPostgres());
  proxy = await startTcpProxy(engines.pg.port);
  cluster = await ClusterProcs.start(engines, { nodes: 1, pgPort: proxy.port });
  id = cluster.nodes[0]!.id;
  db = openPgPool(cluster.databaseUrl, { max: 1 });
}, 120_000);
afterAll(async () => {
  await db?.end();
  await cluster?.close();
  cleanupProcesses();
  await proxy?.close();
  await engines?.stop();
}, 60_000);

async function createKey(label: string): Promise<string> {
  const r = await fetch(`${cluster.node(id).url}/v1/keys`, {
    method: 'POST', headers: { authorization: `Bearer ${CLUSTER_MANAGEMENT_KEY}`, 'content-type': 'application/json' }, body: JSON.stringify({ label }),
  });
  const body = await r.json() as { id: string };
  expect(r.status).toBe(201);
  return body.id;
}

/** The rows of `action` PostgreSQL holds for the target (read past the proxy). */
async function audited(target: string | null, action = 'key.create'): Promise<number> {
  const r = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM audit_log WHERE action = $1 AND target IS NOT DISTINCT FROM $2', [action, target]);
  return r.rows[0]!.n;
}

const mgmt = { authorization: `Bearer ${CLUSTER_MANAGEMENT_KEY}`, 'content-type': 'application/json' };
const keysLabelled = async (label: string) => (await db.query<{ id: string }>('SELECT id FROM keys WHERE label = $1', [label])).rows.map((r) => r.id);

describe('a tenancy write and its audit row: one transaction', () => {
  it('the node SIGKILLed after the key\'s commit and before its answer (the mirror pass after the write delayed): the key is there with its row, once', async () => {
    if (cluster.node(id).state === 'down') await cluster.launch(id);
    // Once the key's INSERT went up, every mirror pass (the one the write waits for before it
    // answers included) is held 30 s on the way: the node has committed and not answered.
    let inserted = false;
    proxy.watch((dir, chunk) => {
      if (dir !== 'up') return undefined;
      if (chunk.includes('INSERT INTO keys')) inserted = true;
      return inserted && chunk.includes('pg_current_snapshot') ? { delayMs: 30_000 } : undefined;
    });
    const answer = fetch(`${cluster.node(id).url}/v1/keys`, { method: 'POST', headers: mgmt, body: JSON.stringify({ label: 'killed-before-answer' }) })
      .then((r) => r.status, () => 'no answer');
    try {
      await until(async () => (await keysLabelled('killed-before-answer')).length > 0, 'the key to commit', 10_000);
      await cluster.kill(id);
    } finally {
      proxy.watch(undefined);
    }
    expect(await answer).toBe('no answer');
    const [keyId] = await keysLabelled('killed-before-answer');
    expect(await keysLabelled('killed-before-answer')).toHaveLength(1);
    expect(await audited(keyId!)).toBe(1);
    // Its content is what it always was: who, what, on which key, no secret.
    const row = (await db.query('SELECT actor_key_id, action, target, detail_json, ref IS NOT NULL AS has_ref FROM audit_log WHERE target = $1', [keyId])).rows[0];
    expect(row).toEqual({ actor_key_id: 'env', action: 'key.create', target: keyId, detail_json: null, has_ref: true });
    await cluster.launch(id);
  }, 90_000);

  it('an audit row that cannot be written undoes its change: a create, a limits change and a seat removal answer 500 and change nothing', async () => {
    if (cluster.node(id).state === 'down') await cluster.launch(id);
    const url = cluster.node(id).url;
    const key = await createKey('limits-kept');
    const seat = await fetch(`${url}/v1/seats`, { method: 'POST', headers: mgmt, body: '{}' });
    expect(seat.status).toBe(201);
    const seatId = ((await seat.json()) as { id: string }).id;
    // The test's own constraint: PostgreSQL refuses these actions' audit rows.
    await db.query("ALTER TABLE audit_log ADD CONSTRAINT test_refused CHECK (action NOT IN ('key.create', 'key.limits', 'seat.delete')) NOT VALID");
    try {
      const create = await fetch(`${url}/v1/keys`, { method: 'POST', headers: mgmt, body: JSON.stringify({ label: 'never-made' }) });
      const limits = await fetch(`${url}/v1/keys/${key}/limits`, { method: 'PUT', headers: mgmt, body: JSON.stringify({ requestsPerSec: 5, ordersPerSec: 1 }) });
      const removal = await fetch(`${url}/v1/seats/${seatId}`, { method: 'DELETE', headers: mgmt });
      expect([create.status, limits.status, removal.status]).toEqual([500, 500, 500]);
    } finally {
      await db.query('ALTER TABLE audit_log DROP CONSTRAINT test_refused');
    }
    expect(await keysLabelled('never-made')).toEqual([]);
    expect((await db.query('SELECT requests_per_sec, orders_per_sec FROM keys WHERE id = $1', [key])).rows).toEqual([{ requests_per_sec: null, orders_per_sec: null }]);
    expect((await db.query('SELECT removed_at FROM seats WHERE id = $1', [seatId])).rows).toEqual([{ removed_at: null }]);
    expect([await audited(key, 'key.limits'), await audited(seatId, 'seat.delete')]).toEqual([0, 0]);
    // The node serves them as before: the key's limits unchanged, the seat there.
    const listed = await fetch(`${url}/v1/keys`, { headers: mgmt });
    expect(((await listed.json()) as { keys: Array<{ id: string; requestsPerSec: number | null }> }).keys.find((k) => k.id === key)?.requestsPerSec).toBe(null);
    expect((await fetch(`${url}/v1/seats/${seatId}`, { headers: mgmt })).status).toBe(200);
  }, 60_000);

  it('a seat created with a login the broker then refuses is removed again, and both are in the log: seat.create, then seat.delete naming the error', async () => {
    if (cluster.node(id).state === 'down') await cluster.launch(id);
    const url = cluster.node(id).url;
    const login = `${cluster.prefix}-refused`;
    const seat = (password: string) => fetch(`${url}/v1/seats`, { method: 'POST', headers: mgmt, body: JSON.stringify({ user: login, password, server: 'Sim-P5-Demo' }) });
    // The login exists at the simulator with this password (its first login), then is free again.
    const first = await seat('right-password');
    expect(first.status).toBe(201);
    const firstId = ((await first.json()) as { id: string }).id;
    const removed = await fetch(`${url}/v1/seats/${firstId}`, { method: 'DELETE', headers: mgmt });
    expect(removed.status, await removed.clone().text()).toBe(200);
    const refused = await seat('wrong-password');
    const error = ((await refused.json()) as { error: string }).error;
    expect({ status: refused.status, error }).toEqual({ status: 400, error: 'BROKER_AUTH_FAILED' });
    const seats = (await db.query<{ id: string; removed: boolean }>(
      'SELECT s.id, s.removed_at IS NOT NULL AS removed FROM seats s JOIN account_bindings b ON b.seat_id = s.id WHERE b.login = $1 AND s.id <> $2', [login, firstId])).rows;
    expect(seats).toEqual([{ id: expect.any(String), removed: true }]);
    const rows = (await db.query<{ action: string; detail_json: string | null }>('SELECT action, detail_json FROM audit_log WHERE target = $1 ORDER BY id', [seats[0]!.id])).rows;
    expect(rows).toEqual([{ action: 'seat.create', detail_json: JSON.stringify({ server: 'Sim-P5-Demo', login }) }, { action: 'seat.delete', detail_json: JSON.stringify({ revokedKeys: [], error: 'BROKER_AUTH_FAILED' }) }]);
  }, 60_000);
});

describe('an upgrade of one account: its row is written with the build it records', () => {
  it('the binding\'s copy to PostgreSQL and the audit row are one transaction (one txid), written once, before the answer', async () => {
    if (cluster.node(id).state === 'down') await cluster.launch(id);
    const acct = await cluster.account();
    const r = await fetch(`${cluster.node(id).url}/v1/accounts/${acct.id}/upgrade`, { method: 'POST', headers: mgmt, body: JSON.stringify({ build: 4321 }) });
    expect(r.status).toBe(200);
    const binding = (await db.query<{ build: number; txid: string }>('SELECT build, txid FROM account_bindings WHERE seat_id = $1', [acct.id])).rows[0]!;
    const rows = (await db.query<{ txid: string }>("SELECT txid FROM audit_log WHERE action = 'account.upgrade' AND target = $1", [acct.id])).rows;
    expect(binding.build).toBe(4321);
    expect(rows).toHaveLength(1);
    // Before: the row came after the copy, in a transaction of its own (the audit outbox).
    expect(rows[0]!.txid).toBe(binding.txid);
  }, 60_000);
});

describe('a broker login bound with the management key (/ConnectEx, the seat page): its row is written with the binding', () => {
  it('a new seat\'s bind and a re-bind to another login each have an account.bind row (server and login, no password), in the transaction of the binding\'s copy', async () => {
    if (cluster.node(id).state === 'down') await cluster.launch(id);
    const connect = async (body: Record<string, unknown>) => {
      const r = await fetch(`${cluster.node(id).url}/ConnectEx`, { method: 'POST', headers: mgmt, body: JSON.stringify({ server: 'Sim-P5-Demo', ...body }) });
      expect(r.status, await r.clone().text()).toBe(200);
      return ((await r.json()) as { id: string }).id;
    };
    const first = `${cluster.prefix}-bind-a`;
    const second = `${cluster.prefix}-bind-b`;
    const acct = await connect({ user: first, password: 'bind-secret-a' });
    expect(await connect({ user: first, password: 'bind-secret-a' })).toBe(acct); // found bound: no row
    await connect({ id: acct, user: second, password: 'bind-secret-b' });
    const rows = (await db.query<{ detail_json: string; txid: string }>("SELECT detail_json, txid FROM audit_log WHERE action = 'account.bind' AND target = $1 ORDER BY id", [acct])).rows;
    expect(rows.map((r) => JSON.parse(r.detail_json) as unknown)).toEqual([
      { server: 'Sim-P5-Demo', login: first, newSeat: true },
      { server: 'Sim-P5-Demo', login: second },
    ]);
    expect(rows.some((r) => r.detail_json.includes('secret'))).toBe(false);
    const binding = (await db.query<{ login: string; txid: string }>('SELECT login, txid FROM account_bindings WHERE seat_id = $1', [acct])).rows[0]!;
    expect(binding.login).toBe(second);
    expect(rows[1]!.txid).toBe(binding.txid);
  }, 60_000);
});

describe('audit rows of actions that are no tenancy write (upgrades, faults), the node killed', () => {
  it('an upgrade answered is in PostgreSQL although the node is SIGKILLed right after the answer (its row\'s INSERT delayed 1 s on the way)', async () => {
    if (cluster.node(id).state === 'down') await cluster.launch(id);
    const before = await audited(null, 'accounts.upgrade');
    proxy.watch((dir, chunk) => (dir === 'up' && chunk.includes(AUDIT_INSERT) ? { delayMs: 1_000 } : undefined));
    try {
      const r = await fetch(`${cluster.node(id).url}/v1/accounts/upgrade`, { method: 'POST', headers: mgmt, body: '{}' });
      expect(r.status).toBe(200);
      await cluster.kill(id);
      expect(await audited(null, 'accounts.upgrade')).toBe(before + 1);
    } finally {
      proxy.watch(undefined);
    }
  }, 60_000);

  it('a row kept while PostgreSQL was unreachable is on the node\'s disk: SIGKILLed, then started again, the node writes it, once (an upgrade of the customer\'s accounts)', async () => {
    if (cluster.node(id).state === 'down') await cluster.launch(id);
    const dead = await freePort();
    let cut = false;
    // PostgreSQL goes away exactly as the audit row is written (the upgrade done before).
    proxy.watch((dir, chunk) => {
      if (cut || dir !== 'up' || !chunk.includes(AUDIT_INSERT)) return undefined;
      cut = true;
      proxy.target(dead);
      proxy.cut('reset');
      return 'drop';
    });
    const before = await audited(null, 'accounts.upgrade');
    try {
      const r = await fetch(`${cluster.node(id).url}/v1/accounts/upgrade`, { method: 'POST', headers: mgmt, body: '{}' });
      expect(r.status).toBe(200);
      await until(() => cut, 'the audit row\'s INSERT to be cut', 10_000);
      await cluster.kill(id);
    } finally {
      proxy.watch(undefined);
      proxy.target(engines.pg.port);
    }
    expect(await audited(null, 'accounts.upgrade')).toBe(before);
    await cluster.launch(id);
    await until(async () => (await audited(null, 'accounts.upgrade')) > before, 'the kept audit row to reach PostgreSQL after the restart', 20_000);
    expect(await audited(null, 'accounts.upgrade')).toBe(before + 1);
  }, 90_000);

  it('/readyz answers 503 naming the database while the node cannot reach PostgreSQL for the lease time, 200 again once it can', async () => {
    if (cluster.node(id).state === 'down') await cluster.launch(id);
    const node = cluster.node(id);
    await until(async () => (await readyz(node)).status === 200, `${id} ready`, 20_000);
    expect((await readyz(node)).body.cluster).toEqual({ nats: true, database: true });
    // Connections reset and refused from now on (not a new query per probe: the lease rounds fail).
    proxy.target(await freePort());
    proxy.cut('reset');
    let last: { status: number; body: Readiness } | undefined;
    try {
      await until(async () => (last = await readyz(node)).status === 503, 'readyz 503 while PostgreSQL is unreachable', 15_000);
      expect(last!.body).toMatchObject({ ready: false, store: true, cluster: { nats: true, database: false } });
    } finally {
      proxy.target(engines.pg.port);
    }
    await until(async () => (last = await readyz(node)).status === 200, 'readyz 200 once PostgreSQL is back', 20_000);
    expect(last!.body.cluster).toEqual({ nats: true, database: true });
  }, 60_000);
});
