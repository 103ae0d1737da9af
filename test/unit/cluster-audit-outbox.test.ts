// The audit outbox (src/cluster/auditOutbox.ts) over a fake writer standing for PostgreSQL: rows made
// while the database is unreachable are written, once each and in order, once it is back; other
// failures are refused to the caller as before; a full outbox drops its oldest and says how many.
import { describe, expect, it } from 'vitest';
import { AuditOutbox } from '../../src/cluster/auditOutbox.js';
import { createLogger } from '../../src/log.js';
import type { NewAuditRow } from '../../src/store/audit.js';

const row = (target: string): NewAuditRow => ({ customer_id: 'c', at: 1, actor_key_id: 'k', action: 'key.create', target, detail_json: null });
const unreachable = () => Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5'), { code: 'ECONNREFUSED' });

function setup(limit?: number) {
  const db = { up: true, rows: [] as Array<string | null>, other: undefined as Error | undefined };
  const logs: string[] = [];
  const outbox = new AuditOutbox({
    write: async (r) => {
      await Promise.resolve();
      if (!db.up) throw unreachable();
      if (db.other) throw db.other;
      db.rows.push(r.target);
    },
    log: createLogger('debug', {}, (line) => logs.push(line)),
    ...(limit === undefined ? {} : { limit }),
  });
  return { db, logs, outbox };
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

  it('bounded: beyond the limit the oldest rows are dropped, and the next retry logs how many', async () => {
    const { db, logs, outbox } = setup(3);
    db.up = false;
    for (const t of ['1', '2', '3', '4', '5']) await outbox.add(row(t));
    expect(outbox.pending).toBe(3);
    db.up = true;
    await outbox.retry();
    expect(db.rows).toEqual(['3', '4', '5']);
    const dropped = logs.filter((l) => l.includes('audit rows dropped'));
    expect(dropped).toHaveLength(1);
    expect(JSON.parse(dropped[0]!)).toMatchObject({ dropped: 2, limit: 3 });
  });
});
