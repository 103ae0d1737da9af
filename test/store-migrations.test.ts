// Schema migrations run in order on an existing database and keep its rows.
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { migrate } from '../src/store/db.js';
import { MIGRATIONS } from '../src/store/migrations.js';

const at = (version: number) => {
  const db = new Database(':memory:');
  for (let v = 0; v < version; v++) db.exec(MIGRATIONS[v]!);
  db.pragma(`user_version = ${version}`);
  return db;
};
const schemaOf = (db: Database.Database, name: string) =>
  (db.prepare('SELECT sql FROM sqlite_master WHERE name = ?').get(name) as { sql: string } | undefined)?.sql;

describe('migration 3: idempotency records WITHOUT ROWID', () => {
  it('moves the records of a version-2 database across, intact, with their expiry index', () => {
    const db = at(2);
    db.prepare(`INSERT INTO idempotency VALUES ('acc-1', 'ord-1', 'h1', 'result', 200, '{"ticket":5}', 1, 99), ('acc-1', 'ord-2', 'h2', 'sent', NULL, NULL, 2, 98)`).run();
    migrate(db);
    expect(db.pragma('user_version', { simple: true })).toBe(MIGRATIONS.length);
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
