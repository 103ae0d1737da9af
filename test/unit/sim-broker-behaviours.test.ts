import { describe, expect, it } from 'vitest';
import { BrokerNotSupportedError } from '../../src/market/brokerErrors.js';
import type { CandleEvent } from '../../src/market/timeframes.js';
import { parseSimConfig } from '../../src/sim/config.js';
import { ManualClock, Simulator } from '../../src/sim/simulator.js';
import { MemorySimStore } from '../../src/store/memorySimStore.js';
import { connect, makeSim, T0, testConfig } from '../helpers/sim-helpers.js';

async function advanceUntil(sim: ReturnType<typeof makeSim>['sim'], clock: ReturnType<typeof makeSim>['clock'], done: () => boolean, stepMs = 1000, max = 3600) {
  for (let i = 0; i < max && !done(); i++) {
    clock.advance(stepMs);
    sim.advance();
  }
}

describe('simulated broker: more behaviours', () => {
  it('P4: market orders are tickets; a partial close re-tickets the rest (MT4); no balance history', async () => {
    const { sim } = makeSim();
    const c = await connect(sim, 'Sim-P4-Demo', '7001');
    const r = await c.orderSend({ symbol: 'EURUSD', type: 'Sell', volume: 0.2, magic: 3, comment: 'grid' });
    if (!r.ok) throw new Error(r.message);
    const t1 = r.order.ticket;
    expect((await c.openedOrder(t1))?.kind).toBe('position');
    const part = await c.orderClose({ ticket: t1, lots: 0.05 });
    if (!part.ok) throw new Error(part.message);
    // The ticket closes with the lots closed; the rest stays open under a new ticket, same entry.
    const open = (await c.openedOrders()).positions;
    expect(open).toHaveLength(1);
    const t2 = open[0]!.ticket;
    expect(t2).toBeGreaterThan(t1);
    expect(part.order).toMatchObject({ ticket: t1, state: 'closed', volume: 0.05, comment: `to #${t2}` });
    expect(open[0]).toMatchObject({ symbol: 'EURUSD', type: 'Sell', volume: 0.15, openPrice: r.order.openPrice, openTimeMsc: r.order.openTimeMsc, magic: 3, comment: `from #${t1}` });
    expect(await c.openedOrder(t1)).toBeNull();
    expect(await c.orderClose({ ticket: t1 })).toMatchObject({ ok: false, reason: 'INVALID_TICKET' });
    expect(await c.orderClose({ ticket: t2, lots: 0.149 })).toMatchObject({ ok: false, reason: 'INVALID_VOLUME' });
    const full = await c.orderClose({ ticket: t2 });
    expect(full).toMatchObject({ ok: true, order: { ticket: t2, state: 'closed', volume: 0.15 } });
    // One history record per close, for the lots it closed; their commissions add up to the deals'.
    const hist = await c.historyOrders(0, T0 + 1);
    expect(hist.map((o) => [o.ticket, o.state, o.volume])).toEqual([[t1, 'closed', 0.05], [t2, 'closed', 0.15]]);
    const deals = (await c.historyDeals(0, T0 + 1)).filter((d) => d.symbol === 'EURUSD');
    const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
    expect(sum(hist.map((o) => o.commission))).toBeCloseTo(sum(deals.map((d) => d.commission)), 9);
    expect(sum(hist.map((o) => o.profit))).toBeCloseTo(sum(deals.map((d) => d.profit)), 9);
    await expect(c.balanceHistory(0, T0 + 1)).rejects.toBeInstanceOf(BrokerNotSupportedError);
    expect((await c.quoteHistory('EURUSD', 'H1', T0, 5)).length).toBe(5);
  });

  it('P4: close-by with unequal volumes closes the smaller leg and re-tickets the larger', async () => {
    const { sim } = makeSim();
    const c = await connect(sim, 'Sim-P4-Demo', '7002');
    const a = await c.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 0.3 });
    const b = await c.orderSend({ symbol: 'EURUSD', type: 'Sell', volume: 0.1 });
    if (!a.ok || !b.ok) throw new Error('setup');
    const r = await c.orderCloseBy({ ticket: a.order.ticket, byTicket: b.order.ticket });
    expect(r).toMatchObject({ ok: true, order: { ticket: a.order.ticket, state: 'closed', volume: 0.1 } });
    const open = (await c.openedOrders()).positions;
    expect(open.map((p) => [p.type, p.volume, p.comment])).toEqual([['Buy', 0.2, `from #${a.order.ticket}`]]);
    expect((await c.historyOrders(0, T0 + 1)).map((o) => [o.ticket, o.volume])).toEqual([[a.order.ticket, 0.1], [b.order.ticket, 0.1]]);
  });

  it('pending orders expire', async () => {
    const { sim, clock } = makeSim();
    const c = await connect(sim);
    const q = (await c.quote('EURUSD'))!;
    const r = await c.orderSend({ symbol: 'EURUSD', type: 'BuyLimit', volume: 0.1, price: q.ask - 0.05, expiration: T0 + 5000 });
    if (!r.ok) throw new Error(r.message);
    clock.advance(6000);
    sim.advance();
    expect((await c.openedOrders()).orders).toHaveLength(0);
    expect((await c.historyOrders(0, T0 + 10_000)).map((o) => o.state)).toEqual(['expired']);
    expect(await c.orderSend({ symbol: 'EURUSD', type: 'BuyLimit', volume: 0.1, price: q.ask - 0.05, expiration: T0 })).toMatchObject({ ok: false, reason: 'INVALID_EXPIRATION' });
  });

  it('SL and TP close positions on the tick that reaches them', async () => {
    const { sim, clock } = makeSim({ seed: 3 });
    const c = await connect(sim);
    const q = (await c.quote('EURUSD'))!;
    const r = await c.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 0.1, stoploss: q.bid - 0.0003, takeprofit: q.bid + 0.0003 });
    if (!r.ok) throw new Error(r.message);
    const outs: string[] = [];
    c.on('deal', (d) => d.entry === 'out' && outs.push(d.comment));
    await advanceUntil(sim, clock, () => outs.length > 0);
    expect(outs[0]).toMatch(/^\[(sl|tp) /);
    const out = (await c.historyDeals(0, clock.now() + 1)).find((d) => d.entry === 'out')!;
    expect(outs[0]!.startsWith('[sl') ? out.price <= q.bid - 0.0003 : out.price >= q.bid + 0.0003).toBe(true);
  });

  it('stop-out closes the worst position when the margin level falls below the stop-out level', async () => {
    const { sim, clock } = makeSim({ seed: 5 });
    const c = await connect(sim, 'Sim-P5-Demo', '7002');
    // BTCUSD: 1:100 leverage * marginRate 5 -> 5% margin; 2 lots at ~65k = ~6.5k margin, and
    // a few hundred dollars of adverse move brings equity near the margin.
    const a = await c.orderSend({ symbol: 'BTCUSD', type: 'Buy', volume: 1.5 });
    const b = await c.orderSend({ symbol: 'BTCUSD', type: 'Sell', volume: 1.4 });
    expect(a.ok && b.ok).toBe(true);
    const acc = sim.server('Sim-P5-Demo')!.accounts.get('7002')!;
    acc.data.balance = 200; // make the account fragile without touching the engine
    const comments: string[] = [];
    c.on('deal', (d) => d.entry === 'out' && comments.push(d.comment));
    await advanceUntil(sim, clock, () => comments.length > 0, 5000, 2000);
    expect(comments[0]).toMatch(/^\[so /);
    const sum = await c.accountSummary();
    expect(sum.margin === 0 || sum.marginLevel >= 50).toBe(true);
  });

  it('streams candles for subscribed timeframes, closed when the next bar starts', async () => {
    const { sim, clock } = makeSim();
    const c = await connect(sim);
    const events: CandleEvent[] = [];
    c.on('candle', (e) => events.push(e));
    await c.subscribeCandles('EURUSD', ['M1']);
    clock.advance(90_000);
    sim.advance();
    expect(events.every((e) => e.timeframe === 'M1')).toBe(true);
    const closed = events.filter((e) => e.closed);
    expect(closed).toHaveLength(1);
    const [hist] = await c.priceHistory('EURUSD', 'M1', closed[0]!.candle.time * 1000, closed[0]!.candle.time * 1000 + 1);
    expect(hist).toEqual(closed[0]!.candle);
    // Only M1 is maintained so far (seeding MN1 would compute a month of history).
    const sym = sim.server('Sim-P5-Demo')!.market.bySymbol.get('EURUSD')!;
    expect(sym.bars!.active).toBe(1);
    // A later H1 subscription switches M5..H1 on, seeded so that live equals history.
    await c.subscribeCandles('EURUSD', ['H1']);
    expect(sym.bars!.active).toBe(5);
    clock.advance(120_000);
    sim.advance();
    const h1 = events.filter((e) => e.timeframe === 'H1').at(-1)!;
    const [h1hist] = await c.priceHistory('EURUSD', 'H1', h1.candle.time * 1000, h1.candle.time * 1000 + 1);
    expect(h1hist).toEqual(h1.candle);
  });

  it('reports account details with the server time zone and requires margin by the formula', async () => {
    const { sim } = makeSim();
    const c = await connect(sim);
    const d = await c.accountDetails();
    expect(d).toMatchObject({ login: '1001', server: 'Sim-P5-Demo', utcOffsetMinutes: 120, leverage: 100, type: 'demo', stopOut: 50 });
    const q = (await c.quote('XAUUSD'))!;
    expect(await c.requiredMargin('XAUUSD', 1, 'Buy')).toBeCloseTo((100 * q.ask) / 100, 2);
    const t = await c.serverTime();
    expect(t.serverTimeMsc - t.timeMsc).toBe(2 * 3_600_000);
  });

  it('applies faults declared in the servers file', async () => {
    const base = testConfig();
    const p4 = { ...base.servers[1]!, faults: [{ kind: 'reject' as const, count: 1 }] };
    const config = parseSimConfig({ ...base, servers: [base.servers[0]!, p4] });
    const sim = new Simulator({ config, store: new MemorySimStore(), clock: new ManualClock(T0) });
    expect(sim.faults.list()).toMatchObject([{ server: 'Sim-P4-Demo', kind: 'reject', remaining: 1 }]);
    const c = await connect(sim, 'Sim-P4-Demo');
    expect(await c.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 0.1 })).toMatchObject({ ok: false, reason: 'REJECTED' });
    expect((await c.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 0.1 })).ok).toBe(true);
    expect(sim.faults.list()).toEqual([]);
  });
});
