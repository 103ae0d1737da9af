// bench/http.ts --sequential: the floor and the orders in alternating blocks, a ratio per pair and
// one over the pooled blocks.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Histogram } from '../../bench/lib/histogram.js';
import { floorFirst, pairedRatios, type Block } from '../../bench/lib/pairedBlocks.js';

const block = (samples: number[]): Block => {
  const h = new Histogram();
  for (const s of samples) h.record(s);
  return { latencyUs: h.summary(), hist: h.toJSON() };
};
const samples = fc.array(fc.integer({ min: 1, max: 50_000 }), { minLength: 1, maxLength: 300 });

describe('pairedRatios', () => {
  it('gives each pair its own p50 and p99 ratio, and their min, median and max', () => {
    fc.assert(fc.property(fc.array(fc.tuple(samples, samples), { minLength: 1, maxLength: 6 }), (raw) => {
      const pairs = raw.map(([f, o]) => ({ floor: block(f), orders: block(o) }));
      const r = pairedRatios(pairs);
      const p99s = pairs.map((p) => p.orders.latencyUs.p99 / p.floor.latencyUs.p99);
      r.pairs.forEach((e, i) => {
        expect(e.overFloor.p99).toBeCloseTo(p99s[i]!, 2);
        expect(e.overFloor.p50).toBeCloseTo(pairs[i]!.orders.latencyUs.p50 / pairs[i]!.floor.latencyUs.p50, 2);
      });
      expect(r.overFloorP99.min).toBeCloseTo(Math.min(...p99s), 2);
      expect(r.overFloorP99.max).toBeCloseTo(Math.max(...p99s), 2);
      const below = p99s.filter((x) => x < r.overFloorP99.median - 0.001).length;
      const above = p99s.filter((x) => x > r.overFloorP99.median + 0.001).length;
      expect(below).toBeLessThanOrEqual(p99s.length / 2);
      expect(above).toBeLessThanOrEqual(p99s.length / 2);
    }));
  });

  it('pools every block of a side into one histogram', () => {
    const pairs = [
      { floor: block([100, 100, 100, 1000]), orders: block([200, 200, 200, 200]) },
      { floor: block([100, 100, 100, 100]), orders: block([300, 300, 300, 5000]) },
    ];
    const r = pairedRatios(pairs);
    expect(r.pooled.floorUs.n).toBe(8);
    expect(r.pooled.floorUs.p99).toBe(1000);
    expect(r.pooled.orderSendUs.p99).toBe(5000);
    expect(r.pooled.overFloor).toEqual({ p50: 2, p99: 5 });
    expect(r.overFloorP99).toEqual({ min: 0.2, median: 25.1, max: 50 });
  });

  it('refuses no pairs', () => {
    expect(() => pairedRatios([])).toThrow(/no pairs/);
  });
});

describe('floorFirst', () => {
  it('alternates which side runs first (ABBA), starting with the floor', () => {
    expect([0, 1, 2, 3].map(floorFirst)).toEqual([true, false, true, false]);
  });
});
