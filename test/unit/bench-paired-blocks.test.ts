// bench/http.ts --sequential: the floor and the orders in alternating blocks, a ratio per pair and
// one over the pooled blocks.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Histogram } from '../../bench/lib/histogram.js';
import { baseFirst, blockOf, pairedComparison, pairedRatios, runPair, type Block } from '../../bench/lib/pairedBlocks.js';

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

  it('gives each side\'s pooled tail from p90 to p99.9', () => {
    // 1,000 samples a side: 1..1000 µs for the floor, twice that for the orders.
    const range = (k: number) => Array.from({ length: 500 }, (_, i) => (i + 1) * k);
    const pairs = [
      { floor: block(range(1)), orders: block(range(2)) },
      { floor: block(range(1).map((x) => x + 500)), orders: block(range(2).map((x) => x + 1000)) },
    ];
    const r = pairedRatios(pairs);
    expect(r.tail.floorUs).toEqual({ p90: 900, p95: 950, p97: 970, p98: 980, p99: 990, 'p99.5': 995, 'p99.9': 999 });
    expect(r.tail.orderSendUs).toEqual({ p90: 1800, p95: 1900, p97: 1940, p98: 1960, p99: 1980, 'p99.5': 1990, 'p99.9': 1998 });
    expect(r.tail.floorUs.p99).toBe(r.pooled.floorUs.p99);
  });

  it('refuses no pairs', () => {
    expect(() => pairedRatios([])).toThrow(/no pairs/);
  });
});

describe('pairedComparison', () => {
  it('gives other / base of each pair at p50 and p99, their min, median and max, and the pooled ratio', () => {
    const h = (xs: number[]) => {
      const x = new Histogram();
      for (const v of xs) x.record(v);
      return blockOf(x);
    };
    const r = pairedComparison([
      { base: h([100, 100, 400]), other: h([150, 150, 800]) },
      { base: h([100, 100, 400]), other: h([120, 120, 400]) },
      { base: h([100, 100, 400]), other: h([300, 300, 1200]) },
    ]);
    expect(r.pairs.map((e) => e.otherOverBase)).toEqual([{ p50: 1.5, p99: 2 }, { p50: 1.2, p99: 1 }, { p50: 3, p99: 3 }]);
    expect(r.otherOverBaseP50).toEqual({ min: 1.2, median: 1.5, max: 3 });
    expect(r.otherOverBaseP99).toEqual({ min: 1, median: 2, max: 3 });
    expect(r.pooled.baseUs.n).toBe(9);
    expect(r.pooled.otherOverBase).toEqual({ p50: 3, p99: 3 }); // 300 of 120,120,150,150,300,... over 100
  });
});

describe('Histogram.percentile', () => {
  it('is the smallest sample with at least p% of the samples at or below it', () => {
    fc.assert(fc.property(samples, fc.constantFrom(50, 90, 95, 97, 98, 99, 99.5, 99.9), (xs, p) => {
      const h = new Histogram();
      for (const x of xs) h.record(x);
      const sorted = [...xs].sort((a, b) => a - b);
      const v = h.percentile(p);
      expect(sorted.filter((x) => x <= v).length * 100).toBeGreaterThanOrEqual(p * xs.length);
      expect(sorted.filter((x) => x < v).length * 100).toBeLessThan(p * xs.length);
    }));
  });
});

describe('baseFirst', () => {
  it('alternates which side runs first (ABBA), starting with the base (the floor)', () => {
    expect([0, 1, 2, 3].map(baseFirst)).toEqual([true, false, true, false]);
  });

  it('runs a pair\'s two blocks in that order, and gives each back as its side', async () => {
    const ran: string[] = [];
    const side = (name: string) => async () => {
      ran.push(name);
      return name;
    };
    for (let i = 0; i < 4; i++) expect(await runPair(i, side('base'), side('other'))).toEqual({ base: 'base', other: 'other' });
    expect(ran).toEqual(['base', 'other', 'other', 'base', 'base', 'other', 'other', 'base']);
  });
});
