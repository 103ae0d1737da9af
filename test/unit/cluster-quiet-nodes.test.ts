// QuietNodes (src/cluster/quietNodes.ts): an owner withholds a (server, symbol)'s ticks from a node
// only while that node's latest quiet notice names it and has not run out.
import { describe, expect, it } from 'vitest';
import { parseQuietNotice, QuietNodes } from '../../src/cluster/quietNodes.js';

describe('QuietNodes', () => {
  it('a notice holds for its ttl; the next one replaces it; an empty one ends it', () => {
    const q = new QuietNodes();
    expect(q.empty).toBe(true);
    q.apply({ node: 'B', pairs: [['S', 'X'], ['S', 'Y']], ttlMs: 3_000 }, 1_000);
    expect(q.empty).toBe(false);
    expect(q.has('B', 'S', 'X', 3_999)).toBe(true);
    expect(q.has('B', 'S', 'Z', 3_999)).toBe(false);
    expect(q.has('B', 'T', 'X', 3_999)).toBe(false);
    expect(q.has('C', 'S', 'X', 3_999)).toBe(false);
    q.apply({ node: 'B', pairs: [['S', 'Y']], ttlMs: 3_000 }, 2_000);
    expect(q.has('B', 'S', 'X', 2_000)).toBe(false);
    expect(q.has('B', 'S', 'Y', 4_999)).toBe(true);
    // Not renewed: over at its ttl (a node gone, cut off, or its notice lost).
    expect(q.has('B', 'S', 'Y', 5_000)).toBe(false);
    expect(q.empty).toBe(true);
    q.apply({ node: 'B', pairs: [['S', 'Y']], ttlMs: 3_000 }, 6_000);
    q.apply({ node: 'B', pairs: [], ttlMs: 3_000 }, 6_100);
    expect(q.has('B', 'S', 'Y', 6_100)).toBe(false);
    expect(q.empty).toBe(true);
  });

  it('a ttl past a minute holds a minute', () => {
    const q = new QuietNodes();
    q.apply({ node: 'B', pairs: [['S', 'X']], ttlMs: 3_600_000 }, 0);
    expect(q.has('B', 'S', 'X', 59_999)).toBe(true);
    expect(q.has('B', 'S', 'X', 60_000)).toBe(false);
  });

  it('anything but a notice is refused', () => {
    expect(parseQuietNotice({ node: 'B', pairs: [['S', 'X']], ttlMs: 3_000 })).toEqual({ node: 'B', pairs: [['S', 'X']], ttlMs: 3_000 });
    for (const bad of [null, 'x', {}, { node: 'B', pairs: [['S']], ttlMs: 1 }, { node: 'B', pairs: [['S', 1]], ttlMs: 1 }, { node: 'B', pairs: [], ttlMs: 0 }, { node: 'B', pairs: [], ttlMs: -5 }, { node: 1, pairs: [], ttlMs: 5 }, { node: 'B', pairs: 'S', ttlMs: 5 }]) {
      expect(parseQuietNotice(bad), JSON.stringify(bad)).toBeUndefined();
    }
  });
});
