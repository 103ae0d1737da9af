// One schema per classic trade operation (src/market/orderSchemas.ts), read in the account's shard.
// The canonical request it yields is what an idempotency record's params hash covers: the hashes
// below were computed by the hand parser it replaced, so records stored before still match.
import { describe, expect, it } from 'vitest';
import { TRADE_SCHEMAS } from '../../src/market/orderSchemas.js';
import { paramsHash, prepare } from '../../src/runtime/hosts/accountTrade.js';
import type { TradeOp } from '../../src/market/orderSchemas.js';

const P5 = { platform: 'P5' as const, build: 5000 };
const P4 = { platform: 'P4' as const, build: 1400 };

describe('classic trade schemas', () => {
  it('yield the same canonical requests (and params hashes) as the parser they replaced', () => {
    const cases: [TradeOp, Record<string, unknown>][] = [
      ['OrderSend', { symbol: 'EURUSD', operation: 'buylimit', volume: 0.1, price: 1.1, stoploss: 1.0, comment: 'x', magic: 7 }],
      ['OrderSend', { symbol: 'EURUSD', operation: '1', lots: 0.2 }],
      ['OrderModify', { ticket: '12', stoploss: 1.2 }],
      ['OrderClose', { ticket: 12, volume: 0.05 }],
      ['OrderCloseBy', { ticket: '3', byTicket: '4' }],
      ['OrderDelete', { ticket: '9' }],
    ];
    expect(cases.map(([op, a]) => paramsHash(op, prepare(op, a, P5).canonical))).toEqual([
      '9JZj3CvVfN-1KRONmbaqC0EPAxxsc70wA89KsSxz8TM', 'D6y1aLsYrl9k7enMhcTkiioMr3x3e3bucKl3s7yGFjM',
      'YO7Bhx2UXkkRIO0k3nBedGgmJwBVTT6Lmwu_Hz9v_28', 'qSBLN1_6gp_elTwFLwlPZjD0GoV6bFhmwmz6cqcUNTA',
      '3kf--XVJSA3JxEHhKpWfeSuga_S148Fm26GhF_sqHRU', 'hgI7b_EalDYko3RS2W1wZfR9E8dm3r8W-42r5V1xqoI',
    ]);
    expect(prepare('OrderSend', { symbol: 'EURUSD', operation: 2, lots: 0.3, price: 1.05 }, P5).canonical)
      .toEqual({ symbol: 'EURUSD', type: 'BuyLimit', volume: 0.3, price: 1.05 });
  });

  it('refuse a bad request with a 400 naming each parameter, before anything is recorded or sent', () => {
    const bad = (op: TradeOp, a: Record<string, unknown>, entry: { platform: 'P4' | 'P5'; build: number } = P5) => {
      try {
        prepare(op, a, entry);
      } catch (e) {
        return [(e as { code: string }).code, (e as Error).message];
      }
      return ['accepted'];
    };
    expect(bad('OrderSend', { symbol: 'EURUSD', volume: 1 })).toEqual(['BAD_REQUEST', expect.stringMatching(/parameter 'operation': is required/)]);
    expect(bad('OrderSend', { symbol: 'EURUSD', operation: 'Hold', volume: 1 })).toEqual(['BAD_REQUEST', expect.stringMatching(/unknown order type Hold/)]);
    expect(bad('OrderSend', { operation: 'Buy', volume: 1 })).toEqual(['BAD_REQUEST', expect.stringMatching(/parameter 'symbol'/)]);
    expect(bad('OrderSend', { symbol: 'EURUSD', operation: 'Buy', volume: 0 })).toEqual(['BAD_REQUEST', expect.stringMatching(/parameter 'volume': must be a positive number/)]);
    expect(bad('OrderSend', { symbol: 'EURUSD', operation: 'SellStop', volume: 1 })).toEqual(['BAD_REQUEST', expect.stringMatching(/parameter 'price': is required for SellStop/)]);
    expect(bad('OrderSend', { symbol: 'EURUSD', operation: 'BuyStopLimit', volume: 1, price: 1, stopLimitPrice: 1 }, P4))
      .toEqual(['BAD_REQUEST', expect.stringMatching(/do not exist on P4/)]);
    expect(bad('OrderModify', { ticket: '-3' })).toEqual(['BAD_REQUEST', "parameter 'ticket': must be a positive integer"]);
    expect(bad('OrderCloseBy', { ticket: '3', byTicket: 'x' })).toEqual(['BAD_REQUEST', "parameter 'byTicket': must be a positive integer"]);
    expect(bad('OrderSend', { symbol: 'EURUSD', operation: 'Buy', volume: 'lots' })).toEqual(['BAD_REQUEST', expect.stringMatching(/parameter 'volume'/)]);
    // Fields of another kind of order are refused, not dropped (as /v1/proxy's checkOrder does).
    expect(bad('OrderSend', { symbol: 'EURUSD', operation: 'BuyStop', volume: 1, price: 1.2, stopLimitPrice: 1.19 }))
      .toEqual(['BAD_REQUEST', "parameter 'stopLimitPrice': only for stop-limit orders, not BuyStop"]);
    expect(bad('OrderSend', { symbol: 'EURUSD', operation: 0, volume: 1, expiration: 1_900_000_000_000 }))
      .toEqual(['BAD_REQUEST', "parameter 'expiration': only for pending orders, not Buy"]);
    expect(bad('OrderSend', { symbol: 'EURUSD', operation: 'SellLimit', volume: 1, price: 1.2, expiration: 1_900_000_000_000 })).toEqual(['accepted']);
    expect(bad('OrderSend', { symbol: 'EURUSD', operation: 'SellStopLimit', volume: 1, price: 1.1, stopLimitPrice: 1.11 })).toEqual(['accepted']);
  });

  it('has a schema for every classic trade operation', () => {
    expect(Object.keys(TRADE_SCHEMAS).sort()).toEqual(['OrderClose', 'OrderCloseBy', 'OrderDelete', 'OrderModify', 'OrderSend']);
  });
});
