// Validated queries of one route, by raw query string. Bots poll the same URL over and over (a
// quote, a summary), and validation is a pure function of that string, so a repeat skips both
// the split and the schema. Results are frozen, since one object now serves many requests:
// handlers copy before they change anything. Bounded: long strings are not kept, and the map
// starts over when full (cheaper than LRU bookkeeping on every hit; a polling bot refills it at once).
import type { z } from 'zod';

export const MEMO_MAX_ENTRIES = 1024;
export const MEMO_MAX_QUERY = 512;

function freeze<T>(v: T): T {
  if (v && typeof v === 'object') {
    for (const x of Object.values(v)) if (Array.isArray(x)) Object.freeze(x);
    Object.freeze(v);
  }
  return v;
}

export class QueryMemo {
  private readonly map = new Map<string, unknown>();
  private readonly keep: boolean;
  /** `keep: false`: validate only, remember nothing (a query carrying a secret). */
  constructor(private readonly schema: z.ZodType, opts: { keep?: boolean } = {}) {
    this.keep = opts.keep ?? true;
  }

  get size(): number {
    return this.map.size;
  }

  /** The validated query, or the zod error; `parsed` splits the raw string only on a miss. */
  parse(raw: string, parsed: () => unknown): { ok: true; data: unknown } | { ok: false; error: z.ZodError } {
    const hit = this.map.get(raw);
    if (hit !== undefined) return { ok: true, data: hit };
    const r = this.schema.safeParse(parsed());
    if (!r.success) return { ok: false, error: r.error };
    if (this.keep && raw.length <= MEMO_MAX_QUERY) {
      if (this.map.size >= MEMO_MAX_ENTRIES) this.map.clear();
      this.map.set(raw, freeze(r.data));
    }
    return { ok: true, data: r.data };
  }
}
