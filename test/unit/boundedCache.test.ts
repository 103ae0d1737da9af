import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { boundedCache } from '../../src/util/boundedCache.js';

const srcFiles = (dir: string): string[] => readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
  e.isDirectory() ? srcFiles(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : []);

describe('boundedCache', () => {
  it('holds at most maxEntries, evicting the least recently used', () => {
    const c = boundedCache<string, number>(3);
    for (const k of ['a', 'b', 'c']) c.set(k, 1);
    expect(c.get('a')).toBe(1); // a is now the most recently used
    c.set('d', 1);
    expect([...c.keys()].sort()).toEqual(['a', 'c', 'd']);
    for (let i = 0; i < 1000; i++) c.set(`k${i}`, i);
    expect(c.size).toBe(3);
    expect([...c.keys()].sort()).toEqual(['k997', 'k998', 'k999']);
  });

  it('a cache of 100,000 still holds 100,000', () => {
    const c = boundedCache<number, number>(100_000);
    for (let i = 0; i < 100_010; i++) c.set(i, i);
    expect(c.size).toBe(100_000);
    expect(c.has(9)).toBe(false);
    expect(c.get(10)).toBe(10);
  });

  it('expires entries after ttl', () => {
    const clock = { t: 1_000, now() { return this.t; } };
    const c = boundedCache<string, number>(10, { ttl: 1_000, ttlResolution: 0, perf: clock });
    c.set('a', 1);
    clock.t += 999;
    expect(c.get('a')).toBe(1);
    clock.t += 2;
    expect(c.get('a')).toBeUndefined();
  });

  it('allocates nothing for the entries it does not hold yet', () => {
    // lru-cache's `max` allocates ~16 bytes of arrays per possible entry when the cache is made.
    const before = process.memoryUsage();
    const caches = Array.from({ length: 20 }, () => boundedCache<string, number>(100_000, { ttl: 1_000 }));
    const after = process.memoryUsage();
    const grown = (after.heapUsed - before.heapUsed) + (after.arrayBuffers - before.arrayBuffers);
    expect(caches).toHaveLength(20);
    expect(grown).toBeLessThan(2 * 1024 * 1024); // 20 preallocated caches: > 30 MB
  });

  it('is how src/ makes its LRU caches', () => {
    const offenders = srcFiles('src').filter((f) => !f.endsWith('boundedCache.ts') && /new LRUCache\b/.test(readFileSync(f, 'utf8')));
    expect(offenders).toEqual([]);
  });
});
