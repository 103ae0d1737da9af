// Tenancy written to PostgreSQL first (src/cluster/pgTenancy.ts) and mirrored into each node's
// SQLite (src/cluster/tenancyMirror.ts), read back through the SQLite stores the gateway uses.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { PgTenancy } from '../../src/cluster/pgTenancy.js';
import { TenancyMirror } from '../../src/cluster/tenancyMirror.js';
import { bootstrap } from '../../src/auth/bootstrap.js';
import { hashSecret } from '../../src/auth/keys.js';
import { AccountStore } from '../../src/store/accounts.js';
import { AuditStore } from '../../src/store/audit.js';
import { dbPath, openDb, type Db } from '../../src/store/db.js';
import { TenancyStore } from '../../src/store/tenancy.js';
import { otherWriter } from '../helpers/otherWriter.js';
import { migratedDatabase, postgresForFile } from '../helpers/postgres.js';
import { until } from '../helpers/until.js';

// A server of its own: a mirror pass starts from the oldest transaction running on the whole server
// (tenancyMirror.ts), so another file's open transaction would make the exact row counts below vary.
const server = postgresForFile({ ownServer: true });
const dirs: string[] = [];
const dbs: Db[] = [];

afterAll(() => {
  for (const db of dbs) db.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** A node's local SQLite (DATA_DIR) and its mirror. */
function node(): { db: Db; mirror: TenancyMirror; file: string } {
  const dir = mkdtempSync(join(tmpdir(), 'tagw-mirror-'));
  dirs.push(dir);
  const db = openDb(dir);
  dbs.push(db);
  return { db, mirror: new TenancyMirror(server.pool, db), file: dbPath(dir) };
}

const T = 1_700_000_000_000;
const key = (id: string, seat: string | null = null) => ({
  id, customer_id: 'c1', kind: 'api' as const, hash: `sha256-of-${id}`, label: id, read_only: 0, account_scoped: seat ? 1 : 0, seat_id: seat, created_at: T,
});

describe('tenancy in PostgreSQL, mirrored into every node', () => {
  it('what one node writes, every node reads from its own SQLite after a mirror pass, with the same rules as on one node', async () => {
    const pg = new PgTenancy(server.pool);
    const a = node();
    const b = node();
    await pg.createCustomer('c1', 'operator', T);
    await pg.insertSeat({ id: 's1', customer_id: 'c1', private_hosting: 1, region: 'eu', created_at: T });
    await pg.insertSeat({ id: 's2', customer_id: 'c1', private_hosting: 0, region: null, created_at: T });
    await pg.insertKey(key('k-scoped', 's1'));
    await pg.insertKey(key('k-old'));
    await pg.upsertBinding({ seat_id: 's1', customer_id: 'c1', platform: 'P5', server: 'Sim-Demo', login: '1001', password_enc: 'sealed:abc', build: null, created_at: T, updated_at: T });
    await pg.upsertBinding({ seat_id: 's2', customer_id: 'c1', platform: 'P4', server: 'Sim-Demo', login: '1002', password_enc: 'sealed:def', build: null, created_at: T, updated_at: T });
    await pg.upsertSeatState({ seat_id: 's1', status: 'READY', ready_at: T, updated_at: T });
    const auditId = await pg.addAudit({ customer_id: 'c1', at: T, actor_key_id: 'env', action: 'seat.create', target: 's1', detail_json: null });
    expect(await pg.liveAccountIds()).toEqual(['s1', 's2']);

    expect(await a.mirror.sync()).toBe(9);
    const ta = new TenancyStore(a.db);
    expect(ta.keyById('k-scoped')).toMatchObject({ customer_id: 'c1', hash: 'sha256-of-k-scoped', account_scoped: 1, read_only: 0, seat_id: 's1', revoked_at: null });
    expect(ta.seatById('s1')).toMatchObject({ private_hosting: 1, region: 'eu' });
    expect(ta.seatState('s1')).toEqual({ seat_id: 's1', status: 'READY', ready_at: T, updated_at: T });
    expect(new AccountStore(a.db).boundTo('Sim-Demo', '1001')).toMatchObject({ seat_id: 's1', password_enc: 'sealed:abc', platform: 'P5' });
    expect(new AuditStore(a.db).list('c1', { limit: 10 })).toEqual([expect.objectContaining({ id: auditId, action: 'seat.create' })]);

    // Changes: only the changed rows travel at the next pass.
    expect(await pg.replaceKey('k-old', 'c1', key('k-new'), T + 1)).toBe(true);
    expect(await pg.replaceKey('k-old', 'c1', key('k-newer'), T + 2)).toBe(false); // no longer live
    expect(await pg.removeSeat('s1', 'c1', T + 3)).toEqual(['k-scoped']);
    expect(await pg.removeSeat('s1', 'c1', T + 4)).toBeUndefined();
    await pg.touchKeys([['k-new', T + 5], ['k-new', T + 4]]);
    expect(await pg.setKeyLimits('k-new', 'c1', { requestsPerSec: 10, ordersPerSec: null })).toBe(true);
    await pg.setBuild('s2', 4100, T + 6);
    expect(await pg.liveAccountIds()).toEqual(['s2']);
    expect(await a.mirror.sync()).toBe(5); // k-old, k-new, k-scoped, s1, s2's binding
    expect(ta.keyById('k-old')).toMatchObject({ revoked_at: T + 1, replaced_by: 'k-new' });
    expect(ta.keyById('k-new')).toMatchObject({ revoked_at: null, last_used_at: T + 5, requests_per_sec: 10, orders_per_sec: null });
    expect(ta.keyById('k-scoped')!.revoked_at).toBe(T + 3);
    expect(ta.seatById('s1')).toBeUndefined(); // removed
    expect(new AccountStore(a.db).live().map((r) => [r.seat_id, r.build])).toEqual([['s2', 4100]]);
    expect(await a.mirror.sync()).toBe(0);

    // Another node's first pass copies everything, current.
    await b.mirror.sync();
    const tb = new TenancyStore(b.db);
    for (const id of ['k-old', 'k-new', 'k-scoped']) expect(tb.keyById(id)).toEqual(ta.keyById(id));
    expect(new AccountStore(b.db).live()).toEqual(new AccountStore(a.db).live());
  });

  it('a node started after PostgreSQL was restored from an older backup: its first pass revokes the keys and removes the seats only its mirror still has (they answered 200 after a restore)', async () => {
    const pg = new PgTenancy(server.pool);
    await pg.createCustomer('c-restore', 'restored', T);
    for (const id of ['s-kept', 's-later']) await pg.insertSeat({ id, customer_id: 'c-restore', private_hosting: 0, region: null, created_at: T });
    for (const id of ['k-kept', 'k-later']) await pg.insertKey({ ...key(id), customer_id: 'c-restore' });
    const n = node();
    await n.mirror.sync();
    const t = new TenancyStore(n.db);
    expect(t.keyById('k-later')!.revoked_at).toBeNull();
    // The backup was taken before k-later and s-later: restored, PostgreSQL has neither.
    await server.pool.query("DELETE FROM keys WHERE id = 'k-later'");
    await server.pool.query("DELETE FROM seats WHERE id = 's-later'");
    // The node started again on its DATA_DIR (the restore stops every node): its first pass.
    const told: Array<{ keys: number; seats: number }> = [];
    const before = Date.now();
    await new TenancyMirror(server.pool, n.db, (x) => told.push(x)).sync();
    expect(told).toEqual([{ keys: 1, seats: 1 }]);
    expect(t.keyById('k-later')!.revoked_at).toBeGreaterThanOrEqual(before - 60_000); // PostgreSQL's clock
    expect(t.seatById('s-later')).toBeUndefined();
    expect(t.keyById('k-kept')!.revoked_at).toBeNull();
    expect(t.seatById('s-kept')).toBeDefined();
    // Nothing more to find at the next start.
    await new TenancyMirror(server.pool, n.db, (x) => told.push(x)).sync();
    expect(told).toHaveLength(1);
  });

  it('nodes starting together bootstrap one operator customer and one management key; the SQLite bootstrap then finds them', async () => {
    const fresh = await migratedDatabase(server.engine);
    try {
      const [x, y, z] = [new PgTenancy(fresh.pool), new PgTenancy(fresh.pool), new PgTenancy(fresh.pool)];
      const results = await Promise.all([x.bootstrapOperator(false, T), y.bootstrapOperator(false, T), z.bootstrapOperator(false, T)]);
      expect(new Set(results.map((r) => r.customerId)).size).toBe(1);
      const created = results.flatMap((r) => (r.createdKey ? [r.createdKey] : []));
      expect(created).toHaveLength(1);
      expect(await x.bootstrapOperator(false, T + 1)).toEqual({ customerId: results[0]!.customerId }); // later starts: nothing new
      const n = node();
      await new TenancyMirror(fresh.pool, n.db).sync();
      const dir = mkdtempSync(join(tmpdir(), 'tagw-boot-'));
      dirs.push(dir);
      const local = bootstrap(new TenancyStore(n.db), dir, undefined, T + 2);
      expect(local).toEqual({ customerId: results[0]!.customerId, bootstrapFile: join(dir, 'bootstrap.json') });
      const [, id, secret] = /^tagw_m_([0-9a-f]+)_(.+)$/.exec(created[0]!) ?? [];
      expect(new TenancyStore(n.db).keyById(id!)).toMatchObject({ kind: 'management', hash: hashSecret(secret!), revoked_at: null });
      // With GATEWAY_MANAGEMENT_KEY configured, no key is made; the customer still is, once.
      const other = await migratedDatabase(server.engine);
      try {
        const t = new PgTenancy(other.pool);
        const [a, b] = await Promise.all([t.bootstrapOperator(true, T), t.bootstrapOperator(true, T)]);
        expect(a).toEqual(b);
        expect((await other.pool.query('SELECT count(*)::int AS n FROM keys')).rows[0].n).toBe(0);
      } finally {
        await other.pool.end();
      }
    } finally {
      await fresh.pool.end();
    }
  });

  it('a transaction that commits after a pass that began while it ran is still copied by the next pass', async () => {
    const pg = new PgTenancy(server.pool);
    const n = node();
    await n.mirror.sync();
    const slow = await server.pool.connect();
    try {
      await slow.query('BEGIN');
      await slow.query('INSERT INTO customers (id, name, created_at) VALUES ($1, $2, $3)', ['late', 'late customer', T]);
      await pg.createCustomer('early', 'early customer', T); // starts after, commits first
      await n.mirror.sync();
      const customer = n.db.prepare<[string], { name: string }>('SELECT name FROM customers WHERE id = ?');
      expect(customer.get('early')?.name).toBe('early customer');
      expect(customer.get('late')).toBeUndefined();
      await slow.query('COMMIT');
      await n.mirror.sync();
      expect(customer.get('late')?.name).toBe('late customer');
    } finally {
      slow.release();
    }
  });

  it('a pass asked for after a write copies it, even while an earlier pass (its snapshot older than the write) still runs', async () => {
    const pg = new PgTenancy(server.pool);
    const n = node();
    await n.mirror.sync();
    // Holds a pass after it took its snapshot: it reads audit_log last, which this transaction locks.
    const holder = await server.pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('LOCK TABLE audit_log IN ACCESS EXCLUSIVE MODE');
      const earlier = n.mirror.sync();
      await until(async () => (await server.pool.query("SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%FROM audit_log%'")).rowCount === 1, 'the pass to wait on the lock');
      await pg.insertKey(key('k-after')); // committed after the running pass's snapshot
      const asked = n.mirror.sync(); // what writeTenancy does after its write
      await holder.query('COMMIT');
      await earlier;
      await asked;
      expect(new TenancyStore(n.db).keyById('k-after')).toMatchObject({ customer_id: 'c1' });
    } finally {
      holder.release();
    }
  });

  it('a pass tells what it changed that a node caches (revoked or changed keys, new limits, removed seats), so a node that missed the write\'s notice drops them; nothing at the first pass, nor for a key\'s last use', async () => {
    const pg = new PgTenancy(server.pool);
    const c = 'c-changes';
    await pg.createCustomer(c, 'changes', T);
    const k = (id: string, seat: string | null = null) => ({ ...key(id, seat), customer_id: c });
    await pg.insertSeat({ id: 's-gone', customer_id: c, private_hosting: 0, region: null, created_at: T });
    await pg.insertSeat({ id: 's-kept-2', customer_id: c, private_hosting: 0, region: null, created_at: T });
    for (const x of [k('k-rev'), k('k-lim'), k('k-rep'), k('k-used'), k('k-seat', 's-gone')]) await pg.insertKey(x);
    const n = node();
    const told: Array<{ keys: string[]; limits: string[]; accounts: string[] }> = [];
    n.mirror.changed = (x) => told.push(x);
    await n.mirror.sync(); // the first pass: nothing is cached yet
    expect(told).toEqual([]);

    expect(await pg.revokeKey('k-rev', c, T + 1)).toBe(true);
    expect(await pg.setKeyLimits('k-lim', c, { requestsPerSec: 1, ordersPerSec: null })).toBe(true);
    expect(await pg.replaceKey('k-rep', c, k('k-rep-new'), T + 2)).toBe(true);
    await pg.touchKeys([['k-used', T + 3]]);
    expect(await pg.removeSeat('s-gone', c, T + 4)).toEqual(['k-seat']);
    await pg.insertSeat({ id: 's-new', customer_id: c, private_hosting: 0, region: null, created_at: T });
    await n.mirror.sync();
    expect(told).toHaveLength(1);
    expect({ keys: [...told[0]!.keys].sort(), limits: told[0]!.limits, accounts: told[0]!.accounts })
      .toEqual({ keys: ['k-rep', 'k-rev', 'k-seat'], limits: ['k-lim'], accounts: ['s-gone'] });

    // Copied again (a late commit's horizon) or changed in nothing a cache holds: nothing told.
    await pg.touchKeys([['k-used', T + 5], ['k-lim', T + 5]]);
    await pg.setKeyLimits('k-lim', c, { requestsPerSec: 1, ordersPerSec: null });
    await n.mirror.sync();
    expect(told).toHaveLength(1);
    expect(new TenancyStore(n.db).keyById('k-used')!.last_used_at).toBe(T + 5);
  });

  it('a pass that reads a key\'s row before it writes it waits for a shard holding the SQLite write lock, then copies (deferred, it failed with SQLITE_BUSY once the shard committed: a 500 on the write that asked for it)', async () => {
    const pg = new PgTenancy(server.pool);
    const c = 'c-busy';
    await pg.createCustomer(c, 'busy', T);
    await pg.insertKey({ ...key('k-busy'), customer_id: c });
    const n = node();
    await n.mirror.sync();
    const told: string[][] = [];
    n.mirror.changed = (x) => told.push(x.keys);
    expect(await pg.revokeKey('k-busy', c, T + 1)).toBe(true);
    // A shard's write (any row) holding the lock while the pass reads PostgreSQL, committed while it waits.
    const shard = otherWriter(n.file, 400, "UPDATE customers SET name = 'busy too' WHERE id = 'c-busy'");
    await shard.locked;
    await n.mirror.sync();
    await shard.done;
    expect(new TenancyStore(n.db).keyById('k-busy')!.revoked_at).toBe(T + 1);
    expect(told).toEqual([['k-busy']]);
  });
});
