// The journal row of a change is written field by field (src/store/simCodec.ts encodeChange): it
// must be byte for byte the JSON.stringify of the positional arrays written before (rows on disk
// are read by decodeChange either way), for the engine's records and for odd values, which go the
// packed way.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decodeChange, encodeChange, encodeChangePacked } from '../../src/store/simCodec.js';
import type { SimChange } from '../../src/sim/persistence.js';

const odd = fc.oneof(fc.constant(undefined), fc.constant(null), fc.constantFrom(NaN, -0, Infinity, 'a"b', 'é', '\n', true), fc.constant({}));
const num = fc.oneof({ weight: 8, arbitrary: fc.oneof(fc.double(), fc.integer(), fc.constantFrom(0.01, 81053.87, 1795671600001)) }, { weight: 1, arbitrary: odd });
const str = fc.oneof({ weight: 8, arbitrary: fc.oneof(fc.string({ maxLength: 6 }), fc.constantFrom('BTCUSD', 'Buy', 'in', 'filled', '')) }, { weight: 1, arbitrary: odd });
const maybe = <T>(a: fc.Arbitrary<T>) => fc.option(a, { nil: undefined });

const order = fc.record({
  kind: fc.constant('order'), ticket: num, symbol: str, type: str, state: str, volume: num, volumeInitial: num, openPrice: num, openTimeMsc: num,
  closePrice: maybe(num), closeTimeMsc: maybe(num), sl: num, tp: num, stopLimitPrice: maybe(num), expiration: maybe(num), magic: num, comment: str,
  commission: num, swap: num, profit: num, positionId: num,
}, { requiredKeys: ['kind', 'ticket', 'symbol', 'type', 'state', 'volume', 'volumeInitial', 'openPrice', 'openTimeMsc', 'sl', 'tp', 'magic', 'comment', 'commission', 'swap', 'profit', 'positionId'] });
const deal = fc.record({ ticket: num, order: num, position: num, symbol: str, type: str, entry: str, volume: num, price: num, timeMsc: num, magic: num, comment: str, commission: num, swap: num, profit: num });
const position = fc.record({ ticket: num, symbol: str, type: str, volume: num, openPrice: num, openTimeMsc: num, sl: num, tp: num, magic: num, comment: str, commission: num, swapPaid: num });

const change = fc
  .record({
    balance: maybe(num),
    orders: maybe(fc.array(fc.record({ order, doneMs: fc.oneof(num, fc.constant(null)), wasActive: maybe(fc.boolean()) }), { maxLength: 2 })),
    positions: maybe(fc.array(position, { maxLength: 2 })),
    closedPositions: maybe(fc.array(num, { maxLength: 3 })),
    deals: maybe(fc.array(deal, { maxLength: 2 })),
    equity: maybe(fc.record({ timeMsc: num, balance: num, equity: num })),
    request: maybe(fc.record({
      requestId: str, timeMsc: num,
      ok: fc.boolean(), sameOrder: fc.boolean(), sameDeals: fc.boolean(), order, deals: fc.array(deal, { maxLength: 2 }),
      reason: str, message: str, retcode: num,
    })),
  }, { requiredKeys: [] })
  .map(({ request, ...rest }) => {
    const c = rest as SimChange;
    if (request) {
      const own = c.orders?.[0]?.order;
      const result = request.ok
        ? { ok: true as const, order: request.sameOrder && own ? own : request.order, deals: request.sameDeals && c.deals ? [...c.deals].reverse() : request.deals, retcode: request.retcode }
        : { ok: false as const, reason: request.reason, message: request.message, retcode: request.retcode };
      c.request = { requestId: request.requestId, timeMsc: request.timeMsc, result } as SimChange['request'];
    }
    return c;
  });

describe('encodeChange', () => {
  it('writes what JSON.stringify of the packed arrays wrote, for any change', () => {
    fc.assert(fc.property(change, (c) => {
      const text = encodeChange(c);
      expect(text).toBe(encodeChangePacked(c));
      expect(decodeChange(text)).toEqual(decodeChange(encodeChangePacked(c)));
    }), { numRuns: 3000 });
  });

  it("writes an opening's change as the engine makes it (order and deals referred to, not repeated)", () => {
    const o = { kind: 'order', ticket: 100001, symbol: 'BTCUSD', type: 'Buy', state: 'filled', volume: 0.01, volumeInitial: 0.01, openPrice: 81053.87, openTimeMsc: 1795671600001, sl: 0, tp: 0, magic: 0, comment: '', commission: -0.05, swap: 0, profit: 0, positionId: 100001 } as const;
    const d = { ticket: 100002, order: 100001, position: 100001, symbol: 'BTCUSD', type: 'Buy', entry: 'in', volume: 0.01, price: 81053.87, timeMsc: 1795671600001, magic: 0, comment: '', commission: -0.05, swap: 0, profit: 0 } as const;
    const c = { balance: 9999.95, orders: [{ order: o, doneMs: 1795671600001, wasActive: false }], deals: [d], request: { requestId: 'a/b1/x', timeMsc: 1795671600001, result: { ok: true, order: o, deals: [d], retcode: 10009 } } } as unknown as SimChange;
    expect(encodeChange(c)).toBe('[9999.95,[[[100001,"BTCUSD","Buy","filled",0.01,0.01,81053.87,1795671600001,null,null,0,0,null,null,0,"",-0.05,0,0,100001],1795671600001,0]],0,0,[[100002,100001,100001,"BTCUSD","Buy","in",0.01,81053.87,1795671600001,0,"",-0.05,0,0]],["a/b1/x",1795671600001,1,0,[0],10009],0]');
  });
});
