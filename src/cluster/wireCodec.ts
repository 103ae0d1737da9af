// JSON for what crosses NATS between nodes, faithful to what crosses a MessagePort to a shard
// (structured clone): JSON alone turns undefined into a missing key or null, Date into a string,
// Map/Set into {}, Uint8Array/Buffer into an object of indices, NaN/Infinity into null, -0 into 0,
// and throws on bigint. Those values are written as tagged objects under the key TAG ("\u0000",
// which no real data uses; an object that does have it is tagged too), so decode(encode(v)) deep-
// equals structuredClone(v). Plain JSON text comes back through JSON.parse alone (no walk).

const TAG = '\u0000';
/** How TAG appears in JSON text: present iff something was tagged. */
const TAG_IN_TEXT = '"\\u0000"';

type Tagged =
  | { [TAG]: 'u' }
  | { [TAG]: 'n'; v: string }
  | { [TAG]: 'f'; v: string }
  | { [TAG]: 'd'; v: number }
  | { [TAG]: 'm'; v: [unknown, unknown][] }
  | { [TAG]: 's'; v: unknown[] }
  | { [TAG]: 'b'; t: string; v: string }
  | { [TAG]: 'e'; name: string; message: string }
  | { [TAG]: 'o'; v: [string, unknown][] };

const TYPED: Record<string, new (b: ArrayBuffer) => ArrayBufferView> = {
  Uint8Array, Int8Array, Uint8ClampedArray, Uint16Array, Int16Array, Uint32Array, Int32Array,
  Float32Array, Float64Array, BigInt64Array, BigUint64Array,
};

function tag(raw: unknown): unknown {
  switch (typeof raw) {
    case 'undefined': return { [TAG]: 'u' };
    case 'bigint': return { [TAG]: 'n', v: raw.toString() };
    case 'number': return Number.isFinite(raw) && !Object.is(raw, -0) ? raw : { [TAG]: 'f', v: String(Object.is(raw, -0) ? '-0' : raw) };
    case 'object': {
      if (raw === null || Array.isArray(raw)) return raw;
      if (raw instanceof Date) return { [TAG]: 'd', v: raw.getTime() };
      if (raw instanceof Map) return { [TAG]: 'm', v: [...raw.entries()] };
      if (raw instanceof Set) return { [TAG]: 's', v: [...raw] };
      if (ArrayBuffer.isView(raw)) {
        // structuredClone turns a Buffer into a plain Uint8Array; so does this.
        const t = raw instanceof Buffer ? 'Uint8Array' : raw.constructor.name;
        return { [TAG]: 'b', t, v: Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength).toString('base64') };
      }
      if (raw instanceof Error) return { [TAG]: 'e', name: raw.name, message: raw.message };
      if (Object.prototype.hasOwnProperty.call(raw, TAG)) return { [TAG]: 'o', v: Object.entries(raw) };
      return raw;
    }
    default: return raw;
  }
}

/** Past this depth `plain` gives up (the tagging path then writes it, or throws on a cycle as before). */
const PLAIN_DEPTH = 32;

/** Whether JSON.stringify alone writes `v` as the tagging replacer would: only strings, booleans,
 *  null, finite numbers other than -0, arrays and plain objects without the TAG key. A walk in
 *  plain JavaScript costs far less than JSON.stringify calling a replacer back for every value (a
 *  relayed quote: about half its encoding); anything else takes the tagging path. */
function plain(v: unknown, depth: number): boolean {
  switch (typeof v) {
    case 'string': case 'boolean': return true;
    case 'number': return Number.isFinite(v) && !Object.is(v, -0);
    case 'object': {
      if (v === null) return true;
      if (depth > PLAIN_DEPTH) return false;
      if (Array.isArray(v)) {
        for (let i = 0; i < v.length; i++) if (!plain(v[i], depth + 1)) return false;
        return true;
      }
      const proto: unknown = Object.getPrototypeOf(v);
      if (proto !== Object.prototype && proto !== null) return false;
      const o = v as Record<string, unknown>;
      for (const k in o) if (k === TAG || !plain(o[k], depth + 1)) return false;
      return true;
    }
    default: return false;
  }
}

/** JSON text of `value`, with what JSON cannot carry tagged (see above). */
export function encode(value: unknown): string {
  if (plain(value, 0)) return JSON.stringify(value);
  return JSON.stringify(value, function (this: Record<string, unknown>, key: string) {
    // `this[key]` is the value before toJSON (Date, Buffer): the one to look at.
    return tag(this[key]);
  });
}

function untag(v: unknown): unknown {
  if (typeof v !== 'object' || v === null) return v;
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) v[i] = untag(v[i]);
    return v;
  }
  const o = v as Record<string, unknown>;
  if (!Object.prototype.hasOwnProperty.call(o, TAG)) {
    for (const k of Object.keys(o)) o[k] = untag(o[k]);
    return o;
  }
  const t = o as Tagged;
  switch (t[TAG]) {
    case 'u': return undefined;
    case 'n': return BigInt(t.v);
    case 'f': return t.v === '-0' ? -0 : Number(t.v);
    case 'd': return new Date(untag(t.v) as number);
    case 'm': return new Map((untag(t.v) as [unknown, unknown][]));
    case 's': return new Set(untag(t.v) as unknown[]);
    case 'b': {
      const bytes = Buffer.from(t.v, 'base64');
      const copy = new ArrayBuffer(bytes.length);
      new Uint8Array(copy).set(bytes);
      const Ctor = TYPED[t.t];
      if (!Ctor) throw new Error(`wire: unknown typed array ${t.t}`);
      return new Ctor(copy);
    }
    case 'e': {
      const e = new Error(t.message);
      e.name = t.name;
      return e;
    }
    case 'o': return Object.fromEntries(untag(t.v) as [string, unknown][]);
    default: throw new Error('wire: unknown tag');
  }
}

/** The value `encode` wrote. */
export function decode(text: string): unknown {
  const v: unknown = JSON.parse(text);
  return text.includes(TAG_IN_TEXT) ? untag(v) : v;
}
