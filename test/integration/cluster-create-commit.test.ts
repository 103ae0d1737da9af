// A tenancy create in cluster mode when PostgreSQL goes away around its commit: a create whose
// commit happened is answered as made (201, the secret included) although the mirror pass after it
// failed, and the row exists once; one whose INSERT never reached the database answers 503 and
// made nothing; one whose commit reply was lost (its outcome unknown to the node) answers 503 and
// did make it, which is why a client lists before it creates again (docs/cluster.md, failures).
// A real gateway in cluster mode on nats-server and embedded PostgreSQL, the database reached
// through a TCP proxy that reads PostgreSQL's wire protocol to cut at those exact points. The audit
// row of a create commits with it: one answered while PostgreSQL was away is there already.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startProxiedClusterGateway, type ClusterEngines, type ProxiedClusterGateway } from '../helpers/cluster.js';
import { freePort } from '../helpers/engines.js';
import { TEST_MANAGEMENT_KEY, type TestGateway } from '../helpers/gateway.js';
import type { ProxyWatcher, TcpProxy } from '../helpers/tcpProxy.js';
import { until } from '../helpers/until.js';

let cluster: ProxiedClusterGateway;
let engines: ClusterEngines;
let proxy: TcpProxy;
let gw: TestGateway;
let dead: number;
const logs: string[] = [];
const mk = { authorization: `Bearer ${TEST_MANAGEMENT_KEY}` };

beforeAll(async () => {
  // A private seat builds for 10 s (default 3): its create is answered while it still builds even
  // when the answer is slow (a loaded CI machine took more than 3 s and saw it ACTIVE already).
  cluster = await startProxiedClusterGateway('create-commit', { clusterOwnerWaitMs: 1_500, logs, seatBuildMs: 10_000 });
  ({ engines, proxy, gw } = cluster);
  dead = await freePort();
}, 90_000);
afterEach(() => {
  // PostgreSQL back for the next case: nothing watched, new connections reach it.
  proxy.watch(undefined);
  proxy.target(engines.postgres.port);
});
afterAll(async () => {
  await cluster?.stop();
});

/** Whether the server's bytes on a connection carry a ReadyForQuery with no transaction open
 *  ('Z', status 'I'): the statement or transaction before it has committed. Frames messages across
 *  chunks (type byte, then a length that counts itself). */
function idleReady(): (chunk: Buffer) => boolean {
  let carry = Buffer.alloc(0);
  return (chunk) => {
    const buf = Buffer.concat([carry, chunk]);
    let i = 0;
    let idle = false;
    while (buf.length - i >= 5 && buf.length - i >= 1 + buf.readInt32BE(i + 1)) {
      if (buf[i] === 0x5a && buf[i + 5] === 0x49) idle = true;
      i += 1 + buf.readInt32BE(i + 1);
    }
    carry = buf.subarray(i);
    return idle;
  };
}

/** PostgreSQL goes away (open connections closed, new ones refused), after `chunk` passed or not. */
function goAway(how: 'reset' | 'end'): void {
  proxy.target(dead);
  proxy.cut(how);
}

/**
 * The proxy's rule for the statement matching `sql` (the INSERT of a create):
 * - 'after-commit': its commit is acknowledged to the node, then PostgreSQL goes away (before the
 *   mirror pass after the write can read anything);
 * - 'before-commit': the statement never reaches PostgreSQL, which goes away;
 * - 'reply-lost': the statement and its commit reach PostgreSQL, the acknowledgement never
 *   reaches the node.
 */
function cutAround(sql: string, when: 'after-commit' | 'before-commit' | 'reply-lost'): void {
  const armed = new Map<number, (chunk: Buffer) => boolean>();
  let done = false;
  const w: ProxyWatcher = (dir, chunk, conn) => {
    if (done) return 'drop';
    if (dir === 'up' && chunk.includes(sql)) {
      if (when === 'before-commit') {
        done = true;
        goAway('reset');
        return 'drop';
      }
      armed.set(conn, idleReady());
      return undefined;
    }
    if (dir !== 'down' || !armed.get(conn)?.(chunk)) return undefined;
    done = true;
    if (when === 'reply-lost') {
      goAway('reset');
      return 'drop';
    }
    // This chunk (the commit's acknowledgement) is written on; everything closes right after it,
    // before the node can act on it.
    queueMicrotask(() => goAway('end'));
    return undefined;
  };
  proxy.watch(w);
}

const countRows = async (sql: string, args: unknown[]) => (await engines.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${sql}`, args)).rows[0]!.n;
const keysLabelled = (label: string) => countRows('keys WHERE label = $1', [label]);
const seatsOf = async () => countRows('seats', []);
const liveSeats = async () => countRows('seats WHERE removed_at IS NULL', []);
const mirrorWarned = () => logs.some((l) => l.includes('a tenancy create committed but the mirror pass after it failed'));

describe('a tenancy create when PostgreSQL goes away right after its commit', () => {
  it('POST /v1/keys answers 201 with its secret, the key exists once, works on this node at once, and a warning says the mirror catches up', async () => {
    cutAround('INSERT INTO keys', 'after-commit');
    const r = await gw.req('POST', '/v1/keys', { headers: mk, body: { label: 'after-commit' } });
    expect({ status: r.status, text: r.text }).toMatchObject({ status: 201 });
    expect(r.body.key).toMatch(/\S{20,}/);
    expect(await keysLabelled('after-commit')).toBe(1);
    expect(mirrorWarned()).toBe(true);
    // The warning names no secret: neither the key nor its hash.
    const value = r.body.key as string;
    const secret = value.slice(value.indexOf(r.body.id as string) + (r.body.id as string).length + 1);
    expect(secret.length).toBeGreaterThan(20);
    expect(logs.filter((l) => l.includes(secret))).toEqual([]);

    // This node wrote the key into its SQLite itself: it authenticates before PostgreSQL is back.
    const who = await gw.req('GET', '/v1/whoami', { headers: { 'x-api-key': r.body.key } });
    expect({ status: who.status, keyId: who.body?.keyId }).toEqual({ status: 200, keyId: r.body.id });
  }, 60_000);

  it('a replaced key answers 201 with the new secret; the old one is revoked once, the new one exists once', async () => {
    const made = await gw.req('POST', '/v1/keys', { headers: mk, body: { label: 'to-replace' } });
    expect(made.status).toBe(201);
    cutAround('INSERT INTO keys', 'after-commit');
    const r = await gw.req('POST', `/v1/keys/${made.body.id}/replace`, { headers: mk, body: { label: 'replacement' } });
    expect({ status: r.status, text: r.text }).toMatchObject({ status: 201 });
    expect(r.body).toMatchObject({ replaced: made.body.id, label: 'replacement' });
    expect(r.body.key).toMatch(/\S{20,}/);
    expect(await keysLabelled('replacement')).toBe(1);
    expect((await engines.pool.query('SELECT revoked_at IS NOT NULL AS revoked, replaced_by FROM keys WHERE id = $1', [made.body.id])).rows)
      .toEqual([{ revoked: true, replaced_by: r.body.id }]);
    const who = await gw.req('GET', '/v1/whoami', { headers: { 'x-api-key': r.body.key } });
    expect(who.status).toBe(200);
    const old = await gw.req('GET', '/v1/whoami', { headers: { 'x-api-key': made.body.key } });
    expect(old.status).toBe(401);
  }, 60_000);

  it('POST /v1/seats answers 201 with the seat, which exists once with its state, and is served once PostgreSQL is back', async () => {
    const before = await seatsOf();
    cutAround('INSERT INTO seats', 'after-commit');
    const r = await gw.req('POST', '/v1/seats', { headers: mk, body: { privateHosting: true, region: 'eu' } });
    expect({ status: r.status, text: r.text }).toMatchObject({ status: 201 });
    expect(r.body).toMatchObject({ status: 'BUILDING_SERVER', serverBuilding: true });
    expect(await seatsOf()).toBe(before + 1);
    expect((await engines.pool.query('SELECT status FROM seat_state WHERE seat_id = $1', [r.body.id])).rows).toEqual([{ status: 'BUILDING_SERVER' }]);
    expect(mirrorWarned()).toBe(true);

    proxy.watch(undefined);
    proxy.target(engines.postgres.port);
    // The seat timer runs on this node, from the state written with the seat.
    await until(async () => (await gw.req('GET', `/v1/seats/${r.body.id}`, { headers: mk })).body?.status === 'ACTIVE', 'the private seat to become ACTIVE', 40_000);
    const list = await gw.req('GET', '/v1/seats', { headers: mk });
    expect(list.body.seats.filter((s: { id: string }) => s.id === r.body.id)).toHaveLength(1);
  }, 90_000);
});

describe('the audit rows of creates answered while PostgreSQL was away', () => {
  it('committed with their creates: in PostgreSQL once each, in order, none left on the node for later', async () => {
    const ids: string[] = [];
    for (const label of ['audit-1', 'audit-2']) {
      proxy.watch(undefined);
      proxy.target(engines.postgres.port);
      cutAround('INSERT INTO keys', 'after-commit');
      const r = await gw.req('POST', '/v1/keys', { headers: mk, body: { label } });
      expect({ status: r.status, text: r.text }).toMatchObject({ status: 201 });
      ids.push(r.body.id as string);
    }
    const audited = async () => (await engines.pool.query<{ target: string }>(
      "SELECT target FROM audit_log WHERE action = 'key.create' AND target = ANY($1) ORDER BY id", [ids])).rows.map((x) => x.target);
    expect(await audited()).toEqual(ids);
    expect(logs.filter((l) => l.includes('audit log write failed'))).toEqual([]);
    expect(/^tagw_cluster_audit_outbox_rows (\d+)$/m.exec((await gw.req('GET', '/metrics')).text)?.[1]).toBe('0');

    proxy.watch(undefined);
    proxy.target(engines.postgres.port);
    // The node's mirror copies them when PostgreSQL is back; nothing writes them again.
    await until(async () => {
      const entries = (await gw.req('GET', '/v1/audit?limit=1000', { headers: mk })).body.entries as Array<{ target: string }>;
      return ids.every((k) => entries.some((e) => e.target === k));
    }, 'the audit rows to be mirrored', 10_000);
    expect(await audited()).toEqual(ids);
  }, 60_000);
});

describe('a new account (/ConnectEx) when PostgreSQL goes away right after its binding committed', () => {
  it('answers 503 (its bind needs an owner, whose lease needs PostgreSQL); the retry answers the same account, which exists once', async () => {
    const made = await gw.req('POST', '/v1/keys', { headers: mk, body: { label: 'connect' } });
    expect(made.status).toBe(201);
    const api = { 'x-api-key': made.body.key as string };
    const login = { user: 'commit-a', password: 'pw-a', server: 'Sim-P5-Demo' };
    cutAround('INSERT INTO account_bindings', 'after-commit');
    const first = await gw.req('POST', '/ConnectEx', { headers: api, body: login });
    expect({ status: first.status, error: first.body?.error }).toEqual({ status: 503, error: 'SERVICE_UNAVAILABLE' });
    const bound = () => engines.pool.query<{ seat_id: string }>(
      'SELECT b.seat_id FROM account_bindings b JOIN seats s ON s.id = b.seat_id WHERE s.removed_at IS NULL AND b.login = $1', [login.user]);
    expect((await bound()).rows).toHaveLength(1);

    proxy.watch(undefined);
    proxy.target(engines.postgres.port);
    let retried = first;
    await until(async () => (retried = await gw.req('POST', '/ConnectEx', { headers: api, body: login })).status !== 503, 'the retry to get through', 20_000);
    expect({ status: retried.status, text: retried.text }).toMatchObject({ status: 200 });
    expect((await bound()).rows).toEqual([{ seat_id: retried.body.id }]);
  }, 60_000);

  it('cut before the commit of the seat with its binding (one transaction): 503, no seat left behind, and the retry makes one account', async () => {
    const made = await gw.req('POST', '/v1/keys', { headers: mk, body: { label: 'connect-before' } });
    expect(made.status).toBe(201);
    const api = { 'x-api-key': made.body.key as string };
    const login = { user: 'commit-c', password: 'pw-c', server: 'Sim-P5-Demo' };
    const before = await liveSeats();
    cutAround('INSERT INTO account_bindings', 'before-commit');
    const first = await gw.req('POST', '/ConnectEx', { headers: api, body: login });
    expect({ status: first.status, error: first.body?.error }).toEqual({ status: 503, error: 'SERVICE_UNAVAILABLE' });
    // A seat committed on its own before its binding would stay (its removal fails too): a second
    // seat after the retry.
    expect(await liveSeats()).toBe(before);

    proxy.watch(undefined);
    proxy.target(engines.postgres.port);
    let retried = first;
    await until(async () => (retried = await gw.req('POST', '/ConnectEx', { headers: api, body: login })).status !== 503, 'the retry to get through', 20_000);
    expect({ status: retried.status, text: retried.text }).toMatchObject({ status: 200 });
    expect(await liveSeats()).toBe(before + 1);
  }, 60_000);

  it('POST /v1/seats with a login: 503, and its retry 409 BROKER_LOGIN_IN_USE; the one seat made is listed, bound to the login', async () => {
    const login = { user: 'commit-b', password: 'pw-b', server: 'Sim-P5-Demo' };
    const before = await liveSeats();
    cutAround('INSERT INTO account_bindings', 'after-commit');
    const first = await gw.req('POST', '/v1/seats', { headers: mk, body: login });
    expect({ status: first.status, error: first.body?.error }).toEqual({ status: 503, error: 'SERVICE_UNAVAILABLE' });

    proxy.watch(undefined);
    proxy.target(engines.postgres.port);
    let retried = first;
    await until(async () => (retried = await gw.req('POST', '/v1/seats', { headers: mk, body: login })).status !== 503, 'the retry to get through', 20_000);
    expect({ status: retried.status, error: retried.body?.error }).toEqual({ status: 409, error: 'BROKER_LOGIN_IN_USE' });
    const live = await engines.pool.query<{ id: string }>('SELECT s.id FROM seats s JOIN account_bindings b ON b.seat_id = s.id WHERE s.removed_at IS NULL AND b.login = $1', [login.user]);
    expect(live.rows).toHaveLength(1);
    // The retry's own seat was removed again: one live seat more than before, the bound one.
    expect(await liveSeats()).toBe(before + 1);
    const list = await gw.req('GET', '/v1/seats', { headers: mk });
    expect(list.body.seats.map((x: { id: string }) => x.id)).toContain(live.rows[0]!.id);
  }, 60_000);
});

describe('a tenancy create when PostgreSQL goes away before its commit', () => {
  it('POST /v1/keys and POST /v1/seats answer 503 with retry-after and made nothing; the retry makes one', async () => {
    cutAround('INSERT INTO keys', 'before-commit');
    const key = await gw.req('POST', '/v1/keys', { headers: mk, body: { label: 'before-commit' } });
    expect({ status: key.status, error: key.body?.error }).toEqual({ status: 503, error: 'SERVICE_UNAVAILABLE' });
    expect(Number(key.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(await keysLabelled('before-commit')).toBe(0);

    proxy.watch(undefined);
    proxy.target(engines.postgres.port);
    const seats = await seatsOf();
    cutAround('INSERT INTO seats', 'before-commit');
    const seat = await gw.req('POST', '/v1/seats', { headers: mk, body: {} });
    expect({ status: seat.status, error: seat.body?.error }).toEqual({ status: 503, error: 'SERVICE_UNAVAILABLE' });
    expect(await seatsOf()).toBe(seats);

    proxy.watch(undefined);
    proxy.target(engines.postgres.port);
    let retried = key;
    await until(async () => (retried = await gw.req('POST', '/v1/keys', { headers: mk, body: { label: 'before-commit' } })).status !== 503, 'the retry to get through', 20_000);
    expect(retried.status).toBe(201);
    expect(await keysLabelled('before-commit')).toBe(1);
  }, 60_000);

  it('a commit whose acknowledgement is lost (its outcome unknown to the node) answers 503, and the key does exist: a client lists before creating again', async () => {
    cutAround('INSERT INTO keys', 'reply-lost');
    const r = await gw.req('POST', '/v1/keys', { headers: mk, body: { label: 'reply-lost' } });
    expect({ status: r.status, error: r.body?.error }).toEqual({ status: 503, error: 'SERVICE_UNAVAILABLE' });
    expect(await keysLabelled('reply-lost')).toBe(1);
    proxy.watch(undefined);
    proxy.target(engines.postgres.port);
    // What the client does then: the list shows the key (mirrored by the node's own passes).
    await until(async () => {
      const list = await gw.req('GET', '/v1/keys', { headers: mk });
      return list.status === 200 && list.body.keys.filter((k: { label: string }) => k.label === 'reply-lost').length === 1;
    }, 'the key to be listed', 20_000);
  }, 60_000);
});
