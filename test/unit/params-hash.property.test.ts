// paramsHash hashes a request as [op, its keys sorted]: records stored before must still match, so
// for any object (keys in order or not, index-like keys, undefined values, nesting) it must be the
// digest of exactly the text the sorting copy gave.
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { paramsHash } from '../../src/runtime/hosts/tradeRequest.js';

const reference = (op: string, o: Record<string, unknown>) =>
  createHash('sha256').update(JSON.stringify([op, Object.fromEntries(Object.keys(o).sort().map((k) => [k, o[k]]))])).digest('base64url');

const key = fc.oneof(fc.constantFrom('symbol', 'type', 'volume', 'price', 'stoploss', 'takeprofit', 'comment', 'magic', '0', '7', '10', 'a1', 'Z'), fc.string({ maxLength: 3 }));
const value = fc.oneof(fc.double(), fc.string({ maxLength: 4 }), fc.constant(undefined), fc.constant(null), fc.array(fc.integer(), { maxLength: 2 }));

describe('paramsHash', () => {
  it('is the digest of [op, the keys sorted] for any request object', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(key, value), { maxLength: 8 }), fc.boolean(), (entries, sortFirst) => {
        if (sortFirst) entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
        const o: Record<string, unknown> = {};
        for (const [k, v] of entries) Object.defineProperty(o, k, { value: v, enumerable: true, writable: true, configurable: true });
        expect(paramsHash('OrderSend', o)).toBe(reference('OrderSend', o));
      }),
      { numRuns: 3000 },
    );
  });
});
