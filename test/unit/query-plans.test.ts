// Every statement the stores prepare is checked against SQLite's query planner: a lookup that has
// to read a whole table (or, on the simulator's journal, every account's rows after a time) makes
// its cost grow with the number of accounts (issue 19: /ConnectEx at 20k accounts, rehydration N²).
// The few statements that read everything on purpose are named below with the reason.
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { AccountStore } from '../../src/store/accounts.js';
import { AuditStore } from '../../src/store/audit.js';
import { openDb } from '../../src/store/db.js';
import { IdempotencyStore } from '../../src/store/idempotency.js';
import { SessionStore } from '../../src/store/sessions.js';
import { SqliteSimStore } from '../../src/store/simStore.js';
import { TenancyStore } from '../../src/store/tenancy.js';

/** Statements that read a whole table by design (start-up loads, operator listings). */
const WHOLE_TABLE_BY_DESIGN: readonly RegExp[] = [
  /FROM account_bindings b JOIN seats s ON s\.id = b\.seat_id WHERE s\.removed_at IS NULL$/, // start-up: every live binding, once
  /^SELECT \* FROM gateway_sessions WHERE state = 'live'$/, // start-up: every live session handle (a partial index holds just those)
  /^SELECT id FROM seats WHERE removed_at IS NULL$/, // /v1/status: every live seat, counted per shard, again only after a seat came or went
];

const dir = mkdtempSync(join(tmpdir(), 'tagw-plans-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function preparedBy(build: (db: Database.Database) => void): string[] {
  const db = openDb(dir);
  const seen: string[] = [];
  const prepare = db.prepare.bind(db);
  db.prepare = ((sql: string) => {
    seen.push(sql);
    return prepare(sql);
  }) as typeof db.prepare;
  build(db);
  db.prepare = prepare;
  const plans = seen.filter((sql) => /^\s*(SELECT|UPDATE|DELETE)/i.test(sql) && /\bWHERE\b/i.test(sql));
  db.close();
  return plans;
}

function plan(db: Database.Database, sql: string): string[] {
  const params = (sql.match(/\?/g) ?? []).map(() => null);
  const named = [...sql.matchAll(/[@:$](\w+)/g)].map((m) => m[1]!);
  const args = named.length > 0 ? [Object.fromEntries(named.map((n) => [n, null]))] : params;
  return (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...args) as { detail: string }[]).map((r) => r.detail);
}

describe('query plans of the stores', () => {
  const statements = preparedBy((db) => {
    new AccountStore(db);
    new AuditStore(db);
    new IdempotencyStore(db);
    new SessionStore(db);
    new TenancyStore(db);
    new SqliteSimStore(db, { groupCommit: false });
  });

  it('finds the statements (the check is not vacuous)', () => {
    expect(statements.length).toBeGreaterThan(15);
    expect(statements.some((s) => /account_bindings/.test(s) && /login = \?/.test(s))).toBe(true);
    // A load finds the account's rows after its checkpoint from its mark (sim_dirty), by key.
    expect(statements.some((s) => /FROM sim_dirty WHERE server = \? AND login = \?/.test(s))).toBe(true);
  });

  it('no lookup scans a whole table or every account\'s journal', () => {
    const db = openDb(dir);
    new SqliteSimStore(db, { groupCommit: false });
    // A partial index holds only the rows its WHERE names (e.g. seats still building): scanning it
    // reads those, not the table.
    const partial = (db.prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND sql LIKE '% WHERE %'").all() as { name: string }[]).map((r) => r.name);
    const bad: string[] = [];
    for (const sql of statements) {
      if (WHOLE_TABLE_BY_DESIGN.some((re) => re.test(sql.replace(/\s+/g, ' ').trim()))) continue;
      const details = plan(db, sql);
      // "SCAN t" reads the whole table; on the journal, a search on (server, time_ms>?) alone reads
      // every account's rows after that time, which is the N² of a restart.
      const scans = details.filter((d) => /^SCAN \w+(?! USING (COVERING )?INDEX .* \()/.test(d) && !/^SCAN CONSTANT ROW/.test(d)
        && !partial.some((name) => new RegExp(`^SCAN \\w+ USING (COVERING )?INDEX ${name}$`).test(d)));
      const journalByTime = details.filter((d) => /sim_journal USING PRIMARY KEY \(server=\? AND time_ms>\?\)/.test(d) && /login = \?/.test(sql) && !/time_ms < \?/.test(sql));
      if (scans.length + journalByTime.length > 0) bad.push(`${sql.replace(/\s+/g, ' ').trim()}\n    -> ${details.join(' | ')}`);
    }
    db.close();
    expect(bad, bad.join('\n')).toEqual([]);
  });
});
