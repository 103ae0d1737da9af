// The audit outbox (src/cluster/auditOutbox.ts) over a fake writer standing for PostgreSQL and the
// real SQLite queue: rows made while the database is unreachable are written, once each and in
// order, once it is back; other failures are refused to the caller as before; rows still queued when
// the node stops (or dies) are on disk and written by the next process on the same DATA_DIR.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { AuditOutbox } from '../../src/cluster/auditOutbox.js';
import { createLogger } from '../../src/log.js';
import type { NewAuditRow } from '../../src/store/audit.js';
import { AuditQueueStore } from '../../src/store/auditQueue.js';
import { openDb, type Db } from '../../src/store/db.js';

const row = (target: string): NewAuditRow => ({ customer_id: 'c', at: 1, actor_key_id: 'k', action: 'key.create', target, detail_json: null });
const unreachable = () => Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5'), { code: 'ECONNREFUSED' });

const dirs: string[] = [];
const dbs: Db[] = [];
afterEach(() => {
  for (const db of dbs.splice(0)) db.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** PostgreSQL as the fake sees it: the rows written, keyed by reference (a repeat adds nothing). */
function fakeDb() {
  return { up: true, rows: [] as Array<string | null>, refs: new Set<string>(), other: undefined as Error | undefined };
}

function setup(dir?: string, db = fakeDb()) {
  const d = dir ?? mkdtempSync(join(tmpdir(), 'tagw-audit-outbox-'));
  if (!dir) dirs.push(d);
  const sqlite = openDb(d);
  dbs.push(sqlite);
  const logs: string[] = [];
  const outbox = new AuditOutbox({
    queue: new AuditQueueStore(sqlite),
    write: async (r, ref) => {
      await Promise.resolve();
      if (!db.up) throw unreachable();
      if (db.other) throw db.other;
      if (db.refs.has(ref)) return;
      db.refs.add(ref);
      db.rows.push(r.target);
    },
    log: createLogger('debug', {}, (line) => logs.push(line)),
  });
  return { db, logs, outbox, dir: d, sqlite };
}

describe('AuditOutbox', () => {
  it('keeps rows made while the database is unreachable and writes them once each, in order, when it is back', async () => {
    const { db, outbox } = setup();
    await outbox.add(row('a'));
    db.up = false;
    // Each caller is answered (its row kept), none rejected.
    await Promise.all(['b', 'c', 'd'].map((t) => outbox.add(row(t))));
    expect(outbox.pending).toBe(3);
    await outbox.retry();
    expect(outbox.pending).toBe(3);
    db.up = true;
    // A new row while some wait lands behind them.
    await outbox.add(row('e'));
    await outbox.retry();
    expect(db.rows).toEqual(['a', 'b', 'c', 'd', 'e']);
    expect(outbox.pending).toBe(0);
  });

  it('a row failing for another reason is refused to its caller and not kept', async () => {
    const { db, outbox } = setup();
    db.other = new Error('value too long');
    await expect(outbox.add(row('x'))).rejects.toThrow('value too long');
    expect(outbox.pending).toBe(0);
    db.other = undefined;
    await outbox.add(row('y'));
    expect(db.rows).toEqual(['y']);
  });

  it('a kept row that later fails for another reason is logged and dropped; the rows behind it are written', async () => {
    const { db, logs, outbox } = setup();
    db.up = false;
    await outbox.add(row('p'));
    await outbox.add(row('q'));
    db.up = true;
    db.other = new Error('bad row');
    const flushed = outbox.retry();
    // The first write fails otherwise; the next one succeeds.
    await Promise.resolve();
    db.other = undefined;
    await flushed;
    expect(db.rows).toEqual(['q']);
    expect(logs.filter((l) => l.includes('audit log write failed') && l.includes('bad row'))).toHaveLength(1);
  });

  it('rows still queued when the process stops are on disk: the next process on the same SQLite writes them, once each, in order', async () => {
    const first = setup();
    first.db.up = false;
    for (const t of ['1', '2', '3']) await first.outbox.add(row(t));
    expect(first.outbox.pending).toBe(3);
    // The process is gone (its memory with it); PostgreSQL comes back.
    first.sqlite.close();
    dbs.splice(dbs.indexOf(first.sqlite), 1);
    first.db.up = true;
    const next = setup(first.dir, first.db);
    expect(next.outbox.pending).toBe(3);
    await next.outbox.retry();
    expect(first.db.rows).toEqual(['1', '2', '3']);
    expect(next.outbox.pending).toBe(0);
  });

  it('a row PostgreSQL got before the node could take it off its queue (a crash in between) is not written twice', async () => {
    const { db, outbox, sqlite } = setup();
    db.up = false;
    await outbox.add(row('once'));
    const queued = new AuditQueueStore(sqlite).first()!;
    // PostgreSQL committed it; the node died before its delete.
    db.refs.add(queued.ref);
    db.rows.push(queued.row.target);
    db.up = true;
    await outbox.retry();
    expect(db.rows).toEqual(['once']);
    expect(outbox.pending).toBe(0);
  });
});
