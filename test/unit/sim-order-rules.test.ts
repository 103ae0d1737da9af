// Order-engine rules found by a black-box pass over the simulator: swap after a partial close,
// stops and prices checked on modify as on send, prices on the symbol's digits grid.
import { describe, expect, it } from 'vitest';
import { connect, makeSim } from '../helpers/sim-helpers.js';

describe('swap after a partial close', () => {
  it.each([['Sim-P5-Demo'], ['Sim-P4-Demo']])('%s: the closed lots take their share; the remaining lots keep accruing theirs', async (server) => {
    const { sim, clock } = makeSim();
    const c = await connect(sim, server, '8101');
    const r = await c.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 1 });
    if (!r.ok) throw new Error(r.message);
    clock.advance(86_400_000); // past a rollover: swap accrued
    sim.advance();
    const accrued = (await c.openedOrder(r.order.ticket))!.swap;
    expect(accrued).not.toBe(0);
    const part = await c.orderClose({ ticket: r.order.ticket, lots: 0.5 });
    if (!part.ok) throw new Error(part.message);
    expect(part.deals[0]!.swap).toBeCloseTo(accrued / 2, 2);
    // P4 re-tickets the rest; P5 keeps the position id.
    const left = (await c.openedOrders()).positions[0]!;
    expect(left.volume).toBeCloseTo(0.5, 9);
    expect(left.swap).toBeCloseTo(accrued / 2, 2);
    const rest = await c.orderClose({ ticket: left.ticket });
    if (!rest.ok) throw new Error(rest.message);
    expect(part.deals[0]!.swap + rest.deals[0]!.swap).toBeCloseTo(accrued, 1);
  });
});

describe('modify checks what send checks', () => {
  it('a negative stop loss or take profit is refused on a position and on a pending order', async () => {
    const { sim } = makeSim();
    const c = await connect(sim, 'Sim-P5-Demo', '8102');
    const q = (await c.quote('EURUSD'))!;
    const pos = await c.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 0.1 });
    const pend = await c.orderSend({ symbol: 'EURUSD', type: 'BuyLimit', volume: 0.1, price: +(q.ask - 0.01).toFixed(5) });
    if (!pos.ok || !pend.ok) throw new Error('setup');
    for (const ticket of [pos.order.ticket, pend.order.ticket]) {
      expect(await c.orderModify({ ticket, stoploss: -5 })).toMatchObject({ ok: false, reason: 'INVALID_STOPS' });
      expect(await c.orderModify({ ticket, takeprofit: -1 })).toMatchObject({ ok: false, reason: 'INVALID_STOPS' });
    }
    expect((await c.openedOrder(pos.order.ticket))!.sl).toBe(0);
  });

  it('a stop-limit order cannot be modified to a limit price on the wrong side of its stop', async () => {
    const { sim } = makeSim();
    const c = await connect(sim, 'Sim-P5-Demo', '8103');
    const q = (await c.quote('EURUSD'))!;
    const stop = +(q.ask + 0.01).toFixed(5);
    const r = await c.orderSend({ symbol: 'EURUSD', type: 'BuyStopLimit', volume: 0.1, price: stop, stopLimitPrice: +(stop - 0.002).toFixed(5) });
    if (!r.ok) throw new Error(r.message);
    expect(await c.orderModify({ ticket: r.order.ticket, stopLimitPrice: +(stop + 0.002).toFixed(5) })).toMatchObject({ ok: false, reason: 'INVALID_PRICE' });
    expect(await c.orderModify({ ticket: r.order.ticket, stopLimitPrice: +(stop - 0.001).toFixed(5) })).toMatchObject({ ok: true });
  });
});

describe('prices on the digits grid', () => {
  it('prices, stops and stop-limit prices with more decimals than the symbol has are refused, on send and on modify', async () => {
    const { sim } = makeSim();
    const c = await connect(sim, 'Sim-P5-Demo', '8104');
    const q = (await c.quote('BTCUSD'))!; // digits 2
    expect(await c.orderSend({ symbol: 'BTCUSD', type: 'BuyLimit', volume: 0.01, price: Math.floor(q.ask * 0.9) + 0.247 })).toMatchObject({ ok: false, reason: 'INVALID_PRICE' });
    expect(await c.orderSend({ symbol: 'BTCUSD', type: 'Buy', volume: 0.01, stoploss: Math.floor(q.bid * 0.9) + 0.233 })).toMatchObject({ ok: false, reason: 'INVALID_STOPS' });
    expect(await c.orderSend({ symbol: 'BTCUSD', type: 'Buy', volume: 0.01, takeprofit: Math.floor(q.ask * 1.1) + 0.14001 })).toMatchObject({ ok: false, reason: 'INVALID_STOPS' });
    const ok = await c.orderSend({ symbol: 'BTCUSD', type: 'Buy', volume: 0.01, stoploss: Math.floor(q.bid * 0.9) + 0.25 });
    if (!ok.ok) throw new Error(ok.message);
    expect(await c.orderModify({ ticket: ok.order.ticket, stoploss: Math.floor(q.bid * 0.9) + 0.251 })).toMatchObject({ ok: false, reason: 'INVALID_STOPS' });
    const eur = (await c.quote('EURUSD'))!; // digits 5: 1.08123 is fine
    expect(await c.orderSend({ symbol: 'EURUSD', type: 'BuyLimit', volume: 0.1, price: +(eur.ask - 0.01).toFixed(5) })).toMatchObject({ ok: true });
  });
});

describe('history reaches back whole bars only', () => {
  it('the oldest bar is the same whenever it is asked for (no bar cut at the moving history floor)', async () => {
    const { sim, clock } = makeSim();
    const c = await connect(sim, 'Sim-P5-Demo', '8105');
    // Only the oldest days are asked for: the bars after them are not what this is about, and
    // aggregating the whole history (35 days) took seconds.
    const nearFloor = () => clock.now() - (sim.options.config.historyDays - 4) * 86_400_000;
    for (const tf of ['D1', 'H4'] as const) {
      const a = await c.priceHistory('BTCUSD', tf, 0, nearFloor());
      clock.advance(1_000);
      sim.advance();
      const b = await c.priceHistory('BTCUSD', tf, 0, nearFloor());
      expect(a.length).toBeGreaterThan(0);
      expect(b[0]).toEqual(a[0]);
      const p4 = await connect(sim, 'Sim-P4-Demo', '8106');
      const q1 = await p4.quoteHistory('BTCUSD', tf, nearFloor(), 10_000);
      clock.advance(1_000);
      sim.advance();
      const q2 = await p4.quoteHistory('BTCUSD', tf, nearFloor(), 10_000);
      expect(q1.length).toBeGreaterThan(0);
      expect(q2[0]).toEqual(q1[0]);
    }
  });
});

describe('expiration must be a time with a calendar date', () => {
  it('an expiration beyond year 9999 (or not a number) is refused on send and on modify, and nothing is placed', async () => {
    const { sim } = makeSim();
    const c = await connect(sim, 'Sim-P5-Demo', '8110');
    const q = (await c.quote('EURUSD'))!;
    const price = +(q.ask - 0.01).toFixed(5);
    for (const expiration of [8_640_000_000_000_001, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(await c.orderSend({ symbol: 'EURUSD', type: 'BuyLimit', volume: 0.1, price, expiration })).toMatchObject({ ok: false, reason: 'INVALID_EXPIRATION', message: 'expiration is not a valid time' });
    }
    expect((await c.openedOrders()).orders).toHaveLength(0);
    const placed = await c.orderSend({ symbol: 'EURUSD', type: 'BuyLimit', volume: 0.1, price });
    if (!placed.ok) throw new Error(placed.message);
    expect(await c.orderModify({ ticket: placed.order.ticket, expiration: 8_640_000_000_000_001 })).toMatchObject({ ok: false, reason: 'INVALID_EXPIRATION' });
    expect((await c.openedOrder(placed.order.ticket))!).not.toHaveProperty('expiration');
  });
});
