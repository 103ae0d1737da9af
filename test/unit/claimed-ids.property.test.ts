// ClaimedIds (src/store/claimedIds.ts): an in-memory filter in front of the idempotency lookup.
// "No" must be certain for every id written and not long expired, whatever the sequence of writes,
// rotations of its generations and clock moves; and a claim of a new id then costs no SQLite read.
import Database from 'better-sqlite3';
import fc from 'fast-check';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ClaimedIds } from '../../src/store/claimedIds.js';
import { openDb, type Db } from '../../src/store/db.js';
import { IdempotencyStore } from '../../src/store/idempotency.js';

const HOUR = 3_600_000;
const dirs: string[] = [];
const dbs: { close(): void }[] = [];
afterEach(() => {
  for (const d of dbs.splice(0)) d.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('ClaimedIds', () => {
  it('property: never "no" for an id added whose record has not expired (capacity 3: generations rotate)', () => {
    type Op = { k: 'add'; acct: number; id: number; ttlH: number } | { k: 'wait'; h: number };
    const op: fc.Arbitrary<Op> = fc.oneof(
      { weight: 4, arbitrary: fc.record({ k: fc.constant('add' as const), acct: fc.integer({ min: 0, max: 3 }), id: fc.integer({ min: 0, max: 40 }), ttlH: fc.integer({ min: 0, max: 30 }) }) },
      fc.record({ k: fc.constant('wait' as const), h: fc.integer({ min: 0, max: 20 }) }),
    );
    fc.assert(fc.property(fc.array(op, { maxLength: 80 }), (ops) => {
      let now = 1_000_000;
      const ids = new ClaimedIds({ now: () => now }, 3);
      const written = new Map<string, number>(); // key -> latest expiry
      for (const o of ops) {
        if (o.k === 'wait') now += o.h * HOUR;
        else {
          const exp = now + o.ttlH * HOUR;
          ids.add(`a${o.acct}`, `o${o.id}`, exp);
          const k = `a${o.acct}\u0000o${o.id}`;
          written.set(k, Math.max(written.get(k) ?? 0, exp));
        }
        for (const [k, exp] of written) {
          const [a, id] = k.split('\u0000') as [string, string];
          if (exp > now) expect(ids.mayHold(a, id), `${k} expires at ${exp}, now ${now}`).toBe(true);
        }
      }
    }), { numRuns: 300 });
  });

  it('says "no" for nearly every id never added', () => {
    const ids = new ClaimedIds({ now: () => 0 });
    for (let i = 0; i < 20_000; i++) ids.add(`acct-${i % 100}`, `order-${i}`, 86_400_000);
    let maybe = 0;
    for (let i = 0; i < 20_000; i++) if (ids.mayHold(`acct-${i % 100}`, `fresh-${i}`)) maybe++;
    expect(maybe).toBeLessThan(100);
    for (let i = 0; i < 20_000; i += 997) expect(ids.mayHold(`acct-${i % 100}`, `order-${i}`)).toBe(true);
  });
});

describe('IdempotencyStore.exists with ClaimedIds', () => {
  const open = () => {
    const dir = mkdtempSync(join(tmpdir(), 'tagw-claimed-'));
    dirs.push(dir);
    const db: Db = openDb(dir);
    dbs.push(db);
    return { dir, db };
  };

  it('finds the records an earlier store wrote, and its own', () => {
    const { db } = open();
    const first = new IdempotencyStore(db);
    first.insertSent('acc', 'old-1', 'h', 1, Date.now() + HOUR);
    const second = new IdempotencyStore(db); // a restarted shard
    expect(second.exists('acc', 'old-1')).toBe(true);
    expect(second.exists('acc', 'new-1')).toBe(false);
    second.insertSent('acc', 'new-1', 'h', 2, Date.now() + HOUR);
    expect(second.exists('acc', 'new-1')).toBe(true);
    expect(second.exists('other', 'old-1')).toBe(false);
  });

  it('a new id is answered without reading SQLite; a recorded one still reads it', () => {
    const { dir, db } = open();
    const store = new IdempotencyStore(db);
    store.insertSent('acc', 'known', 'h', 1, Date.now() + HOUR);
    expect(store.exists('acc', 'known')).toBe(true);
    // The records' table goes away under the store: a lookup now fails.
    const other = new Database(join(dir, 'tagw.sqlite'));
    dbs.push(other);
    other.exec('ALTER TABLE idempotency RENAME TO idempotency_gone');
    expect(store.exists('acc', 'fresh')).toBe(false);
    expect(() => store.exists('acc', 'known')).toThrow(/no such table/);
  });
});
