// A filled trade's answer bytes come from one object literal when the order and deals have the
// opening's shape: they must be exactly what JSON.stringify(utc({ ...order, retcode, deals })) wrote
// before, for that shape and for every other record (other key orders, extra or missing keys,
// odd values), which take the generic way.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Deal, Order } from '../../src/market/orders.js';
import { utc } from '../../src/runtime/hosts/accountOps.js';
import { filledAnswerJson } from '../../src/runtime/hosts/answerJson.js';
import { openingRecords } from '../../src/sim/records.js';
import type { MarketSymbol } from '../../src/sim/market.js';

const generic = (o: unknown, retcode: number, deals: unknown) => JSON.stringify(utc({ ...(o as object), retcode, deals }));

const prim = fc.oneof(
  fc.double(),
  fc.integer(),
  fc.constantFrom(0, -0, NaN, Infinity, 8.64e15, 8.64e15 + 1, 1795671600001),
  fc.string({ maxLength: 6 }),
  fc.constantFrom('a"b', '\\', '\u2028', '\ud800', ''),
  fc.boolean(),
  fc.constant(null),
  fc.constant(undefined),
);
const odd = fc.oneof({ weight: 8, arbitrary: prim }, { weight: 1, arbitrary: fc.dictionary(fc.constantFrom('timeMsc', 'x'), prim, { maxKeys: 2 }) });
const STRINGS = new Set(['kind', 'symbol', 'type', 'state', 'comment', 'entry']);
/** Mostly a value of the field's type (times among them, often the same instant), sometimes anything. */
const value = (k: string) =>
  fc.oneof(
    { weight: 6, arbitrary: STRINGS.has(k) ? fc.oneof(fc.string({ maxLength: 6 }), fc.constantFrom('a"b', '\ud800', 'BTCUSD')) : fc.oneof(fc.double(), fc.constantFrom(1795671600001, 1795671600002, -0, NaN, 8.64e15 + 1)) },
    { weight: 1, arbitrary: odd },
  );

/** A record of the given keys (mostly in order; sometimes one dropped, swapped or added). */
const record = (keys: readonly string[]) =>
  fc
    .tuple(
      fc.tuple(...keys.map((k) => value(k))),
      fc.constantFrom('same', 'same', 'same', 'drop', 'swap', 'add', 'addTime'),
      fc.nat(keys.length - 1),
    )
    .map(([vals, change, at]) => {
      const ks = [...keys];
      const vs: unknown[] = [...vals];
      if (change === 'drop') (ks.splice(at, 1), vs.splice(at, 1));
      if (change === 'swap' && at > 0) [ks[at - 1], ks[at]] = [ks[at]!, ks[at - 1]!];
      if (change === 'add') (ks.splice(at, 0, 'closePrice'), vs.splice(at, 0, 1.5));
      if (change === 'addTime') (ks.splice(at, 0, at % 2 ? 'openTime' : 'time'), vs.splice(at, 0, 'x'));
      const o: Record<string, unknown> = {};
      ks.forEach((k, i) => (o[k] = vs[i]));
      return o;
    });

const ORDER = ['kind', 'ticket', 'symbol', 'type', 'state', 'volume', 'volumeInitial', 'openPrice', 'openTimeMsc', 'sl', 'tp', 'magic', 'comment', 'commission', 'swap', 'profit', 'positionId'];
const DEAL = ['ticket', 'order', 'position', 'symbol', 'type', 'entry', 'volume', 'price', 'timeMsc', 'magic', 'comment', 'commission', 'swap', 'profit'];

describe('filledAnswerJson', () => {
  it('writes what utc() and JSON.stringify wrote, for any order and deals', () => {
    fc.assert(
      fc.property(record(ORDER), fc.array(record(DEAL), { maxLength: 3 }), fc.oneof(fc.integer(), fc.constant(NaN)), (o, ds, rc) => {
        expect(filledAnswerJson(o as unknown as Order, rc, ds as unknown as Deal[])).toBe(generic(o, rc, ds));
      }),
      { numRuns: 5000 },
    );
  });

  it('an opening as the simulator books it, with a close time that has no calendar date too', () => {
    const s = { info: { name: 'BTCUSD' } } as unknown as MarketSymbol;
    for (const now of [Date.UTC(2026, 10, 26, 5, 40, 0, 1), 8.64e15 + 1]) {
      const { order, deal } = openingRecords(11, 12, s, 'Buy', { volume: 0.01, comment: 'x"y' }, 91234.5, 0, 0, -0.05, now, null);
      const json = filledAnswerJson(order, 10009, [deal]);
      expect(json).toBe(generic(order, 10009, [deal]));
      expect(JSON.parse(json)).toMatchObject({ openTimeMsc: now, openTime: now < 8.64e15 ? '2026-11-26T05:40:00.001Z' : null, deals: [{ timeMsc: now }] });
    }
  });
});
