// Order-engine rules found by a black-box pass through the gateway: pending orders expire on
// the clock (not on their symbol's next tick), P4 re-ticketed orders name their own position.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { connect, makeSim } from '../helpers/sim-helpers.js';

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

describe('the next expiration the book keeps (so a clock step need not walk every order)', () => {
  // Over a weekend no tick comes to expire an order on its symbol's tick: only the clock step does.
  const far = (ask: number, k: number) => +(ask - 0.05 - k * 0.001).toFixed(5); // never fills
  const SAT = (h: number) => Date.UTC(2026, 10, 21, h, 0, 0);

  it('an expiration moved earlier by a modify is kept: the order leaves at the new time', async () => {
    const { sim, clock } = makeSim({ t0: FRI });
    const c = await connect(sim, 'Sim-P5-Demo', '8210');
    const q = (await c.quote('EURUSD'))!;
    const r = await c.orderSend({ symbol: 'EURUSD', type: 'BuyLimit', volume: 0.1, price: far(q.ask, 0), expiration: SUN_NOON });
    if (!r.ok) throw new Error(r.message);
    expect(await c.orderModify({ ticket: r.order.ticket, expiration: SAT_NOON })).toMatchObject({ ok: true });
    clock.set(SAT(13));
    sim.advance();
    expect((await c.openedOrders()).orders).toEqual([]);
    const hist = await c.historyOrders(FRI, clock.now() + 1);
    expect(hist.map((o) => [o.state, o.closeTimeMsc])).toEqual([['expired', SAT_NOON]]);
  });

  it('an order that left the book before its expiration does not hold up the next one', async () => {
    const { sim, clock } = makeSim({ t0: FRI });
    const c = await connect(sim, 'Sim-P5-Demo', '8211');
    const q = (await c.quote('EURUSD'))!;
    const first = await c.orderSend({ symbol: 'EURUSD', type: 'BuyLimit', volume: 0.1, price: far(q.ask, 0), expiration: SAT(10) });
    const second = await c.orderSend({ symbol: 'EURUSD', type: 'BuyLimit', volume: 0.1, price: far(q.ask, 1), expiration: SAT(14) });
    if (!first.ok || !second.ok) throw new Error('orders refused');
    expect(await c.orderDelete({ ticket: first.order.ticket })).toMatchObject({ ok: true });
    clock.set(SAT(12));
    sim.advance(); // the stale earliest expiration is passed: a walk finds nothing due
    expect((await c.openedOrders()).orders.map((o) => o.ticket)).toEqual([second.order.ticket]);
    clock.set(SAT(15));
    sim.advance();
    expect((await c.openedOrders()).orders).toEqual([]);
    const hist = await c.historyOrders(FRI, clock.now() + 1);
    expect(hist.map((o) => [o.ticket, o.state, o.closeTimeMsc])).toEqual([[first.order.ticket, 'cancelled', FRI], [second.order.ticket, 'expired', SAT(14)]]);
  });

  it('property: whatever the places, modifies and deletes, after each clock step exactly the orders not yet due are on the book, and each expired one closed at its expiration', async () => {
    type Op = { k: 'place'; exp: number | null } | { k: 'modify'; i: number; exp: number } | { k: 'delete'; i: number } | { k: 'wait'; ms: number };
    const HOUR = 3_600_000;
    // From Friday 19:00 UTC the market closes 2 h 55 min later: the orders outlive it into the weekend.
    const op: fc.Arbitrary<Op> = fc.oneof(
      fc.record({ k: fc.constant('place' as const), exp: fc.option(fc.integer({ min: 60_000, max: 30 * HOUR })) }),
      fc.record({ k: fc.constant('modify' as const), i: fc.nat(), exp: fc.integer({ min: 60_000, max: 30 * HOUR }) }),
      fc.record({ k: fc.constant('delete' as const), i: fc.nat() }),
      fc.record({ k: fc.constant('wait' as const), ms: fc.integer({ min: 60_000, max: 8 * HOUR }) }),
    );
    let login = 8300;
    await fc.assert(fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 25 }), async (ops) => {
      const { sim, clock } = makeSim({ t0: FRI });
      const c = await connect(sim, 'Sim-P5-Demo', String(login++));
      const q = (await c.quote('EURUSD'))!;
      const expiry = new Map<number, number | undefined>(); // the model: ticket -> expiration, while on the book
      const expired = new Map<number, number>();
      let k = 0;
      for (const o of ops) {
        const live = [...expiry.keys()];
        if (o.k === 'place') {
          const exp = o.exp === null ? undefined : clock.now() + o.exp;
          const r = await c.orderSend({ symbol: 'EURUSD', type: 'BuyLimit', volume: 0.01, price: far(q.ask, k++ % 40), ...(exp !== undefined ? { expiration: exp } : {}) });
          if (r.ok) expiry.set(r.order.ticket, exp);
          else expect(r.reason).toBe('MARKET_CLOSED');
        } else if (o.k === 'modify' && live.length) {
          const t = live[o.i % live.length]!;
          const exp = clock.now() + o.exp;
          const r = await c.orderModify({ ticket: t, expiration: exp });
          if (r.ok) expiry.set(t, exp);
          else expect(r.reason).toBe('MARKET_CLOSED');
        } else if (o.k === 'delete' && live.length) {
          const t = live[o.i % live.length]!;
          const r = await c.orderDelete({ ticket: t });
          if (r.ok) expiry.delete(t);
          else expect(r.reason).toBe('MARKET_CLOSED');
        } else if (o.k === 'wait') {
          clock.advance(o.ms);
          sim.advance();
          for (const [t, e] of expiry) {
            if (e !== undefined && clock.now() >= e) {
              expired.set(t, e);
              expiry.delete(t);
            }
          }
        }
        expect((await c.openedOrders()).orders.map((x) => x.ticket).sort()).toEqual([...expiry.keys()].sort());
      }
      const hist = await c.historyOrders(FRI, clock.now() + 1);
      for (const [t, e] of expired) expect(hist.find((h) => h.ticket === t)).toMatchObject({ state: 'expired', closeTimeMsc: e });
    }), { numRuns: 30 });
    // Thirty runs of hours of simulated ticks: ~6 s on a quiet 2-core machine, 20+ s on a busy one.
  }, 60_000);
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

describe('stop-out and closed markets', () => {
  // A closed market has no price to close at: stop-out closes positions whose market is open, and
  // leaves the others for when their market opens (before, it closed the worst position whatever
  // its market, at the last quote before the close).
  it('on a weekend, stop-out closes only positions whose market is open; the rest at the reopening', async () => {
    const { sim, clock } = makeSim({ t0: FRI, seed: 5 });
    const c = await connect(sim, 'Sim-P5-Demo', '8230');
    const fx = await c.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 1 });
    const a = await c.orderSend({ symbol: 'BTCUSD', type: 'Buy', volume: 1.5 });
    const b = await c.orderSend({ symbol: 'BTCUSD', type: 'Sell', volume: 1.4 });
    if (!fx.ok || !a.ok || !b.ok) throw new Error('orders refused');
    const acc = sim.server('Sim-P5-Demo')!.accounts.get('8230')!;
    const outs: { symbol: string; comment: string; timeMsc: number }[] = [];
    c.on('deal', (d) => d.entry === 'out' && outs.push({ symbol: d.symbol, comment: d.comment, timeMsc: d.timeMsc }));
    clock.set(SAT_NOON);
    sim.advance();
    expect(outs).toEqual([]);
    // Saturday, FX closed: the EURUSD position becomes the worst by far (-5,000 USD) and the
    // account falls below stop-out as BTCUSD moves (reaching in, as the other stop-out test does).
    (acc.positions.get(fx.order.positionId ?? fx.order.ticket) as { openPrice: number }).openPrice += 0.05;
    acc.data.balance = 5_200;
    for (let i = 0; i < 600 && outs.length < 2; i++) {
      clock.advance(1000);
      sim.advance();
    }
    // Saturday: the BTCUSD positions go (their market trades), the EURUSD one stays open.
    expect(outs.length).toBeGreaterThan(0);
    expect(outs.map((o) => o.symbol), JSON.stringify(outs)).not.toContain('EURUSD');
    expect(outs.every((o) => o.symbol === 'BTCUSD' && o.comment.startsWith('[so '))).toBe(true);
    expect((await c.openedOrders()).positions.map((p) => p.symbol)).toContain('EURUSD');
    // Still below stop-out when FX reopens (Sunday 22:00 UTC here): the EURUSD position is stopped
    // out then, at a fresh price.
    acc.data.balance = 100;
    const MON = Date.UTC(2026, 10, 23, 6, 0, 0);
    clock.set(MON);
    sim.advance();
    for (let i = 0; i < 600 && !outs.some((o) => o.symbol === 'EURUSD'); i++) {
      clock.advance(1000);
      sim.advance();
    }
    const eur = outs.find((o) => o.symbol === 'EURUSD');
    expect(eur?.comment).toMatch(/^\[so /);
    expect(eur!.timeMsc).toBeGreaterThan(Date.UTC(2026, 10, 22, 21, 0, 0));
  });
});
