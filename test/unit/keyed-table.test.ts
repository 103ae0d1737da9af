// KeyedTable (src/util/keyedTable.ts), which holds a shard's calls in flight (runtime/shardSet.ts)
// and the idempotency records with work to do (hosts/accountTrade.ts), behaves as the Map it
// replaces: any sequence of sets and deletes leaves the same entries, size and order (ascending
// integer keys, the order the calls were made; string keys in insertion order), and entries may be
// deleted while iterating (a restart does).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { KeyedTable } from '../../src/util/keyedTable.js';

const ops = fc.array(fc.oneof(fc.constant('add' as const), fc.nat({ max: 40 })), { maxLength: 200 });

describe('KeyedTable', () => {
  it('holds what a Map holds: integer keys made in increasing order (calls by id)', () => {
    fc.assert(fc.property(ops, (seq) => {
      const table = new KeyedTable<number, string>(true);
      const model = new Map<number, string>();
      let next = 1;
      for (const op of seq) {
        if (op === 'add') {
          table.set(next, `c${next}`);
          model.set(next, `c${next}`);
          next++;
        } else {
          expect(table.delete(op)).toBe(model.delete(op));
        }
        expect(table.size).toBe(model.size);
      }
      expect([...table]).toEqual([...model]);
      for (const [id, v] of model) expect(table.get(id)).toBe(v);
      expect(table.has(next)).toBe(false);
    }));
  });

  it('holds what a Map holds: string keys (records by account and clientOrderId), set again and deleted in any order', () => {
    fc.assert(fc.property(fc.array(fc.tuple(fc.boolean(), fc.nat({ max: 15 }), fc.nat()), { maxLength: 200 }), (seq) => {
      const table = new KeyedTable<string, number>();
      const model = new Map<string, number>();
      for (const [add, k, v] of seq) {
        const key = `acct-${k % 3}|o${k}`;
        if (add) {
          table.set(key, v);
          model.set(key, v);
        } else {
          expect(table.delete(key)).toBe(model.delete(key));
        }
        expect(table.size).toBe(model.size);
        expect(table.has(key)).toBe(model.has(key));
      }
      expect([...table]).toEqual([...model]);
      expect([...table.values()]).toEqual([...model.values()]);
    }));
  });

  it('lets a restart delete entries while it walks them, and clears', () => {
    const table = new KeyedTable<number, number>(true);
    for (let id = 1; id <= 5; id++) table.set(id, id * 10);
    const seen: number[] = [];
    for (const [id] of table) {
      seen.push(id);
      if (id % 2 === 0) table.delete(id);
    }
    expect(seen).toEqual([1, 2, 3, 4, 5]);
    expect([...table]).toEqual([[1, 10], [3, 30], [5, 50]]);
    table.clear();
    expect(table.size).toBe(0);
    expect([...table]).toEqual([]);
  });
});
