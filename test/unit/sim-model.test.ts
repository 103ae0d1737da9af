// Model-based test (fast-check commands): a tiny model of what an account holds, checked
// against the real engine after every command. The clock does not move, so no tick can
// trigger anything and the model can predict every outcome exactly.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { SimBrokerConnection } from '../../src/broker/sim.js';
import { connect, makeSim } from '../helpers/sim-helpers.js';

interface Model {
  /** ticket -> [side, lots in hundredths] */
  positions: Map<number, ['Buy' | 'Sell', number]>;
  pending: Set<number>;
  lastTicket: number;
}
type Real = { c: SimBrokerConnection };

async function check(m: Model, r: Real) {
  const open = await r.c.openedOrders();
  expect(new Map(open.positions.map((p) => [p.ticket, [p.type, Math.round(p.volume * 100)]]))).toEqual(m.positions);
  expect(new Set(open.orders.map((o) => o.ticket))).toEqual(m.pending);
}

class Open implements fc.AsyncCommand<Model, Real> {
  constructor(readonly side: 'Buy' | 'Sell', readonly hundredths: number) {}
  check = () => true;
  async run(m: Model, r: Real) {
    const res = await r.c.orderSend({ symbol: 'EURUSD', type: this.side, volume: this.hundredths / 100 });
    // At most 40 opens of 0.2 lots (~230 USD margin each) stay within the 10,000 USD deposit.
    const valid = this.hundredths >= 1;
    expect(res.ok).toBe(valid);
    if (res.ok) {
      m.positions.set(res.order.ticket, [this.side, this.hundredths]);
      m.lastTicket = res.order.ticket;
    } else expect(res.reason).toBe('INVALID_VOLUME');
    await check(m, r);
  }
  toString = () => `open ${this.side} ${this.hundredths}`;
}

class Close implements fc.AsyncCommand<Model, Real> {
  constructor(readonly pick: number, readonly part: number, readonly bogus: boolean) {}
  check = () => true;
  async run(m: Model, r: Real) {
    const tickets = [...m.positions.keys()];
    const ticket = this.bogus || tickets.length === 0 ? 999_999_999 : tickets[this.pick % tickets.length]!;
    const held = m.positions.get(ticket);
    const lots = this.part > 0 ? this.part / 100 : undefined;
    const res = await r.c.orderClose({ ticket, ...(lots !== undefined ? { lots } : {}) });
    if (!held) {
      expect(res).toMatchObject({ ok: false, reason: 'INVALID_TICKET' });
    } else if (this.part === 0 || this.part === held[1]) {
      expect(res.ok).toBe(true);
      m.positions.delete(ticket);
    } else if (this.part < held[1]) {
      expect(res.ok).toBe(true);
      m.positions.set(ticket, [held[0], held[1] - this.part]);
    } else {
      expect(res).toMatchObject({ ok: false, reason: 'INVALID_VOLUME' });
    }
    await check(m, r);
  }
  toString = () => `close #${this.pick} ${this.part}${this.bogus ? ' bogus' : ''}`;
}

class Place implements fc.AsyncCommand<Model, Real> {
  constructor(readonly limit: boolean, readonly points: number) {}
  check = () => true;
  async run(m: Model, r: Real) {
    const q = (await r.c.quote('EURUSD'))!;
    // BuyLimit below / BuyStop above the ask; valid when at least stopsLevel (10) points away
    // (exactly stopsLevel is allowed, as on MT servers).
    const price = Math.round((this.limit ? q.ask - this.points * 1e-5 : q.ask + this.points * 1e-5) * 1e5) / 1e5;
    const res = await r.c.orderSend({ symbol: 'EURUSD', type: this.limit ? 'BuyLimit' : 'BuyStop', volume: 0.01, price });
    const valid = this.points >= 10;
    expect(res.ok).toBe(valid);
    if (res.ok) m.pending.add(res.order.ticket);
    else expect(res.reason).toBe('INVALID_PRICE');
    await check(m, r);
  }
  toString = () => `place ${this.limit ? 'limit' : 'stop'} ${this.points}`;
}

class Delete implements fc.AsyncCommand<Model, Real> {
  constructor(readonly pick: number, readonly position: boolean) {}
  check = () => true;
  async run(m: Model, r: Real) {
    const pool = this.position ? [...m.positions.keys()] : [...m.pending];
    if (pool.length === 0) return;
    const ticket = pool[this.pick % pool.length]!;
    const res = await r.c.orderDelete({ ticket });
    if (this.position) expect(res).toMatchObject({ ok: false, reason: 'INVALID_TICKET' });
    else {
      expect(res.ok).toBe(true);
      m.pending.delete(ticket);
    }
    await check(m, r);
  }
  toString = () => `delete ${this.position ? 'position' : 'pending'} #${this.pick}`;
}

describe('order book against a model', () => {
  it('opens, closes, places and deletes exactly as the model predicts', async () => {
    const commands = [
      fc.tuple(fc.boolean(), fc.integer({ min: 0, max: 20 })).map(([b, v]) => new Open(b ? 'Buy' : 'Sell', v)),
      fc.tuple(fc.nat(), fc.integer({ min: 0, max: 30 }), fc.boolean()).map(([p, part, bogus]) => new Close(p, part, bogus)),
      fc.tuple(fc.boolean(), fc.integer({ min: 1, max: 200 })).map(([l, pts]) => new Place(l, pts)),
      fc.tuple(fc.nat(), fc.boolean()).map(([p, pos]) => new Delete(p, pos)),
    ];
    await fc.assert(
      fc.asyncProperty(fc.commands(commands, { maxCommands: 40 }), async (cmds) => {
        const { sim } = makeSim();
        const c = await connect(sim);
        await fc.asyncModelRun(() => ({ model: { positions: new Map(), pending: new Set<number>(), lastTicket: 0 }, real: { c } }), cmds);
      }),
      { numRuns: 40 },
    );
  });
});
