// Cluster mode with PostgreSQL away (issue 20: "requests fail with clean 503s while an engine is
// down"): every kind of tenancy write answers 503 SERVICE_UNAVAILABLE with retry-after, as a JSON
// error naming no server, user or password (nor do the logs), and the same request succeeds once
// the database is back. A real gateway in cluster mode on nats-server and embedded PostgreSQL, the
// database reached through a TCP proxy that cuts and refuses connections; and the errors
// node-postgres really throws when the database goes away, as src/errors.ts maps them.
import { createServer, type Server, type Socket } from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPgPool } from '../../src/cluster/pgPool.js';
import { toApiError } from '../../src/errors.js';
import { startProxiedClusterGateway, type ClusterEngines, type ProxiedClusterGateway } from '../helpers/cluster.js';
import { freePort } from '../helpers/engines.js';
import { TEST_MANAGEMENT_KEY, type TestGateway, type TestResponse } from '../helpers/gateway.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcpProxy.js';
import { until } from '../helpers/until.js';

let cluster: ProxiedClusterGateway;
let engines: ClusterEngines;
let proxy: TcpProxy;
let gw: TestGateway;
/** The database's connection string through the proxy (it carries the engine's password). */
let viaProxy: string;
const logs: string[] = [];
const mk = { authorization: `Bearer ${TEST_MANAGEMENT_KEY}` };

beforeAll(async () => {
  cluster = await startProxiedClusterGateway('pg-down', { clusterOwnerWaitMs: 15_000, logs });
  ({ engines, proxy, gw, databaseUrl: viaProxy } = cluster);
}, 90_000);
afterAll(async () => {
  await cluster?.stop();
});

/** Whether a text holds the database's password (as a word of its own: the tests' temp dirs are
 *  named tagw-test-*, like it) or its connection string. */
function leaks(text: string): boolean {
  const password = new URL(engines.databaseUrl).password;
  const word = new RegExp(`(^|[^\\w/-])${password.replace(/[-]/g, '\\-')}($|[^\\w-])`);
  return word.test(text) || [engines.databaseUrl, viaProxy, engines.postgres.url].some((s) => text.includes(s));
}

describe('tenancy writes in cluster mode while PostgreSQL is unreachable', () => {
  it('each answers 503 with retry-after (a JSON error without secrets), and the same request succeeds once the database is back', async () => {
    // Made while the database is there: keys and seats bound to broker logins (their owner is this
    // node), for the writes that change them.
    const made = await gw.req('POST', '/v1/keys', { headers: mk, body: { label: 'bot' } });
    expect(made.status).toBe(201);
    const api = { 'x-api-key': made.body.key as string };
    const spare = await gw.req('POST', '/v1/keys', { headers: mk, body: { label: 'spare' } });
    expect(spare.status).toBe(201);
    const bound = await gw.req('POST', '/v1/seats', { headers: mk, body: { user: 'pgdown-a', password: 'pw-a', server: 'Sim-P5-Demo' } });
    expect(bound.status, bound.text).toBe(201);
    // Bound: its removal also stops its account on its owner.
    const other = await gw.req('POST', '/v1/seats', { headers: mk, body: { user: 'pgdown-e', password: 'pw-e', server: 'Sim-P5-Demo' } });
    expect(other.status, other.text).toBe(201);

    const writes: Array<{ what: string; send: () => Promise<TestResponse>; ok: number }> = [
      { what: 'create a key', send: () => gw.req('POST', '/v1/keys', { headers: mk, body: { label: 'during' } }), ok: 201 },
      { what: 'create a seat key', send: () => gw.req('POST', `/v1/seats/${bound.body.id}/keys`, { headers: mk, body: { label: 'seat-during' } }), ok: 201 },
      { what: 'create a seat', send: () => gw.req('POST', '/v1/seats', { headers: mk, body: {} }), ok: 201 },
      { what: 'set a key\'s limits', send: () => gw.req('PUT', `/v1/keys/${spare.body.id}/limits`, { headers: mk, body: { requestsPerSec: 50, ordersPerSec: null } }), ok: 200 },
      { what: 'bind a new login (a new account)', send: () => gw.req('POST', '/ConnectEx', { headers: api, body: { user: 'pgdown-b', password: 'pw-b', server: 'Sim-P5-Demo' } }), ok: 200 },
      { what: 'create a seat bound to a login', send: () => gw.req('POST', '/v1/seats', { headers: mk, body: { user: 'pgdown-c', password: 'pw-c', server: 'Sim-P5-Demo' } }), ok: 201 },
      // The login hold (login_claims) comes first for an account re-bound to another login.
      { what: 're-bind an account to another login', send: () => gw.req('POST', '/ConnectEx', { headers: api, body: { id: bound.body.id, user: 'pgdown-d', password: 'pw-d', server: 'Sim-P5-Demo' } }), ok: 200 },
      { what: 'replace a key', send: () => gw.req('POST', `/v1/keys/${spare.body.id}/replace`, { headers: mk, body: {} }), ok: 201 },
      { what: 'remove a seat', send: () => gw.req('DELETE', `/v1/seats/${other.body.id}`, { headers: mk }), ok: 200 },
    ];

    // The database goes away: open connections reset, new ones refused.
    proxy.cut();
    proxy.target(await freePort());
    for (const w of writes) {
      const r = await w.send();
      expect({ what: w.what, status: r.status, error: r.body?.error }).toEqual({ what: w.what, status: 503, error: 'SERVICE_UNAVAILABLE' });
      expect(r.headers.get('content-type')).toContain('application/json');
      expect(Number(r.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(leaks(r.text), `${w.what}: ${r.text}`).toBe(false);
    }

    proxy.target(engines.postgres.port);
    for (const w of writes) {
      let r: TestResponse | undefined;
      // The pool's connections come back with the next request; a bound on it, no sleep.
      await until(async () => (r = await w.send()).status !== 503, `${w.what} to succeed once PostgreSQL is back`, 20_000);
      expect({ what: w.what, status: r!.status, body: r!.text }).toMatchObject({ what: w.what, status: w.ok });
    }
    expect(logs.length).toBeGreaterThan(0);
    expect(logs.filter(leaks)).toEqual([]);
  }, 120_000);
});

describe('what node-postgres throws when the database goes away', () => {
  let stalled: Server;
  let stalledPort: number;
  const held = new Set<Socket>();
  beforeAll(async () => {
    // Accepts connections and never answers: a frozen engine, or a network that drops everything.
    stalled = createServer((sock) => void held.add(sock));
    await new Promise<void>((r) => stalled.listen(0, '127.0.0.1', r));
    stalledPort = (stalled.address() as { port: number }).port;
  });
  afterAll(() => {
    for (const sock of held) sock.destroy();
    return new Promise<void>((r) => stalled.close(() => r()));
  });

  const urlAt = (port: number) => {
    const u = new URL(engines.databaseUrl);
    u.port = String(port);
    return u.toString();
  };
  /** What `f` rejects with, mapped for a client; the message and body carry no secret. */
  async function mapped(f: () => Promise<unknown>): Promise<{ code: string; status: number; retryAfter: string | undefined }> {
    const err = await f().then(() => undefined, (e: unknown) => e);
    expect(err, 'the call to fail').toBeDefined();
    const e = toApiError(err);
    expect(leaks(JSON.stringify(e.toBody()))).toBe(false);
    return { code: e.code, status: e.status, retryAfter: e.headers?.['retry-after'] };
  }
  const unavailable = { code: 'SERVICE_UNAVAILABLE', status: 503, retryAfter: '1' };

  it('refused, timed out, cut mid-query, stalled past the query timeout, terminated by the server: 503 with retry-after', async () => {
    const refused = openPgPool(urlAt(await freePort()), { onIdleError: () => {} });
    expect(await mapped(() => refused.query('SELECT 1'))).toEqual(unavailable);
    await refused.end();

    // Accepted, then closed at once (a server on its way down): pg's 'Connection terminated'.
    const accepted: Socket[] = [];
    const closer = createServer((sock) => void accepted.push(sock.end()));
    await new Promise<void>((r) => closer.listen(0, '127.0.0.1', r));
    const closes = openPgPool(urlAt((closer.address() as { port: number }).port), { onIdleError: () => {} });
    const closed = await closes.query('SELECT 1').then(() => undefined, (e: unknown) => e as Error);
    expect(closed?.message).toMatch(/^Connection terminated/);
    expect(await mapped(() => Promise.reject(closed))).toEqual(unavailable);
    await closes.end();
    for (const sock of accepted) sock.destroy();
    await new Promise<void>((r) => closer.close(() => r()));

    const neverAnswers = openPgPool(urlAt(stalledPort), { onIdleError: () => {}, connectTimeoutMs: 200 });
    expect(await mapped(() => neverAnswers.query('SELECT 1'))).toEqual(unavailable);
    await neverAnswers.end();

    // The pool's wait for a free connection: its only one is taken.
    const busy = openPgPool(engines.databaseUrl, { onIdleError: () => {}, max: 1, connectTimeoutMs: 200 });
    const held = await busy.connect();
    expect(await mapped(() => busy.connect())).toEqual(unavailable);
    held.release();
    await busy.end();

    const cutProxy = await startTcpProxy(engines.postgres.port);
    const cutPool = openPgPool(urlAt(cutProxy.port), { onIdleError: () => {}, queryTimeoutMs: 30_000 });
    const sleeping = cutPool.query('SELECT pg_sleep(10)').then(() => undefined, (e: unknown) => e as Error);
    await until(async () => (await engines.pool.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND query = 'SELECT pg_sleep(10)'")).rows[0].n > 0, 'the query to run');
    cutProxy.cut();
    const cut = await sleeping;
    expect(cut?.message).toMatch(/ECONNRESET|^Connection terminated/); // a reset, or a close, by the way it is cut
    expect(await mapped(() => Promise.reject(cut))).toEqual(unavailable);
    // Stalled: the connection stays open, nothing comes back (query_timeout).
    const stallPool = openPgPool(urlAt(cutProxy.port), { onIdleError: () => {}, queryTimeoutMs: 300 });
    await stallPool.query('SELECT 1');
    cutProxy.stall();
    const stalledQuery = await stallPool.query('SELECT 1').then(() => undefined, (e: unknown) => e as Error);
    expect(stalledQuery?.message).toBe('Query read timeout');
    expect(await mapped(() => Promise.reject(stalledQuery))).toEqual(unavailable);
    await Promise.all([cutPool, stallPool].map((p) => p.end().catch(() => undefined)));
    await cutProxy.close();

    // The server ends the connection (pg_terminate_backend: 57P01, what a shutdown sends).
    const victim = new pg.Client(engines.databaseUrl);
    victim.on('error', () => {});
    await victim.connect();
    const pid = (await victim.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
    const killed = mapped(() => victim.query('SELECT pg_sleep(10)'));
    await until(async () => (await engines.pool.query('SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid = $1 AND wait_event = $2', [pid, 'PgSleep'])).rows[0].n > 0, 'the query to run');
    await engines.pool.query('SELECT pg_terminate_backend($1)', [pid]);
    expect(await killed).toEqual(unavailable);
    await victim.end().catch(() => undefined);
  }, 60_000);

  it('a server that is shutting down, starting up, or broke the protocol (57P0x, class 08): 503', () => {
    // What the server sends in those states (pg's own class); not producible on demand here.
    for (const [code, text] of [['57P02', 'terminating connection because of crash of another server process'], ['57P03', 'the database system is starting up'], ['08006', 'connection failure'], ['08P01', 'protocol violation']]) {
      const e = Object.assign(new pg.DatabaseError(text!, 0, 'error'), { code });
      expect({ code, mapped: toApiError(e).code }).toEqual({ code, mapped: 'SERVICE_UNAVAILABLE' });
    }
  });

  it('a fault of the statement itself stays 500: a unique violation, a syntax error', async () => {
    const internal = { code: 'INTERNAL_ERROR', status: 500, retryAfter: undefined };
    await engines.pool.query('CREATE TABLE IF NOT EXISTS pgdown_u (id int PRIMARY KEY)');
    await engines.pool.query('INSERT INTO pgdown_u VALUES (1) ON CONFLICT DO NOTHING');
    expect(await mapped(() => engines.pool.query('INSERT INTO pgdown_u VALUES (1)'))).toEqual(internal);
    expect(await mapped(() => engines.pool.query('SELEC 1'))).toEqual(internal);
  });
});
