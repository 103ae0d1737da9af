// LRU caches bounded by their number of entries, without paying for that number up front.
// lru-cache's `max` allocates and fills its arrays for `max` entries when the cache is made (its
// README: "storage is allocated for `max` items"): ~10 ms of CPU and ~1.6 MB per 100,000, six such
// caches at every gateway start, most of them never holding more than a few hundred entries.
// `maxSize` with every entry counted 1 keeps the same bound; the arrays grow as entries come.
import { LRUCache } from 'lru-cache';

const ONE = (): number => 1;

export interface BoundedCacheOptions {
  /** Entries older than this many ms are not returned (lru-cache `ttl`). */
  ttl?: number;
  /** lru-cache `ttlResolution`. */
  ttlResolution?: number;
  /** The clock ttl is measured with (lru-cache `perf`; default performance). */
  perf?: { now(): number };
}

/** An LRU cache that holds at most `maxEntries` entries, evicting the least recently used. */
export function boundedCache<K extends {}, V extends {}>(maxEntries: number, options: BoundedCacheOptions = {}): LRUCache<K, V> {
  return new LRUCache<K, V>({ ...options, maxSize: maxEntries, sizeCalculation: ONE });
}
