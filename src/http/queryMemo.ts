// Validated queries of one route, by raw query string. Bots poll the same URL over and over (a
// quote, a summary), and validation is a pure function of that string, so a repeat skips both
// the split and the schema. Results are frozen, since one object now serves many requests:
// handlers copy before they change anything. Bounded: long strings are not kept, and the map
// starts over when full (cheaper than LRU bookkeeping on every hit; a polling bot refills it at once).
// A route whose calls differ in one parameter each time (an order's clientOrderId) names it
// (`varies`): the rest of the query is kept, and only that parameter is validated per call.
import type { z } from 'zod';
import { splitParam } from './request.js';

export const MEMO_MAX_ENTRIES = 1024;
export const MEMO_MAX_QUERY = 512;

function freeze<T>(v: T): T {
  if (v && typeof v === 'object') {
    for (const x of Object.values(v)) if (Array.isArray(x)) Object.freeze(x);
    Object.freeze(v);
  }
  return v;
}

/**
 * A parameter that differs in every call (an idempotency id): `schema` validates it alone, as an
 * object with that one optional key, giving what the route's schema gives for it. It must not take
 * part in the route schema's refinements across parameters (the rest is validated without it).
 */
export interface VaryingParam {
  param: string;
  schema: z.ZodType<Record<string, unknown>>;
  /** The schema takes any one string as it is (a plain string parameter): a call's value is then
   *  used without running it (zod's per-call overhead was most of a hit's cost). */
  anyString?: boolean;
}

export class QueryMemo {
  private readonly map = new Map<string, unknown>();
  private readonly keep: boolean;
  private readonly varies: VaryingParam | undefined;
  /** `keep: false`: validate only, remember nothing (a query carrying a secret). */
  constructor(private readonly schema: z.ZodType, opts: { keep?: boolean; varies?: VaryingParam | undefined } = {}) {
    this.keep = opts.keep ?? true;
    this.varies = opts.varies;
  }

  get size(): number {
    return this.map.size;
  }

  /** The validated query, or the zod error; `parsed` splits the raw string only on a miss. */
  parse(raw: string, parsed: () => unknown): { ok: true; data: unknown } | { ok: false; error: z.ZodError } {
    if (this.varies) return this.parseVarying(this.varies, raw, parsed);
    const hit = this.map.get(raw);
    if (hit !== undefined) return { ok: true, data: hit };
    const r = this.schema.safeParse(parsed());
    if (!r.success) return { ok: false, error: r.error };
    this.remember(raw, r.data);
    return { ok: true, data: r.data };
  }

  /**
   * Kept by the query without the varying parameter. A miss validates the whole query, so its
   * errors are the route schema's own, and keeps its result without that parameter (the same as
   * validating the rest alone: the parameter is validated by itself and refines nothing else).
   */
  private parseVarying(v: VaryingParam, raw: string, parsed: () => unknown): { ok: true; data: unknown } | { ok: false; error: z.ZodError } {
    const split = splitParam(raw, v.param);
    const hit = split && this.map.get(split.rest);
    if (split && hit !== undefined) {
      if (split.value === undefined) return { ok: true, data: hit };
      let value: unknown = split.value;
      if (!v.anyString) {
        const input: Record<string, unknown> = {};
        input[v.param] = split.value;
        const own = v.schema.safeParse(input);
        if (!own.success) return { ok: false, error: own.error };
        value = own.data[v.param];
      }
      const data: Record<string, unknown> = { ...(hit as Record<string, unknown>) };
      data[v.param] = value;
      return { ok: true, data };
    }
    const r = this.schema.safeParse(parsed());
    if (!r.success) return { ok: false, error: r.error };
    if (split) {
      // Copied without the parameter rather than deleting it: a delete would leave the kept object
      // in V8's slow (dictionary) mode, and every hit copies it.
      const all = r.data as Record<string, unknown>;
      const rest: Record<string, unknown> = {};
      for (const k in all) if (k !== v.param) rest[k] = all[k];
      this.remember(split.rest, rest);
    }
    return { ok: true, data: r.data };
  }

  private remember(raw: string, data: unknown): void {
    if (!this.keep || raw.length > MEMO_MAX_QUERY) return;
    if (this.map.size >= MEMO_MAX_ENTRIES) this.map.clear();
    this.map.set(raw, freeze(data));
  }
}
