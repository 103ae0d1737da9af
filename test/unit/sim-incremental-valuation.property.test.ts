// The account's running totals (src/sim/positionBook.ts) against a full recomputation, position by
// position, after random sequences of orders, partial and full closes, close-bys, modifies, pending
// fills and ticks (waits that cross server-day rollovers, so swap accrues), on both platforms and
// on symbols whose profit is converted (USDJPY) or that carry swap (BTCUSD). The decisions taken
// from the totals (margin for an order, stop-out, whether a tick can trigger a stop) must be the
// ones the full summary gives.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { SimBrokerConnection } from '../../src/broker/sim.js';
import { closePrice, marginFor, profitFor, swapFor, swapNights } from '../../src/sim/accounting.js';
import type { SimAccount } from '../../src/sim/account.js';
import type { SimServer } from '../../src/sim/simulator.js';
import { accountSummary, affords, clearOfStopOut, fundsEstimate } from '../../src/sim/valuation.js';
import { connect, makeSim } from '../helpers/sim-helpers.js';

const SYMBOLS = ['EURUSD', 'USDJPY', 'XAUUSD', 'BTCUSD'] as const;

type Cmd =
  | { k: 'wait'; ms: number }
  | { k: 'market'; buy: boolean; lots: number; sym: number; sltp: number }
  | { k: 'pending'; buy: boolean; lots: number; offset: number }
  | { k: 'close'; pick: number; part: boolean }
  | { k: 'closeBy'; a: number; b: number }
  | { k: 'modify'; pick: number; dist: number };

const cmd: fc.Arbitrary<Cmd> = fc.oneof(
  fc.record({ k: fc.constant('wait' as const), ms: fc.integer({ min: 1_000, max: 3 * 3_600_000 }) }),
  fc.record({ k: fc.constant('market' as const), buy: fc.boolean(), lots: fc.integer({ min: 1, max: 60 }), sym: fc.integer({ min: 0, max: SYMBOLS.length - 1 }), sltp: fc.integer({ min: 0, max: 3 }) }),
  fc.record({ k: fc.constant('pending' as const), buy: fc.boolean(), lots: fc.integer({ min: 1, max: 40 }), offset: fc.integer({ min: 5, max: 40 }) }),
  fc.record({ k: fc.constant('close' as const), pick: fc.nat(), part: fc.boolean() }),
  fc.record({ k: fc.constant('closeBy' as const), a: fc.nat(), b: fc.nat() }),
  fc.record({ k: fc.constant('modify' as const), pick: fc.nat(), dist: fc.integer({ min: 30, max: 3000 }) }),
);

async function apply(x: Cmd, c: SimBrokerConnection, advance: (ms: number) => void): Promise<void> {
  const { positions } = await c.openedOrders();
  const pick = (i: number) => positions[i % positions.length]!;
  switch (x.k) {
    case 'wait':
      return advance(x.ms);
    case 'market': {
      const symbol = SYMBOLS[x.sym]!;
      const q = (await c.quote(symbol))!;
      const pt = symbol === 'EURUSD' ? 1e-5 : symbol === 'USDJPY' ? 1e-3 : 1e-2;
      const d = (symbol === 'BTCUSD' ? 3000 : 300) * pt;
      const round = (v: number) => +v.toFixed(symbol === 'EURUSD' ? 5 : symbol === 'USDJPY' ? 3 : 2);
      const sl = x.sltp & 1 ? round(x.buy ? q.bid - d : q.ask + d) : undefined;
      const tp = x.sltp & 2 ? round(x.buy ? q.bid + d : q.ask - d) : undefined;
      await c.orderSend({ symbol, type: x.buy ? 'Buy' : 'Sell', volume: x.lots / 100, ...(sl ? { stoploss: sl } : {}), ...(tp ? { takeprofit: tp } : {}) });
      return;
    }
    case 'pending': {
      const q = (await c.quote('EURUSD'))!;
      const off = x.offset * 1e-5;
      const price = x.buy ? q.ask - off : q.bid + off; // limits near the market: they fill on ticks
      await c.orderSend({ symbol: 'EURUSD', type: x.buy ? 'BuyLimit' : 'SellLimit', volume: x.lots / 100, price: +price.toFixed(5) });
      return;
    }
    case 'close': {
      if (!positions.length) return;
      const p = pick(x.pick);
      const lots = x.part ? Math.floor((p.volume * 100) / 2) / 100 : undefined;
      await c.orderClose({ ticket: p.ticket, ...(lots ? { lots } : {}) });
      return;
    }
    case 'closeBy':
      if (positions.length >= 2) await c.orderCloseBy({ ticket: pick(x.a).ticket, byTicket: pick(x.b).ticket });
      return;
    case 'modify': {
      if (!positions.length) return;
      const p = pick(x.pick);
      const pt = p.symbol === 'EURUSD' ? 1e-5 : p.symbol === 'USDJPY' ? 1e-3 : 1e-2;
      const digits = p.symbol === 'EURUSD' ? 5 : p.symbol === 'USDJPY' ? 3 : 2;
      await c.orderModify({ ticket: p.ticket, stoploss: +(p.type === 'Buy' ? p.currentPrice - x.dist * pt : p.currentPrice + x.dist * pt).toFixed(digits) });
      return;
    }
  }
}

/** The totals against a position-by-position recomputation, and the decisions taken from them. */
function check(server: SimServer, acc: SimAccount): void {
  const market = server.market;
  const book = acc.positions;
  const cur = acc.data.currency;
  let floating = 0;
  let margin = 0;
  for (const p of book.values()) {
    const s = market.bySymbol.get(p.symbol)!;
    const nights = swapNights(p.openTimeMsc, market.now, (t) => market.clock.toServer(t));
    floating += profitFor(market, s.info, p.type, p.volume, p.openPrice, closePrice(market, s, p.type), cur);
    floating += swapFor(market, s.info, p.type, p.volume, nights, cur) - p.swapPaid;
    margin += marginFor(market, s.info, p.volume, p.openPrice, acc.data.leverage, cur);
  }
  const f = fundsEstimate(market, acc.data, book);
  expect(f).not.toBeNull();
  const tol = 1e-7 * (Math.abs(acc.data.balance) + Math.abs(floating) + margin + 1);
  expect(Math.abs(f!.equity - (acc.data.balance + acc.data.credit + floating))).toBeLessThan(tol);
  expect(Math.abs(f!.margin - margin)).toBeLessThan(tol);
  // Against the rounded summary (rounding as today): within the slack the decisions rely on.
  const sum = accountSummary(market, acc.data, book.values());
  expect(Math.abs(f!.equity - sum.equity)).toBeLessThanOrEqual(f!.slack);
  expect(Math.abs(f!.margin - sum.margin)).toBeLessThanOrEqual(f!.slack);
  // Margin checks: the same answer as the full summary, also right at its edge.
  const free = sum.equity - sum.margin;
  for (const d of [-f!.slack - 0.02, -f!.slack, -0.011, -0.005, -0.001, 0, 0.001, 0.005, 0.011, f!.slack, f!.slack + 0.02, 50]) {
    expect(affords(market, acc.data, book, free + d)).toBe(!(free - (free + d) < 0));
  }
  if (clearOfStopOut(market, acc.data, book, server.config.account.stopOut)) {
    expect(sum.margin <= 0 || sum.marginLevel >= server.config.account.stopOut).toBe(true);
  }
  for (const name of SYMBOLS) {
    const held = [...book.values()].filter((p) => p.symbol === name);
    expect(book.count(name)).toBe(held.length);
    const s = market.bySymbol.get(name)!;
    const bid = market.bid(s);
    const ask = market.ask(s);
    const hit = held.some((p) => (p.sl !== 0 && (p.type === 'Buy' ? bid <= p.sl : ask >= p.sl)) || (p.tp !== 0 && (p.type === 'Buy' ? bid >= p.tp : ask <= p.tp)));
    if (hit) expect(book.stopsMayTrigger(name, bid, ask)).toBe(true);
  }
}

describe('incremental valuation', () => {
  it.each([['Sim-P5-Demo'], ['Sim-P4-Demo']])('%s: the running totals equal a full recomputation after any sequence of trades and ticks', async (serverName) => {
    await fc.assert(
      fc.asyncProperty(fc.array(cmd, { minLength: 5, maxLength: 25 }), fc.integer({ min: 1, max: 1000 }), async (cmds, seed) => {
        // Wednesday 21:00 UTC: the server's midnight (a swap rollover) is an hour or two away.
        const { sim, clock } = makeSim({ seed, t0: Date.UTC(2026, 10, 18, 21, 0, 0) });
        const c = await connect(sim, serverName, '4242');
        const server = sim.server(serverName)!;
        const acc = server.accounts.get('4242')!;
        const advance = (ms: number) => {
          clock.advance(ms);
          sim.advance();
        };
        for (const x of cmds) {
          await apply(x, c, advance);
          check(server, acc);
        }
      }),
      { numRuns: 12 },
    );
  });

  it('the totals follow a position changed in place by whoever got it from the book', async () => {
    const { sim } = makeSim();
    const c = await connect(sim, 'Sim-P5-Demo', '4243');
    const server = sim.server('Sim-P5-Demo')!;
    const acc = server.accounts.get('4243')!;
    const r = await c.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 1 });
    if (!r.ok) throw new Error(r.message);
    check(server, acc);
    const before = fundsEstimate(server.market, acc.data, acc.positions)!.equity;
    (acc.positions.get(r.order.ticket) as { openPrice: number }).openPrice -= 0.01; // 1,000 USD better
    check(server, acc);
    expect(fundsEstimate(server.market, acc.data, acc.positions)!.equity - before).toBeCloseTo(1000, 6);
  });
});
