// Schema migrations: numbered, each in its own transaction, refused on a database newer than the
// code, and reported without being run (`tagw migrate --check`).
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { AuditStore } from '../../src/store/audit.js';
import { migrate } from '../../src/store/db.js';
import { IdempotencyStore } from '../../src/store/idempotency.js';
import { checkMigrations, migrationPlan, MIGRATIONS, runMigrations, SCHEMA_VERSION, SchemaTooNewError } from '../../src/store/migrations.js';

const at = (version: number, db = new Database(':memory:')) => {
  for (let v = 0; v < version; v++) db.exec(MIGRATIONS[v]!.sql);
  db.pragma(`user_version = ${version}`);
  return db;
};
const schemaOf = (db: Database.Database, name: string) =>
  (db.prepare('SELECT sql FROM sqlite_master WHERE name = ?').get(name) as { sql: string } | undefined)?.sql;
const wholeSchema = (db: Database.Database) =>
  db.prepare("SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY name").all();

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
const tempFile = () => {
  const d = mkdtempSync(join(tmpdir(), 'tagw-mig-'));
  dirs.push(d);
  return join(d, 'tagw.sqlite');
};

describe('migration 3: idempotency records WITHOUT ROWID', () => {
  it('moves the records of a version-2 database across, intact, with their expiry index', () => {
    const db = at(2);
    db.prepare(`INSERT INTO idempotency VALUES ('acc-1', 'ord-1', 'h1', 'result', 200, '{"ticket":5}', 1, 99), ('acc-1', 'ord-2', 'h2', 'sent', NULL, NULL, 2, 98)`).run();
    db.exec(MIGRATIONS[2]!.sql);
    expect(schemaOf(db, 'idempotency')).toMatch(/WITHOUT ROWID/);
    expect(schemaOf(db, 'idempotency_expiry')).toContain('expires_at');
    expect(db.prepare('SELECT * FROM idempotency ORDER BY client_order_id').all()).toEqual([
      { account_id: 'acc-1', client_order_id: 'ord-1', params_hash: 'h1', phase: 'result', status: 200, result_json: '{"ticket":5}', created_at: 1, expires_at: 99 },
      { account_id: 'acc-1', client_order_id: 'ord-2', params_hash: 'h2', phase: 'sent', status: null, result_json: null, created_at: 2, expires_at: 98 },
    ]);
    // Still one record per (account, id).
    expect(() => db.prepare(`INSERT INTO idempotency VALUES ('acc-1', 'ord-1', 'h', 'sent', NULL, NULL, 3, 97)`).run()).toThrow(/UNIQUE|PRIMARY/);
  });
});

describe('migration 11: idempotency records appended, found by a unique index', () => {
  const COLUMNS = 'account_id, client_order_id, params_hash, phase, status, result_json, created_at, expires_at';
  it('moves the records across intact, in the order they were written, still one per (account, id)', () => {
    const db = at(10);
    db.prepare(`INSERT INTO idempotency VALUES ('acc-2', 'ord-1', 'h3', 'uncertain', NULL, NULL, 3, 97), ('acc-1', 'ord-1', 'h1', 'result', 200, '{"ticket":5}', 1, 99), ('acc-1', 'ord-2', 'h2', 'sent', NULL, NULL, 2, 98)`).run();
    // Up to 14, the last version with this index (migration 15 moved the keys out of it).
    for (let v = 10; v < 14; v++) db.exec(MIGRATIONS[v]!.sql);
    expect(schemaOf(db, 'idempotency')).not.toMatch(/WITHOUT ROWID/);
    expect(schemaOf(db, 'idempotency_key')).toMatch(/UNIQUE INDEX idempotency_key ON idempotency\(account_id, client_order_id\)/);
    expect(schemaOf(db, 'idempotency_expiry')).toContain('expires_at');
    expect(db.prepare(`SELECT ${COLUMNS} FROM idempotency ORDER BY rowid`).all()).toEqual([
      { account_id: 'acc-1', client_order_id: 'ord-1', params_hash: 'h1', phase: 'result', status: 200, result_json: '{"ticket":5}', created_at: 1, expires_at: 99 },
      { account_id: 'acc-1', client_order_id: 'ord-2', params_hash: 'h2', phase: 'sent', status: null, result_json: null, created_at: 2, expires_at: 98 },
      { account_id: 'acc-2', client_order_id: 'ord-1', params_hash: 'h3', phase: 'uncertain', status: null, result_json: null, created_at: 3, expires_at: 97 },
    ]);
    const insert = db.prepare(`INSERT INTO idempotency (${COLUMNS}) VALUES (?, ?, 'h', 'sent', NULL, NULL, 4, 96)`);
    expect(() => insert.run('acc-1', 'ord-1')).toThrow(/UNIQUE/);
    // A new record goes after the others (the right-most leaf).
    insert.run('acc-0', 'ord-0');
    expect(db.prepare("SELECT rowid AS id FROM idempotency WHERE account_id = 'acc-0'").get()).toEqual({ id: 4 });
  });
});

describe('migration 15: idempotency keys moved in bulk, off the order\'s commit', () => {
  const COLUMNS = 'account_id, client_order_id, params_hash, phase, status, result_json, created_at, expires_at';
  it('carries every record across, each found by its key; a second claim of one is refused; new records land above the moved ones', () => {
    const db = at(14);
    const insert = db.prepare(`INSERT INTO idempotency (${COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`);
    const rows = [
      ['acc-1', 'ord-1', 'h1', 'result', 200, '{"ticket":5}', 1, 9e12],
      ['acc-1', 'ord-2', 'h2', 'sent', null, null, 2, 9e12],
      ['acc-2', 'ord-1', 'h3', 'uncertain', null, null, 3, 9e12],
      ['acc-2', 'gone', 'h4', 'result', 200, '{}', 4, 9e12],
      ['acc-3', 'ord-9', 'h5', 'result', 400, '{"retcode":10019}', 5, 9e12],
    ] as const;
    for (const r of rows) insert.run(...r);
    // A gap in the ids, as deleted records leave.
    db.prepare("DELETE FROM idempotency WHERE client_order_id = 'gone'").run();
    migrate(db);
    expect(db.pragma('user_version', { simple: true })).toBe(MIGRATIONS.length);
    expect(schemaOf(db, 'idempotency_key')).toBeUndefined();
    expect(schemaOf(db, 'idempotency_keys')).toMatch(/WITHOUT ROWID/);
    expect(db.prepare('SELECT account_id, client_order_id, record, expires_at FROM idempotency_keys ORDER BY record').all()).toEqual([
      { account_id: 'acc-1', client_order_id: 'ord-1', record: 1, expires_at: 9e12 },
      { account_id: 'acc-1', client_order_id: 'ord-2', record: 2, expires_at: 9e12 },
      { account_id: 'acc-2', client_order_id: 'ord-1', record: 3, expires_at: 9e12 },
      { account_id: 'acc-3', client_order_id: 'ord-9', record: 5, expires_at: 9e12 },
    ]);
    expect(db.prepare('SELECT through FROM idempotency_moved').pluck().get()).toBe(5);
    const store = new IdempotencyStore(db, { now: () => 10 }, { scheduler: { setTimeout: () => 0, clearTimeout: () => {} } });
    for (const [account, id, hash, phase, status, json, created, expires] of rows) {
      if (id === 'gone') {
        expect(store.get(account, id)).toBeUndefined();
        continue;
      }
      expect(store.exists(account, id)).toBe(true);
      expect(store.get(account, id)).toEqual({ account_id: account, client_order_id: id, params_hash: hash, phase, status, result_json: json, created_at: created, expires_at: expires });
      expect(store.insertSent(account, id, 'again', 10, 9e12)).toBe(false);
    }
    expect(store.unsettled(10).map((r) => r.client_order_id)).toEqual(['ord-2']);
    expect(store.insertSent('acc-2', 'gone', 'h6', 10, 9e12)).toBe(true);
    expect(db.prepare("SELECT id FROM idempotency WHERE client_order_id = 'gone'").pluck().get()).toBe(6);
    expect(store.moveKeys()).toBe(1);
    expect(db.prepare('SELECT count(*) FROM idempotency_keys').pluck().get()).toBe(5);
  });
});

/** The version of the migration that creates the gateway session tables. */
const SESSIONS = MIGRATIONS.findIndex((m) => m.name.startsWith('gateway sessions')) + 1;

describe('migration: gateway sessions', () => {
  it('runs on an older database that already has the tables (created unnumbered by earlier builds)', () => {
    const db = at(SESSIONS - 1);
    db.exec(MIGRATIONS[SESSIONS - 1]!.sql);
    db.prepare(`INSERT INTO gateway_sessions VALUES ('h', 'acc', 'cust', 'P5', 'sealed', 'live', 1, NULL)`).run();
    expect(runMigrations(db)).toEqual(MIGRATIONS.slice(SESSIONS - 1).map((_, i) => SESSIONS + i));
    expect(db.prepare('SELECT account_id FROM gateway_sessions').all()).toEqual([{ account_id: 'acc' }]);
  });
});

describe('migration 14: audit rows with a unique reference', () => {
  it('keeps the rows before it (no reference); a row written again under its reference is not added twice', () => {
    const db = at(13);
    db.prepare("INSERT INTO audit_log (customer_id, at, actor_key_id, action, target, detail_json) VALUES ('c', 1, 'k', 'key.create', 't', NULL)").run();
    migrate(db);
    const audit = new AuditStore(db);
    const row = { customer_id: 'c', at: 2, actor_key_id: 'k', action: 'account.upgrade', target: 'acc', detail_json: null };
    expect(audit.add({ ...row, ref: 'r-1' })).toBeGreaterThan(0);
    expect(audit.add({ ...row, ref: 'r-1' })).toBe(0);
    audit.add(row);
    audit.add(row);
    expect(audit.list('c', { limit: 10 }).map((r) => [r.action, r.ref])).toEqual([
      ['account.upgrade', null], ['account.upgrade', null], ['account.upgrade', 'r-1'], ['key.create', null],
    ]);
  });
});

describe('runMigrations', () => {
  it('from every older version, ends with the schema of a fresh database', () => {
    const fresh = new Database(':memory:');
    expect(runMigrations(fresh)).toEqual(MIGRATIONS.map((_, i) => i + 1));
    for (let v = 0; v <= SCHEMA_VERSION; v++) {
      const db = at(v);
      expect(runMigrations(db)).toEqual(MIGRATIONS.slice(v).map((_, i) => v + i + 1));
      expect(wholeSchema(db)).toEqual(wholeSchema(fresh));
      expect(runMigrations(db)).toEqual([]);
    }
  });

  it('a migration that fails leaves the database at the version before it, with nothing of it applied', () => {
    const db = at(2);
    db.prepare(`INSERT INTO idempotency VALUES ('acc-1', 'ord-1', 'h1', 'result', 200, '{}', 1, 99)`).run();
    // Makes migration 3 fail at its first statement (CREATE TABLE idempotency_v3).
    db.exec('CREATE TABLE idempotency_v3 (x)');
    expect(() => runMigrations(db)).toThrow(/idempotency_v3 already exists/);
    expect(db.pragma('user_version', { simple: true })).toBe(2);
    expect(schemaOf(db, 'idempotency')).not.toMatch(/WITHOUT ROWID/);
    expect(db.prepare('SELECT count(*) AS n FROM idempotency').get()).toEqual({ n: 1 });
    expect(schemaOf(db, 'gateway_sessions')).toBeUndefined();
  });

  it('a step that fails after earlier statements of the same migration rolled them back too', () => {
    const db = at(SESSIONS - 1);
    // The sessions migration creates gateway_sessions, then its index: a table named like the
    // index makes the second statement fail after the first succeeded.
    db.exec('CREATE TABLE gateway_sessions_live (x)');
    expect(() => runMigrations(db)).toThrow();
    expect(db.pragma('user_version', { simple: true })).toBe(SESSIONS - 1);
    expect(schemaOf(db, 'gateway_sessions')).toBeUndefined();
  });

  it('refuses a database newer than the code, and leaves it untouched', () => {
    const file = tempFile();
    const db = new Database(file);
    db.pragma('user_version = 99');
    const err = (() => {
      try {
        runMigrations(db);
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(err).toBeInstanceOf(SchemaTooNewError);
    expect((err as Error).message).toContain(`schema version 99 is newer than this build's ${SCHEMA_VERSION}`);
    expect((err as Error).message).not.toContain('\n');
    expect(db.pragma('user_version', { simple: true })).toBe(99);
    expect(wholeSchema(db)).toEqual([]);
    db.close();
  });

  it('a second connection (a shard opening the file after main) finds nothing left to run: each migration applied once', () => {
    const file = tempFile();
    const a = new Database(file);
    const b = new Database(file);
    b.pragma('busy_timeout = 5000');
    at(1, a);
    const ranA = runMigrations(a);
    const ranB = runMigrations(b);
    expect([...ranA, ...ranB].sort((x, y) => x - y)).toEqual(MIGRATIONS.slice(1).map((_, i) => i + 2));
    expect(b.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
    a.close();
    b.close();
  });
});

describe('migrationPlan / checkMigrations (tagw migrate --check)', () => {
  it('names what would run and changes nothing', () => {
    const file = tempFile();
    const db = at(2, new Database(file));
    db.close();
    const plan = checkMigrations(file);
    expect(plan).toEqual({
      current: 2, target: SCHEMA_VERSION, tooNew: false,
      pending: MIGRATIONS.slice(2).map((m, i) => ({ version: 3 + i, name: m.name })),
    });
    const after = new Database(file, { readonly: true });
    expect(after.pragma('user_version', { simple: true })).toBe(2);
    after.close();
  });

  it('a missing database would get every migration; a current one none; a newer one is flagged', () => {
    expect(checkMigrations(join(tmpdir(), 'tagw-no-such-dir', 'tagw.sqlite')).pending).toHaveLength(SCHEMA_VERSION);
    const db = new Database(':memory:');
    runMigrations(db);
    expect(migrationPlan(db)).toMatchObject({ current: SCHEMA_VERSION, pending: [], tooNew: false });
    db.pragma(`user_version = ${SCHEMA_VERSION + 1}`);
    expect(migrationPlan(db)).toMatchObject({ pending: [], tooNew: true });
  });
});

describe('migration 10: the simulator checkpoint format is part of the schema version', () => {
  // Builds up to schema 9 read only version-1 checkpoints (positions inline in the account row):
  // on a version-2 checkpoint they would start every account without its open positions. The
  // bump makes such a build refuse the DATA_DIR (SchemaTooNewError, exit 5) instead.
  it('a migrated database is newer than every build that reads only version-1 checkpoints', () => {
    const db = new Database(':memory:');
    runMigrations(db);
    const v2 = MIGRATIONS.findIndex((m) => m.name.startsWith('simulator checkpoints v2')) + 1;
    expect(v2).toBe(10);
    expect(db.pragma('user_version', { simple: true })).toBeGreaterThanOrEqual(v2);
    db.close();
  });
});
