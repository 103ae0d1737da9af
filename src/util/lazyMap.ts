// A Map whose table is made by its first entry (and kept after, as a Map's: iterators live
// across deletions and insertions as they do over a Map). An empty Map still
// costs its table (~150 B): per-account maps that most accounts leave empty (an idle account's
// positions and pending orders) paid it on every account (issue 19, memory per idle account).
// Subclasses override the Map's methods and call super's, as they did with Map.

const NONE = new Map<unknown, unknown>();

export class LazyMap<K, V> implements Map<K, V> {
  private m: Map<K, V> | undefined;

  get size(): number {
    return this.m?.size ?? 0;
  }
  get(k: K): V | undefined {
    return this.m?.get(k);
  }
  has(k: K): boolean {
    return this.m?.has(k) ?? false;
  }
  set(k: K, v: V): this {
    (this.m ??= new Map()).set(k, v);
    return this;
  }
  delete(k: K): boolean {
    return this.m?.delete(k) ?? false;
  }
  clear(): void {
    this.m?.clear();
  }
  forEach(f: (v: V, k: K, map: Map<K, V>) => void, thisArg?: unknown): void {
    this.m?.forEach((v, k) => f.call(thisArg, v, k, this));
  }
  keys(): MapIterator<K> {
    return (this.m ?? (NONE as Map<K, V>)).keys();
  }
  values(): MapIterator<V> {
    return (this.m ?? (NONE as Map<K, V>)).values();
  }
  entries(): MapIterator<[K, V]> {
    return (this.m ?? (NONE as Map<K, V>)).entries();
  }
  [Symbol.iterator](): MapIterator<[K, V]> {
    return this.entries();
  }
  get [Symbol.toStringTag](): string {
    return 'Map';
  }
}
