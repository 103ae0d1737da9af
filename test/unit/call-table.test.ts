// The table of a shard's calls in flight (runtime/shardSet.ts) behaves as the Map it replaces: any
// sequence of sets and deletes of increasing ids leaves the same entries, size and order (id order,
// the order the calls were made), and entries may be deleted while iterating (a restart does).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { CallTable } from '../../src/runtime/shardSet.js';

describe('CallTable', () => {
  it('holds what a Map holds after any sequence of calls made and answered', () => {
    fc.assert(fc.property(fc.array(fc.oneof(fc.constant('call' as const), fc.nat({ max: 40 })), { maxLength: 200 }), (ops) => {
      const table = new CallTable<string>();
      const model = new Map<number, string>();
      let next = 1;
      for (const op of ops) {
        if (op === 'call') {
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
      expect(table.get(next)).toBeUndefined();
    }));
  });

  it('lets a restart delete entries while it walks them, and clears', () => {
    const table = new CallTable<number>();
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
