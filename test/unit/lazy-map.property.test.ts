// LazyMap (src/util/lazyMap.ts) answers as a Map does, whatever the operations: it only delays
// making its table until the first entry.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { LazyMap } from '../../src/util/lazyMap.js';

const op = fc.oneof(
  fc.record({ t: fc.constant('set' as const), k: fc.integer({ min: 0, max: 8 }), v: fc.integer() }),
  fc.record({ t: fc.constant('delete' as const), k: fc.integer({ min: 0, max: 8 }) }),
  fc.record({ t: fc.constant('clear' as const) }),
);

describe('LazyMap', () => {
  it('every read after every operation is the same as a Map\'s', () => {
    fc.assert(fc.property(fc.array(op, { maxLength: 40 }), (ops) => {
      const lazy = new LazyMap<number, number>();
      const map = new Map<number, number>();
      const same = () => {
        expect(lazy.size).toBe(map.size);
        expect([...lazy]).toEqual([...map]);
        expect([...lazy.keys()]).toEqual([...map.keys()]);
        expect([...lazy.values()]).toEqual([...map.values()]);
        const seen: Array<[number, number]> = [];
        lazy.forEach((v, k, m) => {
          expect(m).toBe(lazy);
          seen.push([k, v]);
        });
        expect(seen).toEqual([...map.entries()]);
        for (let k = 0; k <= 8; k++) {
          expect(lazy.has(k)).toBe(map.has(k));
          expect(lazy.get(k)).toBe(map.get(k));
        }
      };
      same();
      for (const o of ops) {
        if (o.t === 'set') expect(lazy.set(o.k, o.v)).toBe(lazy), map.set(o.k, o.v);
        else if (o.t === 'delete') expect(lazy.delete(o.k)).toBe(map.delete(o.k));
        else (lazy.clear(), map.clear());
        same();
      }
    }));
  });

  it('an iterator sees what is set and deleted while it runs, as a Map\'s does', () => {
    const lazy = new LazyMap<number, string>();
    lazy.set(1, 'a');
    const seen: number[] = [];
    for (const [k] of lazy) {
      seen.push(k);
      if (k === 1) {
        lazy.delete(1);
        lazy.set(2, 'b');
      }
    }
    expect(seen).toEqual([1, 2]);
    expect(Object.prototype.toString.call(lazy)).toBe('[object Map]');
  });
});
