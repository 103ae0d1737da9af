// The reused-buffer JSON writer (src/util/jsonText.ts) must write exactly what JSON.stringify and
// Date.toISOString write, or say it cannot (`failed` / false) so the caller goes the generic way.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { JsonText } from '../../src/util/jsonText.js';

const w = new JsonText();

describe('JsonText', () => {
  it('writes numbers as JSON.stringify does', () => {
    const nums = fc.oneof(
      fc.double(),
      fc.integer(),
      fc.maxSafeInteger(),
      fc.constantFrom(0, -0, NaN, Infinity, -Infinity, 9, 10, 99, 100, 1e15, 1e16, 2 ** 53 - 1, -(2 ** 53 - 1), 2 ** 53, 1e21, 1795671600001, 999_999_999, 1e9, 1e9 + 1, -1e9, 1e18 - 1, 1_000_000_000_000_000_001),
    );
    fc.assert(fc.property(fc.array(nums, { maxLength: 8 }), (xs) => {
      w.begin();
      xs.forEach((x, i) => (i > 0 ? w.raw(',') : w).num(x));
      expect(w.failed).toBe(false);
      expect(w.text()).toBe(JSON.stringify(xs).slice(1, -1));
    }), { numRuns: 2000 });
  });

  it('writes a string as JSON.stringify does, or fails for one that needs escaping or is not ASCII', () => {
    const strs = fc.oneof(fc.string({ maxLength: 12 }), fc.string({ unit: 'binary', maxLength: 6 }), fc.constantFrom('', 'BTCUSD', 'a"b', '\\', '\n', '\u007f', '\u2028', '\ud800', 'é'));
    fc.assert(fc.property(strs, (s) => {
      w.begin().str(s);
      const plain = /^[\x20-\x7e]*$/.test(s) && !s.includes('"') && !s.includes('\\');
      expect(w.failed).toBe(!plain);
      if (plain) expect(w.text()).toBe(JSON.stringify(s));
    }), { numRuns: 2000 });
  });

  it('writes values of positional records as JSON.stringify writes them in an array', () => {
    const vals = fc.oneof(fc.double(), fc.integer(), fc.string({ maxLength: 4 }), fc.boolean(), fc.constant(null), fc.constant(undefined), fc.constant({}), fc.constant([1]));
    fc.assert(fc.property(fc.array(vals, { maxLength: 6 }), (xs) => {
      w.begin().raw('[');
      xs.forEach((x, i) => (i > 0 ? w.raw(',') : w).value(x));
      w.raw(']');
      const writable = xs.every((x) => typeof x !== 'object' || x === null) && xs.every((x) => typeof x !== 'string' || /^[\x20-\x7e]*$/.test(x) && !/["\\]/.test(x));
      expect(w.failed).toBe(!writable);
      if (writable) expect(w.text()).toBe(JSON.stringify(xs));
    }), { numRuns: 2000 });
  });

  it('writes an instant as toISOString does, from 1970 to 9999, and declines any other', () => {
    const ms = fc.oneof(
      fc.integer({ min: 0, max: 253_402_300_799_999 }),
      fc.integer({ min: 1_700_000_000_000, max: 1_900_000_000_000 }),
      fc.constantFrom(0, 951_782_400_000, 951_868_799_999, 4_107_542_400_000, 253_402_300_799_999, 253_402_300_800_000, -1, 0.5, NaN, 8.64e15 + 1),
      fc.double(),
    );
    fc.assert(fc.property(ms, (t) => {
      w.begin();
      const ok = w.isoTime(t);
      expect(ok).toBe(Number.isSafeInteger(t) && t >= 0 && t < 253_402_300_800_000);
      expect(w.text()).toBe(ok ? `"${new Date(t).toISOString()}"` : '');
    }), { numRuns: 5000 });
  });

  it('writes a plain object of primitive values as JSON.stringify does, or fails', () => {
    const v = fc.oneof(fc.double(), fc.integer(), fc.string({ maxLength: 4 }), fc.boolean(), fc.constant(null), fc.constant(undefined), fc.constant({}), fc.constant(() => 1));
    const key = fc.oneof(fc.constantFrom('ticket', 'symbol', 'swapPaid', '0', '12', 'a"b', 'é', 'toJSON', '__proto__'), fc.string({ maxLength: 4 }));
    fc.assert(fc.property(fc.array(fc.tuple(key, v), { maxLength: 8 }), fc.boolean(), (entries, nullProto) => {
      const o: Record<string, unknown> = nullProto ? Object.create(null) : {};
      for (const [k, x] of entries) Object.defineProperty(o, k, { value: x, enumerable: true, writable: true, configurable: true });
      const expected = JSON.stringify(o);
      w.begin().obj(o);
      if (!w.failed) expect(w.text()).toBe(expected);
      const plainKeys = Object.keys(o).filter((k) => o[k] !== undefined).every((k) => /^[\x20-\x7e]*$/.test(k) && !/["\\]/.test(k));
      const plainValues = Object.values(o).every((x) => x === undefined || x === null || typeof x === 'number' || typeof x === 'boolean' || (typeof x === 'string' && /^[\x20-\x7e]*$/.test(x) && !/["\\]/.test(x)));
      expect(w.failed).toBe(nullProto || !plainKeys || !plainValues);
    }), { numRuns: 3000 });
  });

  it('grows its buffer for a long text', () => {
    const s = 'x'.repeat(5000);
    expect(w.begin().raw('[').str(s).raw(',').num(12345).raw(']').text()).toBe(JSON.stringify([s, 12345]));
  });
});
