// The positionsDelta extension's encoder and decoder (src/broker/bridgeProtocol.ts): the decoder's
// view after any sequence of lists equals the last list, and only changed records travel.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { PositionsDeltaDecoder, PositionsDeltaEncoder } from '../../src/broker/bridgeProtocol.js';
import type { Position } from '../../src/market/orders.js';

const pos = (ticket: number, profit: number): Position => ({
  kind: 'position', ticket, symbol: 'EURUSD', type: 'Buy', volume: 0.01, openPrice: 1.1, openTimeMsc: 1,
  currentPrice: 1.1, sl: 0, tp: 0, magic: 0, comment: '', commission: 0, swap: 0, profit,
});

describe('positionsDelta', () => {
  it('sends the changed and the removed positions only', () => {
    const enc = new PositionsDeltaEncoder();
    expect(enc.encode([pos(1, 0), pos(2, 0)]).upsert).toHaveLength(2);
    const d = enc.encode([pos(1, 0), pos(2, 5), pos(3, 0)]);
    expect(d.upsert.map((p) => p.ticket)).toEqual([2, 3]);
    expect(d.removed).toEqual([]);
    expect(enc.encode([pos(2, 5), pos(3, 0)])).toEqual({ upsert: [], removed: [1] });
  });

  it('the decoder ends with the last list, whatever came before', () => {
    const list = fc.uniqueArray(fc.record({ ticket: fc.integer({ min: 1, max: 12 }), profit: fc.integer({ min: 0, max: 3 }) }), { selector: (r) => r.ticket, maxLength: 12 });
    fc.assert(fc.property(fc.array(list, { minLength: 1, maxLength: 10 }), (lists) => {
      const enc = new PositionsDeltaEncoder();
      const dec = new PositionsDeltaDecoder();
      let view: Position[] = [];
      for (const l of lists) view = dec.apply(enc.encode(l.map((r) => pos(r.ticket, r.profit))));
      const last = lists.at(-1)!.map((r) => pos(r.ticket, r.profit));
      expect([...view].sort((a, b) => a.ticket - b.ticket)).toEqual([...last].sort((a, b) => a.ticket - b.ticket));
    }));
  });
});
