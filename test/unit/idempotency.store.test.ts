// IdempotencyStore.writeOnce: a claim settled in the transaction that claims it is written as one
// row in its last phase; what would have been an insert then updates gives the same row on disk.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openDb, type Db } from '../../src/store/db.js';
import { IdempotencyStore } from '../../src/store/idempotency.js';
import { otherWriter } from '../helpers/otherWriter.js';

const dbs: Db[] = [];
const dirs: string[] = [];
afterEach(() => {
  for (const d of dbs.splice(0)) d.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
const open = () => {
  const dir = mkdtempSync(join(tmpdir(), 'tagw-idem-store-'));
  dirs.push(dir);
  const db = openDb(dir);
  dbs.push(db);
  return { db, store: new IdempotencyStore(db) };
};
const row = (s: IdempotencyStore, id: string) => {
  const r = s.get('acc', id);
  return r && { phase: r.phase, status: r.status, result_json: r.result_json, params_hash: r.params_hash, created_at: r.created_at, expires_at: r.expires_at };
};

describe('IdempotencyStore.writeOnce', () => {
  it('writes each record as it is when the function returns, the same row as writes one by one', () => {
    const { store } = open();
    // A claim, then what may follow it in the same transaction.
    const cases: Record<string, (s: IdempotencyStore, id: string) => void> = {
      sent: () => {},
      result: (s, id) => s.setResult('acc', id, 200, '{"ticket":7}'),
      uncertain: (s, id) => s.setUncertain('acc', id),
      'uncertain-after-result': (s, id) => (s.setResult('acc', id, 200, '{}'), s.setUncertain('acc', id)),
      removed: (s, id) => s.remove('acc', id),
    };
    for (const [id, then] of Object.entries(cases)) {
      const claim = (key: string) => {
        expect(store.insertSent('acc', key, 'h', 1, 99)).toBe(true);
        then(store, key);
      };
      claim(`${id}-direct`);
      store.batch(() => store.writeOnce(() => claim(id)));
      expect(row(store, id)).toEqual(row(store, `${id}-direct`));
    }
    expect(row(store, 'result')).toMatchObject({ phase: 'result', status: 200, result_json: '{"ticket":7}' });
    expect(row(store, 'uncertain')).toMatchObject({ phase: 'uncertain' });
    expect(row(store, 'uncertain-after-result')).toMatchObject({ phase: 'result' });
    expect(row(store, 'removed')).toBeUndefined();
  });

  it('a claim that meets a record throws after the function, and the record is left as it was', () => {
    const { store } = open();
    store.insertSent('acc', 'x', 'h1', 1, 99);
    store.setResult('acc', 'x', 200, '{"first":true}');
    expect(() => store.batch(() => store.writeOnce(() => {
      store.insertSent('acc', 'x', 'h2', 2, 98);
      store.setResult('acc', 'x', 200, '{"second":true}');
    }))).toThrow(/already exists/);
    expect(row(store, 'x')).toMatchObject({ params_hash: 'h1', result_json: '{"first":true}' });
  });

  it('nothing is written when the function throws; outside it, writes go at once', () => {
    const { store } = open();
    expect(() => store.writeOnce(() => {
      store.insertSent('acc', 'y', 'h', 1, 99);
      throw new Error('action failed');
    })).toThrow('action failed');
    expect(store.exists('acc', 'y')).toBe(false);
    expect(store.insertSent('acc', 'y', 'h', 1, 99)).toBe(true);
    expect(store.exists('acc', 'y')).toBe(true);
    expect(store.insertSent('acc', 'y', 'h', 1, 99)).toBe(false);
  });
});

// A record's removal (a recovered record the embedded simulator never executed, a send that failed)
// reads its key, then deletes. Deferred, that transaction failed at once with SQLITE_BUSY when another
// connection (a shard's login taking its id block, a checkpoint) committed meanwhile: the record's
// actor errored and the retry of a crashed order answered 500 INTERNAL_ERROR (idempotency-crash, CI).
describe('IdempotencyStore removals beside another connection\'s write', () => {
  const removals: Record<string, (s: IdempotencyStore) => void> = {
    remove: (s) => s.remove('acc', 'r'),
    'batch of a removal': (s) => s.batch(() => s.remove('acc', 'r')),
  };
  for (const [name, removal] of Object.entries(removals)) {
    it(`${name}: waits for the other write lock and removes the record`, async () => {
      const { db, store } = open();
      store.insertSent('acc', 'r', 'h', 1, 99);
      const other = otherWriter(db.name, 150, 'UPDATE idempotency_moved SET through = through WHERE only = 0');
      await other.locked;
      removal(store);
      await other.done;
      expect(store.exists('acc', 'r')).toBe(false);
      expect(row(store, 'r')).toBeUndefined();
    });
  }
});
