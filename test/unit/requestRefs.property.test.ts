// The simulator store's request ids by journal row (src/store/requestRefs.ts) replace a
// Map<string, [time, seq]>: for random sequences of sets (new ids and ids again), prunes and
// growth past their arrays, every id answers what the Map answers, and the sizes agree.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { RequestRefs } from '../../src/store/requestRefs.js';

const T0 = 1_795_003_200_000;
const op = fc.oneof(
  fc.record({ k: fc.constant('set' as const), id: fc.integer({ min: 0, max: 300 }), t: fc.integer({ min: 0, max: 1_000_000 }), q: fc.nat({ max: 1e9 }) }),
  fc.record({ k: fc.constant('prune' as const), h: fc.integer({ min: 0, max: 1_000_000 }) }),
);

describe('request ids by journal row', () => {
  it('answer as the Map they replace, across sets, prunes and growth', () => {
    fc.assert(
      fc.property(fc.array(op, { maxLength: 400 }), (ops) => {
        const refs = new RequestRefs();
        const model = new Map<string, [number, number]>();
        // The size after each step, compared in one assertion (one expect() per step cost most of
        // the file's CPU: 180,000 calls of ~15 us).
        const sizes: number[] = [];
        const modelSizes: number[] = [];
        for (const x of ops) {
          if (x.k === 'set') {
            refs.set(`id-${x.id}`, T0 + x.t, x.q);
            model.set(`id-${x.id}`, [T0 + x.t, x.q]);
          } else {
            refs.prune(T0 + x.h);
            for (const [id, r] of model) if (r[0] < T0 + x.h) model.delete(id);
          }
          sizes.push(refs.size);
          modelSizes.push(model.size);
        }
        expect(sizes).toEqual(modelSizes);
        const ids = Array.from({ length: 301 }, (_, i) => `id-${i}`);
        expect(ids.map((id) => [id, refs.get(id), refs.has(id)])).toEqual(ids.map((id) => [id, model.get(id), model.has(id)]));
      }),
      { numRuns: 300 },
    );
    // Pure CPU (~4 s of it while each step had its own expect(), ~1 s since): under other work it got
    // 4 s of CPU in 35 s of wall and failed on the 20 s default (npm test at load 25). A bound for a
    // hang, not for the machine's speed.
  }, 120_000);

  it("write a checkpoint's request batch as JSON.stringify of [id, time, seq] per id, any id", () => {
    const id = fc.oneof(fc.string({ maxLength: 8 }), fc.constantFrom('acct-1/b7/lq3k', 'a"b', 'é', '\\'));
    fc.assert(
      fc.property(fc.uniqueArray(fc.tuple(id, fc.nat({ max: 2e12 }), fc.nat({ max: 1e9 })), { minLength: 1, maxLength: 6, selector: (x) => x[0] }), (rows) => {
        const refs = new RequestRefs();
        for (const [i, t, q] of rows) refs.set(i, T0 + t, q);
        const ids = rows.map((r) => r[0]);
        expect(refs.batchJson(ids)).toBe(JSON.stringify(rows.map(([i, t, q]) => [i, T0 + t, q])));
      }),
      { numRuns: 500 },
    );
  });
});
