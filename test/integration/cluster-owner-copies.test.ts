// An owner's copies of an account's binding and sessions to PostgreSQL (src/cluster/ownerRecords.ts
// OwnerCopies) when the database is away at the moment of the change: the copy fails, and is made
// again (retryFailed, every third of the lease on a node) until it lands, not only at the account's
// next change; one the lease moved on from is dropped. Real PostgreSQL behind a TCP proxy that cuts
// and refuses connections, real SQLite files.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BindingRecords } from '../../src/cluster/bindingRecords.js';
import { acquireLeases, type Lease } from '../../src/cluster/leases.js';
import { openPgPool, type PgPool } from '../../src/cluster/pgPool.js';
import { SessionRecords } from '../../src/cluster/sessionRecords.js';
import { createLogger } from '../../src/log.js';
import { AccountStore } from '../../src/store/accounts.js';
import { openDb, type Db } from '../../src/store/db.js';
import { SessionStore } from '../../src/store/sessions.js';
import { freePort } from '../helpers/engines.js';
import { postgresForFile } from '../helpers/postgres.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcpProxy.js';
import { until } from '../helpers/until.js';

const server = postgresForFile();
let proxy: TcpProxy;
let viaProxy: PgPool;
let sqlite: Db;
let dir: string;
beforeAll(async () => {
  proxy = await startTcpProxy(server.engine.port);
  // The test database, reached through the proxy.
  const url = new URL(server.pool.options.connectionString!);
  url.port = String(proxy.port);
  viaProxy = openPgPool(url.toString(), { onIdleError: () => {}, connectTimeoutMs: 500 });
  dir = mkdtempSync(join(tmpdir(), 'tagw-copies-'));
  sqlite = openDb(dir);
});
afterAll(async () => {
  await viaProxy?.end();
  await proxy?.close();
  sqlite?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('owner copies while PostgreSQL is away', () => {
  it('a binding and a session changed meanwhile reach PostgreSQL once it is back; one whose lease moved on is dropped', async () => {
    const leases = new Map<string, Lease>();
    const opts = { pool: viaProxy, sqlite, nodeId: 'copies-a', keeper: { leaseOf: (id: string) => leases.get(id) }, clock: { now: () => Date.now() }, log: createLogger('silent') };
    const bindings = new BindingRecords(opts);
    const sessions = new SessionRecords(opts);
    const now = Date.now();
    const row = { customer_id: 'c1', platform: 'P5' as const, server: 'Sim-P5-Demo', password_enc: 'sealed', build: null, created_at: now, updated_at: now };
    for (const id of ['copied', 'moved']) {
      await server.pool.query(`INSERT INTO account_bindings (seat_id, customer_id, platform, server, login, password_enc, build, created_at, updated_at)
        VALUES ($1, 'c1', 'P5', 'Sim-P5-Demo', 'before', 'sealed', NULL, $2, $2)`, [id, now]);
      const [lease] = await acquireLeases(server.pool, 'copies-a', [id], 600_000);
      leases.set(id, lease!);
    }

    // The database goes away; the owner's shards change both accounts meanwhile.
    proxy.cut();
    proxy.target(await freePort());
    const accounts = new AccountStore(sqlite);
    for (const id of ['copied', 'moved']) accounts.upsert({ ...row, seat_id: id, login: 'after' });
    new SessionStore(sqlite).upsert({
      handle_hash: 'h-copied', account_id: 'copied', customer_id: 'c1', platform: 'P5', handle_sealed: 'sealed', state: 'live', connected_at: now, invalidated_at: null,
    });
    expect(await Promise.all([bindings.sync('copied'), bindings.sync('moved'), sessions.sync('copied')])).toEqual(['failed', 'failed', 'failed']);
    expect(bindings.copies.pending).toBe(2);
    // 'moved' goes to another node meanwhile.
    leases.delete('moved');

    proxy.target(server.engine.port);
    const login = async (id: string) => (await server.pool.query<{ login: string }>('SELECT login FROM account_bindings WHERE seat_id = $1', [id])).rows[0]!.login;
    const session = async () => (await server.pool.query<{ state: string }>("SELECT state FROM gateway_sessions WHERE handle_hash = 'h-copied'")).rows[0]?.state;
    // Nothing else changes: the retries alone bring them (a node makes them every third of the lease).
    await until(async () => {
      bindings.copies.retryFailed();
      sessions.copies.retryFailed();
      return (await login('copied')) === 'after' && (await session()) === 'live';
    }, 'the failed copies to land');
    await until(() => bindings.copies.pending === 0 && sessions.copies.pending === 0, 'no failed copy left');
    expect(await login('moved')).toBe('before');
  }, 60_000);
});
