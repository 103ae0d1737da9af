import { describe, expect, it } from 'vitest';
import { BrokerAuthError, BrokerTimeoutError } from '../../src/market/brokerErrors.js';
import { connect, makeSim, T0 } from '../helpers/sim-helpers.js';

describe('simulated order engine', () => {
  it('creates the account on first connect with the demo deposit as a balance deal', async () => {
    const { sim } = makeSim();
    const c = await connect(sim);
    const sum = await c.accountSummary();
    expect(sum).toMatchObject({ balance: 10000, equity: 10000, margin: 0, leverage: 100, currency: 'USD' });
    const bal = await c.balanceHistory(0, T0 + 1);
    expect(bal).toHaveLength(1);
    expect(bal[0]).toMatchObject({ type: 'Balance', entry: 'balance', profit: 10000 });
  });

  it('refuses a later connect with a wrong password, without echoing it', async () => {
    const { sim } = makeSim();
    await connect(sim, 'Sim-P5-Demo', '42', 'right');
    const err = await connect(sim, 'Sim-P5-Demo', '42', 'wrong-secret').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(BrokerAuthError);
    expect(String((err as Error).message)).not.toContain('wrong-secret');
  });

  it('opens and closes a market position with deals, commission and profit', async () => {
    const { sim, clock } = makeSim();
    const c = await connect(sim);
    const q = (await c.quote('EURUSD'))!;
    const r = await c.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 1, magic: 77, comment: 'hello' });
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.order.openPrice).toBe(q.ask);
    expect(r.deals[0]).toMatchObject({ entry: 'in', magic: 77, comment: 'hello', commission: -3.5, position: r.order.ticket });
    const { positions } = await c.openedOrders();
    expect(positions).toHaveLength(1);
    const m = await c.accountSummary();
    expect(m.margin).toBeCloseTo((100000 / 100) * q.bid, 0);
    clock.advance(60_000);
    const closed = await c.orderClose({ ticket: r.order.ticket });
    expect(closed.ok).toBe(true);
    if (!closed.ok) return;
    const out = closed.deals[0]!;
    expect(out.entry).toBe('out');
    expect(out.profit).toBeCloseTo((out.price - r.order.openPrice) * 100000, 2);
    const sum = await c.accountSummary();
    expect(sum.balance).toBeCloseTo(10000 - 3.5 - 3.5 + out.profit, 6);
    expect((await c.openedOrders()).positions).toHaveLength(0);
  });

  it('rejects invalid volume, stops and requotes as values', async () => {
    const { sim } = makeSim();
    const c = await connect(sim);
    const q = (await c.quote('EURUSD'))!;
    expect(await c.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 0.015 })).toMatchObject({ ok: false, reason: 'INVALID_VOLUME' });
    expect(await c.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 0.1, stoploss: q.bid - 0.00005 })).toMatchObject({ ok: false, reason: 'INVALID_STOPS' });
    expect(await c.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 0.1, price: q.ask - 0.001, slippage: 3 })).toMatchObject({ ok: false, reason: 'REQUOTE' });
    expect(await c.orderSend({ symbol: 'NOPE', type: 'Buy', volume: 0.1 })).toMatchObject({ ok: false, reason: 'UNKNOWN_SYMBOL' });
    expect(await c.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 100 })).toMatchObject({ ok: false, reason: 'NO_MONEY' });
  });

  it('rejects stop-limit orders on P4 and accepts them on P5', async () => {
    const { sim } = makeSim();
    const p4 = await connect(sim, 'Sim-P4-Demo');
    const p5 = await connect(sim, 'Sim-P5-Demo');
    const q = (await p5.quote('EURUSD'))!;
    const req = { symbol: 'EURUSD', type: 'BuyStopLimit' as const, volume: 0.1, price: q.ask + 0.002, stopLimitPrice: q.ask + 0.0015 };
    expect(await p4.orderSend(req)).toMatchObject({ ok: false, reason: 'UNSUPPORTED_ORDER_TYPE' });
    expect(await p5.orderSend(req)).toMatchObject({ ok: true, order: { state: 'placed' } });
  });

  it('refuses modifying within stopsLevel and within freezeLevel', async () => {
    const { sim } = makeSim();
    const c = await connect(sim);
    const q = (await c.quote('EURUSD'))!;
    const r = await c.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 0.1, stoploss: q.bid - 0.0005 });
    if (!r.ok) throw new Error(r.message);
    // stopsLevel = 10 points = 0.0001
    expect(await c.orderModify({ ticket: r.order.ticket, stoploss: q.bid - 0.00005 })).toMatchObject({ ok: false, reason: 'INVALID_STOPS' });
    expect(await c.orderModify({ ticket: r.order.ticket, stoploss: q.bid - 0.0003 })).toMatchObject({ ok: true });
    // A pending order priced within the freeze level (5 points) of the market is frozen.
    const pend = await c.orderSend({ symbol: 'EURUSD', type: 'BuyLimit', volume: 0.1, price: q.ask - 0.0002 });
    if (!pend.ok) throw new Error(pend.message);
    const acc = sim.server('Sim-P5-Demo')!.accounts.get('1001')!;
    acc.orders.set(pend.order.ticket, { ...pend.order, openPrice: q.ask - 0.00003 });
    expect(await c.orderModify({ ticket: pend.order.ticket, takeprofit: q.ask + 0.01 })).toMatchObject({ ok: false, reason: 'FROZEN' });
    expect(await c.orderDelete({ ticket: pend.order.ticket })).toMatchObject({ ok: false, reason: 'FROZEN' });
  });

  it('dedups trades by request id and reports timeout-after-send faults', async () => {
    const { sim } = makeSim();
    const c = await connect(sim);
    sim.faults.set({ server: 'Sim-P5-Demo', kind: 'timeoutAfterSend', count: 1 });
    const err = await c.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 0.1 }, { requestId: 'abc' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(BrokerTimeoutError);
    expect((err as BrokerTimeoutError).sent).toBe(true);
    const again = await c.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 0.1 }, { requestId: 'abc' });
    expect(again.ok).toBe(true);
    expect((await c.openedOrders()).positions).toHaveLength(1);
    expect((await c.lookupRequest('abc'))?.result).toEqual(again);
    expect(await c.lookupRequest('nope')).toBeNull();
  });

  it('injects rejects and connection drops', async () => {
    const { sim, clock } = makeSim();
    const c = await connect(sim);
    const states: string[] = [];
    c.on('state', (s) => states.push(s.state));
    sim.faults.set({ server: 'Sim-P5-Demo', login: '1001', kind: 'reject', count: 1 });
    expect(await c.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 0.1 })).toMatchObject({ ok: false, reason: 'REJECTED' });
    expect((await c.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 0.1 })).ok).toBe(true);
    sim.faults.set({ server: 'Sim-P5-Demo', kind: 'drop', durationMs: 5000 });
    expect(c.state).toBe('disconnected');
    await expect(c.connect()).rejects.toThrow(/unreachable/);
    clock.advance(5001);
    await c.connect();
    expect(states).toEqual(['disconnected', 'connecting', 'disconnected', 'connecting', 'connected']);
    expect((await c.openedOrders()).positions).toHaveLength(1);
  });

  it('triggers pending orders and SL/TP on ticks', async () => {
    const { sim, clock } = makeSim();
    const c = await connect(sim);
    const q = (await c.quote('EURUSD'))!;
    const deals: string[] = [];
    c.on('deal', (d) => deals.push(d.entry));
    const buyStop = await c.orderSend({ symbol: 'EURUSD', type: 'BuyStop', volume: 0.1, price: q.ask + 0.0002 });
    const sellStop = await c.orderSend({ symbol: 'EURUSD', type: 'SellStop', volume: 0.1, price: q.bid - 0.0002 });
    expect(buyStop.ok && sellStop.ok).toBe(true);
    for (let i = 0; i < 600 && deals.length < 2; i++) {
      clock.advance(1000);
      sim.advance();
    }
    expect(deals.length).toBeGreaterThanOrEqual(1);
    const hist = await c.historyDeals(0, clock.now() + 1);
    for (const d of hist.filter((x) => x.entry === 'in')) {
      const orderTicket = d.order;
      const o = [buyStop, sellStop].find((r) => r.ok && r.order.ticket === orderTicket);
      expect(o && o.ok).toBe(true);
      if (o?.ok) expect(o.order.type === 'BuyStop' ? d.price >= o.order.openPrice : d.price <= o.order.openPrice).toBe(true);
    }
  });
});
