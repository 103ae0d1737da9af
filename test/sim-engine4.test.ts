// Order-engine rules found by a black-box pass through the gateway: pending orders expire on
// the clock (not on their symbol's next tick), P4 re-ticketed orders name their own position.
import { describe, expect, it } from 'vitest';
import { connect, makeSim } from './sim-helpers.js';

/** Friday 2026-11-20 19:00 UTC = 21:00 server time: FX open until 23:55 server time. */
const FRI = Date.UTC(2026, 10, 20, 19, 0, 0);
const SAT_NOON = Date.UTC(2026, 10, 21, 12, 0, 0);
const SUN_NOON = Date.UTC(2026, 10, 22, 12, 0, 0);

describe('pending orders expire at their expiration time', () => {
  it.each([['Sim-P5-Demo'], ['Sim-P4-Demo']])('%s: an order expiring over the weekend (no ticks) leaves the book at its expiration, not at the next tick', async (server) => {
    const { sim, clock } = makeSim({ t0: FRI });
    const c = await connect(sim, server, '8201');
    const q = (await c.quote('EURUSD'))!;
    const r = await c.orderSend({ symbol: 'EURUSD', type: 'BuyLimit', volume: 0.1, price: +(q.ask - 0.01).toFixed(5), expiration: SAT_NOON });
    if (!r.ok) throw new Error(r.message);
    clock.set(SUN_NOON); // the market is closed: no EURUSD tick since Friday night
    sim.advance();
    expect((await c.openedOrders()).orders).toEqual([]);
    expect(await c.openedOrder(r.order.ticket)).toBeNull();
    const hist = await c.historyOrders(FRI, SUN_NOON + 1);
    expect(hist.map((o) => [o.ticket, o.state, o.closeTimeMsc])).toEqual([[r.order.ticket, 'expired', SAT_NOON]]);
    // It is gone: it can no longer be cancelled (which would rewrite its fate as 'cancelled').
    expect(await c.orderDelete({ ticket: r.order.ticket })).toMatchObject({ ok: false, reason: 'INVALID_TICKET' });
  });

  it('an order expiring between two requests is gone at the second one, with its expiration as close time', async () => {
    const { sim, clock } = makeSim();
    const c = await connect(sim, 'Sim-P5-Demo', '8202');
    const q = (await c.quote('EURUSD'))!;
    const t0 = clock.now();
    const r = await c.orderSend({ symbol: 'EURUSD', type: 'SellLimit', volume: 0.1, price: +(q.bid + 0.01).toFixed(5), expiration: t0 + 1500 });
    if (!r.ok) throw new Error(r.message);
    clock.advance(5000);
    expect((await c.openedOrders()).orders).toEqual([]);
    const hist = await c.historyOrders(t0, clock.now() + 1);
    expect(hist.map((o) => [o.state, o.closeTimeMsc])).toEqual([['expired', t0 + 1500]]);
  });
});

describe('P4 re-ticketing', () => {
  it('the rest of a partial close is its own position: its order record and its deals name the new ticket', async () => {
    const { sim, clock } = makeSim();
    const c = await connect(sim, 'Sim-P4-Demo', '8203');
    const t0 = clock.now();
    const r = await c.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 0.3 });
    if (!r.ok) throw new Error(r.message);
    const part = await c.orderClose({ ticket: r.order.ticket, lots: 0.1 });
    if (!part.ok) throw new Error(part.message);
    const rest = (await c.openedOrders()).positions[0]!;
    expect(rest.comment).toBe(`from #${r.order.ticket}`);
    const last = await c.orderClose({ ticket: rest.ticket });
    if (!last.ok) throw new Error(last.message);
    expect(last.order).toMatchObject({ ticket: rest.ticket, positionId: rest.ticket });
    const hist = await c.historyOrders(t0, clock.now() + 1);
    const deals = await c.historyDeals(t0, clock.now() + 1);
    for (const o of hist) {
      expect(o.positionId).toBe(o.ticket);
      for (const d of deals.filter((x) => x.order === o.ticket)) expect(d.position).toBe(o.positionId);
    }
    expect(hist.map((o) => o.ticket)).toEqual([r.order.ticket, rest.ticket]);
  });
});

describe('a closed market refuses every trade request', () => {
  it.each([['Sim-P5-Demo'], ['Sim-P4-Demo']])('%s: a pending order cannot be deleted while its market is closed (as it cannot be modified), and can again when it opens', async (server) => {
    const { sim, clock } = makeSim({ t0: FRI });
    const c = await connect(sim, server, '8204');
    const q = (await c.quote('EURUSD'))!;
    // Far from the market, so that it does not fill when the market reopens.
    const r = await c.orderSend({ symbol: 'EURUSD', type: 'BuyLimit', volume: 0.1, price: +(q.ask - 0.2).toFixed(5) });
    if (!r.ok) throw new Error(r.message);
    clock.set(SAT_NOON);
    expect(await c.orderModify({ ticket: r.order.ticket, price: +(q.ask - 0.21).toFixed(5) })).toMatchObject({ ok: false, reason: 'MARKET_CLOSED' });
    expect(await c.orderDelete({ ticket: r.order.ticket })).toMatchObject({ ok: false, reason: 'MARKET_CLOSED' });
    expect((await c.openedOrders()).orders.map((o) => o.ticket)).toEqual([r.order.ticket]);
    clock.set(Date.UTC(2026, 10, 23, 9, 0, 0)); // Monday
    expect(await c.orderDelete({ ticket: r.order.ticket })).toMatchObject({ ok: true, order: { state: 'cancelled' } });
  });
});
