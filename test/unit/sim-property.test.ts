// Property tests over random order sequences against the real simulator (no mocks):
// accounting identities, position/deal consistency, exact pending triggers, determinism.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Deal, TradeResult } from '../../src/market/orders.js';
import type { Tick } from '../../src/market/server.js';
import { marginFor } from '../../src/sim/accounting.js';
import { Market } from '../../src/sim/market.js';
import type { SimPersistence } from '../../src/sim/persistence.js';
import { SqliteSimStore } from '../../src/store/simStore.js';
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, makeSim, T0, testConfig } from '../helpers/sim-helpers.js';

type Cmd =
  | { k: 'wait'; ms: number }
  | { k: 'market'; buy: boolean; lots: number; sym: number; sltp: number }
  | { k: 'pending'; type: number; lots: number; offset: number; exp: boolean }
  | { k: 'close'; pick: number; part: boolean }
  | { k: 'closeBy'; a: number; b: number }
  | { k: 'modify'; pick: number; dist: number }
  | { k: 'delete'; pick: number };

const SYMBOLS = ['EURUSD', 'XAUUSD'] as const; // USD profit currency: profits recomputable exactly
const PENDING = ['BuyLimit', 'SellLimit', 'BuyStop', 'SellStop'] as const;

const cmd: fc.Arbitrary<Cmd> = fc.oneof(
  fc.record({ k: fc.constant('wait' as const), ms: fc.integer({ min: 200, max: 90_000 }) }),
  fc.record({ k: fc.constant('market' as const), buy: fc.boolean(), lots: fc.integer({ min: 1, max: 80 }), sym: fc.integer({ min: 0, max: 1 }), sltp: fc.integer({ min: 0, max: 3 }) }),
  fc.record({ k: fc.constant('pending' as const), type: fc.integer({ min: 0, max: 3 }), lots: fc.integer({ min: 1, max: 50 }), offset: fc.integer({ min: 12, max: 60 }), exp: fc.boolean() }),
  fc.record({ k: fc.constant('close' as const), pick: fc.nat(), part: fc.boolean() }),
  fc.record({ k: fc.constant('closeBy' as const), a: fc.nat(), b: fc.nat() }),
  fc.record({ k: fc.constant('modify' as const), pick: fc.nat(), dist: fc.integer({ min: 1, max: 80 }) }),
  fc.record({ k: fc.constant('delete' as const), pick: fc.nat() }),
);

async function run(cmds: readonly Cmd[], seed: number, store?: SimPersistence) {
  const { sim, clock } = makeSim({ seed, ...(store ? { store } : {}) });
  const c = await connect(sim);
  const ticks: Tick[] = [];
  await c.subscribe(['EURUSD']);
  c.on('tick', (t) => ticks.push(t));
  const results: TradeResult[] = [];
  const checks: (() => Promise<void>)[] = [];
  for (const x of cmds) {
    const open = await c.openedOrders();
    const pos = open.positions;
    const ord = open.orders;
    switch (x.k) {
      case 'wait':
        clock.advance(x.ms);
        sim.advance();
        break;
      case 'market': {
        const symbol = SYMBOLS[x.sym]!;
        const q = (await c.quote(symbol))!;
        const pt = symbol === 'EURUSD' ? 0.00001 : 0.01;
        const d = 300 * pt;
        const sl = x.sltp & 1 ? (x.buy ? q.bid - d : q.ask + d) : undefined;
        const tp = x.sltp & 2 ? (x.buy ? q.bid + d : q.ask - d) : undefined;
        results.push(await c.orderSend({ symbol, type: x.buy ? 'Buy' : 'Sell', volume: x.lots / 100, ...(sl ? { stoploss: sl } : {}), ...(tp ? { takeprofit: tp } : {}), magic: 7 }));
        break;
      }
      case 'pending': {
        const q = (await c.quote('EURUSD'))!;
        const type = PENDING[x.type]!;
        const off = x.offset * 0.00001;
        const price = type === 'BuyLimit' ? q.ask - off : type === 'SellLimit' ? q.bid + off : type === 'BuyStop' ? q.ask + off : q.bid - off;
        results.push(await c.orderSend({ symbol: 'EURUSD', type, volume: x.lots / 100, price: Math.round(price * 1e5) / 1e5, ...(x.exp ? { expiration: clock.now() + 120_000 } : {}) }));
        break;
      }
      case 'close':
        if (pos.length) {
          const p = pos[x.pick % pos.length]!;
          const lots = x.part ? Math.floor((p.volume * 100) / 2) / 100 : undefined;
          results.push(await c.orderClose({ ticket: p.ticket, ...(lots ? { lots } : {}) }));
        }
        break;
      case 'closeBy':
        if (pos.length >= 2) results.push(await c.orderCloseBy({ ticket: pos[x.a % pos.length]!.ticket, byTicket: pos[x.b % pos.length]!.ticket }));
        break;
      case 'modify':
        if (pos.length) {
          const p = pos[x.pick % pos.length]!;
          const pt = p.symbol === 'EURUSD' ? 0.00001 : 0.01;
          results.push(await c.orderModify({ ticket: p.ticket, stoploss: p.type === 'Buy' ? p.currentPrice - x.dist * pt : p.currentPrice + x.dist * pt }));
        }
        break;
      case 'delete':
        if (ord.length) results.push(await c.orderDelete({ ticket: ord[x.pick % ord.length]!.ticket }));
        break;
    }
    checks.push(() => invariants());
    await invariants();
  }

  async function invariants() {
    const sum = await c.accountSummary();
    const { positions, orders } = await c.openedOrders();
    // The simulator visits only busy accounts on ticks and on its clock: an account with anything
    // open must be in the set (or its stops and expirations would never fire), an idle one must not.
    const server = sim.server('Sim-P5-Demo')!;
    expect(server.busy.has(server.accounts.get('1001')!)).toBe(positions.length + orders.length > 0);
    // equity = balance + floating P/L (profit + swap), to the cent
    expect(Math.abs(sum.equity - (sum.balance + sum.profit))).toBeLessThan(0.011);
    expect(Math.abs(sum.profit - positions.reduce((s, p) => s + p.profit + p.swap, 0))).toBeLessThan(0.011);
    // margin = sum of the symbol formula at the open price
    const host = sim.server('Sim-P5-Demo')!;
    const margin = positions.reduce((s, p) => s + marginFor(host.market, host.market.bySymbol.get(p.symbol)!.info, p.volume, p.openPrice, 100, 'USD'), 0);
    expect(Math.abs(sum.margin - margin)).toBeLessThan(0.011);
    // no position without its opening deal
    const deals = await c.historyDeals(0, Number.MAX_SAFE_INTEGER);
    for (const p of positions) expect(deals.some((d) => d.entry === 'in' && d.position === p.ticket && d.price === p.openPrice)).toBe(true);
    // the ledger: balance = sum of all deals
    expect(Math.abs(sum.balance - deals.reduce((s, d) => s + d.profit + d.commission + d.swap, 0))).toBeLessThan(1e-6);
  }

  const deals = await c.historyDeals(0, Number.MAX_SAFE_INTEGER);
  return { deals, results, ticks, sim, c, checks, orders: await c.historyOrders(0, Number.MAX_SAFE_INTEGER) };
}

function closedPositionChecks(deals: readonly Deal[], openTickets: Set<number>) {
  const byPos = new Map<number, Deal[]>();
  for (const d of deals) if (d.position) byPos.set(d.position, [...(byPos.get(d.position) ?? []), d]);
  for (const [ticket, ds] of byPos) {
    const inDeal = ds.find((d) => d.entry === 'in');
    expect(inDeal).toBeDefined();
    const outs = ds.filter((d) => d.entry === 'out');
    const closedVol = outs.reduce((s, d) => s + d.volume, 0);
    if (!openTickets.has(ticket)) expect(closedVol).toBeCloseTo(inDeal!.volume, 8);
    // a closed position's profit equals the sum of its deals, each from its own prices
    const cs = inDeal!.symbol === 'EURUSD' ? 100_000 : 100;
    for (const o of outs) {
      const diff = inDeal!.type === 'Buy' ? o.price - inDeal!.price : inDeal!.price - o.price;
      expect(o.profit).toBeCloseTo(Math.round(diff * o.volume * cs * 100) / 100, 6);
    }
  }
}

describe('order engine properties', () => {
  it('accounting invariants hold over random order sequences', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(cmd, { minLength: 5, maxLength: 30 }), fc.integer({ min: 1, max: 1000 }), async (cmds, seed) => {
        const r = await run(cmds, seed);
        const open = new Set((await r.c.openedOrders()).positions.map((p) => p.ticket));
        closedPositionChecks(r.deals, open);
      }),
      { numRuns: 25 },
    );
  });

  it('pending orders fill at the first tick that crosses their price', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.oneof(cmd.filter((c) => c.k === 'pending'), fc.record({ k: fc.constant('wait' as const), ms: fc.integer({ min: 1000, max: 120_000 }) })), { minLength: 4, maxLength: 20 }),
        fc.integer({ min: 1, max: 1000 }),
        async (cmds, seed) => {
          const r = await run(cmds, seed);
          for (const res of r.results) {
            if (!res.ok || res.order.state !== 'placed') continue;
            const o = res.order;
            const fill = r.deals.find((d) => d.entry === 'in' && d.order === o.ticket);
            const crosses = (t: Tick) =>
              o.type === 'BuyLimit' ? t.ask <= o.openPrice : o.type === 'SellLimit' ? t.bid >= o.openPrice : o.type === 'BuyStop' ? t.ask >= o.openPrice : t.bid <= o.openPrice;
            const first = r.ticks.find((t) => t.timeMsc > o.openTimeMsc && (o.expiration === undefined || t.timeMsc < o.expiration) && crosses(t));
            const ended = r.orders.find((x) => x.ticket === o.ticket && x.state !== 'filled');
            if (ended && (ended.state === 'cancelled' || ended.state === 'expired')) {
              if (first) expect(first.timeMsc).toBeGreaterThanOrEqual(ended.closeTimeMsc!);
              continue;
            }
            if (!fill) {
              expect(first).toBeUndefined();
              continue;
            }
            expect(first).toBeDefined();
            expect(fill.timeMsc).toBe(first!.timeMsc);
            expect(fill.price).toBe(o.type.startsWith('Buy') ? first!.ask : first!.bid);
          }
        },
      ),
      { numRuns: 20 },
    );
  });

  it('the same seed and inputs give the same ticks, fills and history', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(cmd, { minLength: 3, maxLength: 15 }), fc.integer({ min: 1, max: 1000 }), async (cmds, seed) => {
        const a = await run(cmds, seed);
        const b = await run(cmds, seed);
        expect(b.ticks).toEqual(a.ticks);
        expect(b.results).toEqual(a.results);
        expect(b.orders).toEqual(a.orders);
        // deal tickets come from the same id blocks, so whole histories are identical
        expect(b.deals).toEqual(a.deals);
      }),
      { numRuns: 10 },
    );
  });

  it('SQLite and in-memory persistence return identical histories', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tagw-simprop-'));
    try {
      let n = 0;
      await fc.assert(
        fc.asyncProperty(fc.array(cmd, { minLength: 3, maxLength: 20 }), fc.integer({ min: 1, max: 1000 }), async (cmds, seed) => {
          const db = new Database(join(dir, `p${n++}.db`));
          SqliteSimStore.configure(db);
          try {
            const a = await run(cmds, seed);
            const b = await run(cmds, seed, new SqliteSimStore(db, { checkpointMs: n % 2 ? 0 : 1e12 }));
            expect(b.deals).toEqual(a.deals);
            expect(b.orders).toEqual(a.orders);
            expect(await b.c.equityHistory(0)).toEqual(await a.c.equityHistory(0));
          } finally {
            db.close();
          }
        }),
        { numRuns: 8 },
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('two markets advanced to the same instant agree, whatever their start and steps', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 3_600_000 }), fc.array(fc.integer({ min: 1, max: 400_000 }), { minLength: 1, maxLength: 8 }), (startOffset, steps) => {
        const cfg = testConfig(11);
        const end = T0 + 4_000_000;
        const a = new Market(cfg.servers[0]!, cfg, T0);
        const b = new Market(cfg.servers[0]!, cfg, T0 + startOffset);
        let t = T0;
        for (const s of steps) a.advanceTo((t = Math.min(end, t + s)));
        a.advanceTo(end);
        b.advanceTo(end);
        for (const s of a.symbols) {
          const sb = b.bySymbol.get(s.info.name)!;
          expect(b.tick(sb)).toEqual(a.tick(s));
          expect(b.priceHistory(sb, 'M5', end - 3_600_000, end + 1)).toEqual(a.priceHistory(s, 'M5', end - 3_600_000, end + 1));
        }
      }),
      { numRuns: 15 },
    );
  });
});
