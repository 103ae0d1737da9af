// What crosses NATS between nodes must arrive as a shard's reply would (structured clone), and
// names from outside must each stay one subject token, distinct from every other name.
import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import { token, untoken } from '../../src/cluster/subjects.js';
import { decode, encode } from '../../src/cluster/wireCodec.js';

const leaf = fc.oneof(
  fc.string(), fc.double(), fc.integer(), fc.boolean(), fc.constant(null), fc.constant(undefined),
  fc.bigInt(), fc.date({ noInvalidDate: false }), fc.uint8Array().map((a) => Buffer.from(a)), fc.float64Array(),
  fc.constantFrom('\u0000', NaN, Infinity, -Infinity, -0),
);
const value = fc.letrec((tie) => ({
  v: fc.oneof({ depthSize: 'small', withCrossShrink: true }, leaf, tie('arr'), tie('obj'), tie('map'), tie('set')),
  arr: fc.array(tie('v'), { maxLength: 4 }),
  obj: fc.dictionary(fc.oneof(fc.string(), fc.constant('\u0000')), tie('v'), { maxKeys: 4 }),
  map: fc.array(fc.tuple(fc.string(), tie('v')), { maxLength: 3 }).map((e) => new Map(e)),
  set: fc.array(fc.integer(), { maxLength: 3 }).map((e) => new Set(e)),
})).v;

describe('wire codec (cluster JSON)', () => {
  it('decode(encode(v)) is structuredClone(v), for any value a shard could answer', () => {
    fc.assert(fc.property(value, (v) => {
      expect(decode(encode(v))).toStrictEqual(structuredClone(v));
    }), { numRuns: 500 });
  });

  it('the values plain JSON loses survive, and plain data stays plain JSON', () => {
    const reply = { build: undefined, at: new Date(5), raw: Buffer.from('ab'), n: 10n, nan: NaN, list: [undefined, 1], m: new Map([['k', 1]]) };
    const back = decode(encode(reply)) as typeof reply;
    expect('build' in back).toBe(true);
    expect(back.at).toEqual(new Date(5));
    expect(back.raw).toEqual(new Uint8Array([97, 98]));
    expect(back.n).toBe(10n);
    expect(back.nan).toBeNaN();
    expect(back.list).toEqual([undefined, 1]);
    expect(back.m.get('k')).toBe(1);
    // What plain JSON carries is written as plain JSON (readable, no tags).
    const plain = { status: 200, json: '{"ticket":1}', replay: false, list: [1, 'a', null] };
    expect(encode(plain)).toBe(JSON.stringify(plain));
  });

  it('writes plain data with JSON.stringify alone (no replacer called back per value), and tags what is not plain however deep', () => {
    const quote = { kind: 'stream.tick', key: 'Srv', data: { server: 'Srv', tick: { symbol: 'EURUSD', bid: 1.1, ask: 1.1002, timeMsc: 1764172800123.5, volume: 2 }, source: 's0' } };
    const stringify = vi.spyOn(JSON, 'stringify');
    try {
      expect(encode(quote)).toBe('{"kind":"stream.tick","key":"Srv","data":{"server":"Srv","tick":{"symbol":"EURUSD","bid":1.1,"ask":1.1002,"timeMsc":1764172800123.5,"volume":2},"source":"s0"}}');
      expect(stringify.mock.calls.map((c) => c.length)).toEqual([1]);
    } finally {
      stringify.mockRestore();
    }
    // One value JSON would lose, deep inside plain data, sends the whole value through the tags.
    class Point { constructor(readonly x: number) {} }
    for (const odd of [-0, NaN, undefined, 1n, new Date(3), new Point(1), { [String.fromCharCode(0)]: 1 }]) {
      const v = { a: [1, { b: ['x', odd] }], c: true };
      expect(decode(encode(v))).toStrictEqual(structuredClone(odd instanceof Point ? { a: [1, { b: ['x', { x: 1 }] }], c: true } : v));
    }
    // A cycle still fails as JSON.stringify fails on it, not with a stack overflow.
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic.self = { back: cyclic };
    expect(() => encode(cyclic)).toThrow(TypeError);
  });
});

describe('subject tokens', () => {
  it('are one token (no dot, wildcard, space or empty), and one name each', () => {
    fc.assert(fc.property(fc.string({ unit: 'grapheme' }), fc.string(), (a, b) => {
      const t = token(a);
      expect(t).toMatch(/^[A-Za-z0-9_~-]+$/);
      expect(untoken(t)).toBe(a);
      if (a !== b) expect(token(b)).not.toBe(t);
    }), { numRuns: 500 });
    expect(token('acc_1-x')).toBe('acc_1-x');
    expect(token('Broker.Live *>')).toBe('Broker~2ELive~20~2A~3E');
    expect(token('')).toBe('~');
  });
});
