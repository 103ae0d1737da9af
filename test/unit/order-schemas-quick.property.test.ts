// quickOrderSend reads OrderSend's arguments without zod when they already have their types: what
// it returns must be exactly what TRADE_SCHEMAS.OrderSend yields (same keys, same order, same
// values; so the same params hash), and it must leave to the schema everything else (text
// numbers, missing or bad fields, broken rules), which answers with its own errors.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { quickOrderSend, TRADE_SCHEMAS } from '../../src/market/orderSchemas.js';

const FIELDS = ['operation', 'symbol', 'volume', 'lots', 'price', 'slippage', 'stoploss', 'takeprofit', 'comment', 'magic', 'expiration', 'stopLimitPrice', 'id', 'other'];
const NUMBERS = new Set(['volume', 'lots', 'price', 'slippage', 'stoploss', 'takeprofit', 'magic', 'expiration', 'stopLimitPrice']);

const anyValue = fc.oneof(
  fc.double(),
  fc.integer({ min: -3, max: 9 }),
  fc.constantFrom(0, -0, 0.01, 1.5, NaN, Infinity, -Infinity, null, undefined, true, '', ' ', '0.5', '1e2', 'abc', '0x10', 'Buy', 'sellLimit', 'BuyStopLimit', '3', '8', 'EURUSD', [1], {}),
  fc.string({ maxLength: 4 }),
);
/** Typed as the classic route sends them: names or codes, numbers as numbers. */
const typedValue = (k: string) =>
  k === 'operation' ? fc.oneof(fc.constantFrom('Buy', 'Sell', 'buylimit', 'SellStop', 'BuyStopLimit'), fc.integer({ min: 0, max: 7 }))
    : k === 'symbol' ? fc.constantFrom('EURUSD', 'BTCUSD')
    : k === 'comment' ? fc.string({ maxLength: 5 })
    : NUMBERS.has(k) ? fc.oneof(fc.double({ min: 0.01, max: 1e6, noNaN: true }), fc.integer({ min: 1, max: 100_000 }))
    : fc.string({ maxLength: 3 });

const args = (value: (k: string) => fc.Arbitrary<unknown>) =>
  fc.uniqueArray(fc.constantFrom(...FIELDS), { maxLength: FIELDS.length }).chain((keys) =>
    fc.tuple(...keys.map((k) => fc.oneof({ weight: 6, arbitrary: value(k) }, { weight: 1, arbitrary: fc.constant(undefined) }))).map((vals) => {
      const a: Record<string, unknown> = {};
      keys.forEach((k, i) => (a[k] = vals[i]));
      return a;
    }),
  );

const same = (a: Record<string, unknown>) => {
  const quick = quickOrderSend(a);
  const r = TRADE_SCHEMAS.OrderSend.safeParse(a);
  if (quick === undefined) return r;
  expect(r.success).toBe(true);
  expect(quick).toStrictEqual(r.data);
  expect(Object.keys(quick)).toEqual(Object.keys(r.data!));
  return r;
};

describe('quickOrderSend', () => {
  it('yields what the schema yields, or leaves the arguments to it', () => {
    // Mostly typed, a few fields odd: the cases either side of the line.
    const mixed = (k: string) => fc.oneof({ weight: 4, arbitrary: typedValue(k) }, { weight: 1, arbitrary: anyValue });
    fc.assert(fc.property(args(mixed), (a) => void same(a)), { numRuns: 5000 });
    fc.assert(fc.property(args(() => anyValue), (a) => void same(a)), { numRuns: 2000 });
  });

  it('reads typed arguments the schema accepts itself (the classic routes send those)', () => {
    fc.assert(
      fc.property(args(typedValue), (a) => {
        const r = same(a);
        if (r.success) expect(quickOrderSend(a)).toBeDefined();
      }),
      { numRuns: 5000 },
    );
  });
});
