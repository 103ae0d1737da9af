// TickMerge (src/market/tickMerge.ts): the copies of one symbol's tick sequence from several
// sources (sessions in a shard, shards and the relay at the hub, shards at the relay) merged into
// one. Model: a true sequence of milliseconds holding one to four ticks each (bid and ask from a
// small alphabet, so a millisecond repeats prices); each source delivers a contiguous part of it in
// order, starting at a millisecond's first tick and ending anywhere; the copies arrive interleaved
// at random. A tick's first copy is dropped only if a later millisecond was passed on before it
// arrived (an older quote); every other covered tick is passed on exactly once, in the true order.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { TickMerge } from '../../src/market/tickMerge.js';

interface T { i: number; t: number; bid: number; ask: number }

const arbScenario = fc
  .record({
    groups: fc.array(fc.array(fc.record({ bid: fc.constantFrom(1, 2), ask: fc.constantFrom(2, 3) }), { minLength: 1, maxLength: 4 }), { minLength: 1, maxLength: 8 }),
    gaps: fc.array(fc.integer({ min: 1, max: 3 }), { minLength: 8, maxLength: 8 }),
    sources: fc.array(fc.record({ from: fc.nat(), len: fc.nat() }), { minLength: 1, maxLength: 4 }),
    order: fc.array(fc.nat(), { maxLength: 200 }),
  })
  .map(({ groups, gaps, sources, order }) => {
    const ticks: T[] = [];
    const starts: number[] = [];
    let t = 1_700_000_000_000;
    groups.forEach((g, gi) => {
      t += gaps[gi]!;
      starts.push(ticks.length);
      // The same prices twice in a row are one tick for a quote (TickMerge drops the second).
      g.forEach((p, k) => {
        if (k > 0 && g[k - 1]!.bid === p.bid && g[k - 1]!.ask === p.ask) return;
        ticks.push({ i: ticks.length, t, ...p });
      });
    });
    // Each source: from a millisecond's first tick, some ticks on (possibly to the end).
    const parts = sources.map(({ from, len }) => {
      const start = starts[from % starts.length]!;
      return ticks.slice(start, start + 1 + (len % (ticks.length - start)));
    });
    // A random interleaving that keeps each source's order.
    const next = parts.map(() => 0);
    const arrivals: Array<{ source: number; tick: T }> = [];
    let k = 0;
    for (;;) {
      const open = parts.map((p, s) => (next[s]! < p.length ? s : -1)).filter((s) => s >= 0);
      if (open.length === 0) break;
      const s = open[(order[k++] ?? 0) % open.length]!;
      arrivals.push({ source: s, tick: parts[s]![next[s]!++]! });
    }
    return { ticks, arrivals };
  });

describe('TickMerge', () => {
  it('passes each covered tick once, in the true order, unless a later millisecond came first', () => {
    fc.assert(fc.property(arbScenario, ({ arrivals }) => {
      const merge = new TickMerge();
      const passed: number[] = [];
      for (const { source, tick } of arrivals) if (merge.admit(`s${source}`, tick.t, tick.bid, tick.ask)) passed.push(tick.i);

      const expected: number[] = [];
      const firstSeen = new Set<number>();
      let maxT = -Infinity;
      for (const { tick } of arrivals) {
        if (!firstSeen.has(tick.i)) {
          firstSeen.add(tick.i);
          if (tick.t >= maxT) expected.push(tick.i);
        }
        maxT = Math.max(maxT, tick.t);
      }
      expect(passed).toEqual(expected);
      // In the true order, none twice.
      for (let j = 1; j < passed.length; j++) expect(passed[j]!).toBeGreaterThan(passed[j - 1]!);
    }), { numRuns: 2_000 });
  });

  it('two sources of the same millisecond, A B then A B: passes A, B (comparing with the last tick passed A, B, A, B)', () => {
    const merge = new TickMerge();
    const out = [['near', 1, 2], ['near', 2, 3], ['relay', 1, 2], ['relay', 2, 3]].filter(([s, b, a]) => merge.admit(s as string, 100, b as number, a as number));
    expect(out).toEqual([['near', 1, 2], ['near', 2, 3]]);
  });

  it('a price that returns within the millisecond (A B A) is passed again: the last quote is the true last', () => {
    const merge = new TickMerge();
    const seq: Array<[number, number]> = [[1, 2], [2, 3], [1, 2]];
    const out: Array<[string, number, number]> = [];
    for (const src of ['x', 'y']) for (const [b, a] of seq) if (merge.admit(src, 100, b, a)) out.push([src, b, a]);
    expect(out).toEqual([['x', 1, 2], ['x', 2, 3], ['x', 1, 2]]);
  });

  it('drops a copy of an older millisecond, a copy already passed from another source, and a source repeating its latest prices', () => {
    const merge = new TickMerge();
    expect(merge.admit('a', 200, 1, 2)).toBe(true);
    expect(merge.admit('b', 199, 5, 6)).toBe(false);
    expect(merge.admit('b', 200, 1, 2)).toBe(false);
    expect(merge.admit('a', 201, 1, 2)).toBe(true);
    expect(merge.admit('a', 201, 1, 2)).toBe(false);
    expect(merge.admit('b', 201, 1, 2)).toBe(false);
    expect(merge.admit('c', 200, 7, 8)).toBe(false); // 201 went out: 200 is older now
  });

  it('forgets sources not heard from for a minute of tick time', () => {
    const merge = new TickMerge();
    for (let s = 0; s < 50; s++) merge.admit(`s${s}`, 1_000, 1, 2);
    expect(merge.sourceCount).toBe(50);
    merge.admit('s0', 1_000 + 60_001, 1, 2);
    expect(merge.sourceCount).toBe(1);
    merge.admit('s1', 1_000 + 120_002, 1, 2);
    expect(merge.sourceCount).toBe(1);
  });
});
