// A `probability` fault is reproducible per fault: which trades it takes depends on the seed, the
// fault and the sequence of trade requests since it was set, not on what earlier faults (or other
// logins' faults) drew on the same simulator. A benchmarker runs a bot twice against one running
// gateway, setting the same `{"kind":"reject","probability":0.5}` before each run: before, the
// second run got other rejects (one RNG per simulator, drawn from since its start: measured with
// 16 orders, `200 200 400 400 ...` then `400 400 200 400 ...`), so only a fresh gateway repeated it.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { FaultController } from '../../src/sim/faults.js';

const draws = (f: FaultController, login: string, n: number): string[] =>
  Array.from({ length: n }, () => f.tradeFault('S', login) ?? '-');

describe('simulator faults: a probability draws its own seeded sequence', () => {
  it('the same fault set again takes the same trades of the same sequence', () => {
    const f = new FaultController(1, () => 0);
    f.set({ server: 'S', kind: 'reject', probability: 0.5 });
    const first = draws(f, 'a', 32);
    f.clear();
    f.set({ server: 'S', kind: 'reject', probability: 0.5 });
    expect(draws(f, 'a', 32)).toEqual(first);
    expect(first).toContain('reject');
    expect(first).toContain('-');
  });

  it('another seed draws another sequence', () => {
    const a = new FaultController(1, () => 0);
    const b = new FaultController(2, () => 0);
    a.set({ server: 'S', kind: 'reject', probability: 0.5 });
    b.set({ server: 'S', kind: 'reject', probability: 0.5 });
    expect(draws(b, 'a', 32)).not.toEqual(draws(a, 'a', 32));
  });

  it('property: each login fault takes the same trades whether or not another fault draws in between', () => {
    fc.assert(
      fc.property(fc.integer(), fc.array(fc.boolean(), { minLength: 1, maxLength: 60 }), fc.double({ min: 0.05, max: 0.95, noNaN: true }), (seed, order, p) => {
        const alone = (login: string, n: number) => {
          const f = new FaultController(seed, () => 0);
          f.set({ server: 'S', login, kind: 'reject', probability: p });
          return draws(f, login, n);
        };
        const both = new FaultController(seed, () => 0);
        both.set({ server: 'S', login: 'x', kind: 'reject', probability: p });
        both.set({ server: 'S', login: 'y', kind: 'timeoutAfterSend', probability: p });
        const seen: Record<string, string[]> = { x: [], y: [] };
        for (const isX of order) {
          const login = isX ? 'x' : 'y';
          seen[login]!.push(both.tradeFault('S', login) ?? '-');
        }
        expect(seen.x).toEqual(alone('x', seen.x!.length).map((k) => (k === '-' ? '-' : 'reject')));
        const y = new FaultController(seed, () => 0);
        y.set({ server: 'S', login: 'y', kind: 'timeoutAfterSend', probability: p });
        expect(seen.y).toEqual(draws(y, 'y', seen.y!.length));
      }),
      { numRuns: 200 },
    );
  });
});
