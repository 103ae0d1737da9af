// The clock's visits (expirations due, equity samples) walk every busy account only when one may be
// due (a new minute, the earliest expiration reached), else only the accounts tracked since the
// last walk. Against a simulator that walks them all at every step, as it did before: the same
// journal (deals, orders, equity points) and books after random trading on several accounts, with
// clock steps from a millisecond to minutes; and a step inside the minute visits no idle-busy account.
import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import type { SimBrokerConnection } from '../../src/broker/sim.js';
import { SimAccount } from '../../src/sim/account.js';
import { connect, journalAndBooks, makeSim } from '../helpers/sim-helpers.js';

const SERVER = 'Sim-P5-Demo';
const LOGINS = ['2001', '2002', '2003'];

type Cmd =
  | { k: 'step'; ms: number }
  | { k: 'market'; who: number; buy: boolean; lots: number }
  | { k: 'pending'; who: number; buy: boolean; expMs: number; offset: number }
  | { k: 'close'; who: number; pick: number };

const cmd: fc.Arbitrary<Cmd> = fc.oneof(
  fc.record({ k: fc.constant('step' as const), ms: fc.oneof(fc.integer({ min: 1, max: 500 }), fc.integer({ min: 1_000, max: 150_000 })) }),
  fc.record({ k: fc.constant('market' as const), who: fc.nat(LOGINS.length - 1), buy: fc.boolean(), lots: fc.integer({ min: 1, max: 20 }) }),
  fc.record({ k: fc.constant('pending' as const), who: fc.nat(LOGINS.length - 1), buy: fc.boolean(), expMs: fc.integer({ min: 1_000, max: 200_000 }), offset: fc.integer({ min: 0, max: 40 }) }),
  fc.record({ k: fc.constant('close' as const), who: fc.nat(LOGINS.length - 1), pick: fc.nat() }),
);

async function world(walkAlways: boolean) {
  const m = makeSim({ seed: 11 });
  const server = m.sim.server(SERVER)!;
  if (walkAlways) {
    // The old behaviour: every step walks every busy account.
    const visit = server.visitClock.bind(server);
    server.visitClock = (now: number) => {
      (server as unknown as { walkedMinute: number }).walkedMinute = NaN;
      visit(now);
    };
  }
  const conns: SimBrokerConnection[] = [];
  for (const login of LOGINS) conns.push(await connect(m.sim, SERVER, login));
  return { ...m, server, conns };
}

async function run(w: Awaited<ReturnType<typeof world>>, x: Cmd): Promise<void> {
  if (x.k === 'step') {
    w.clock.advance(x.ms);
    w.sim.advance();
    return;
  }
  const c = w.conns[x.who]!;
  if (x.k === 'market') {
    await c.orderSend({ symbol: 'EURUSD', type: x.buy ? 'Buy' : 'Sell', volume: x.lots / 100 });
  } else if (x.k === 'pending') {
    const q = (await c.quote('EURUSD'))!;
    const off = (x.offset + 10) * 1e-5;
    const price = +(x.buy ? q.ask - off : q.bid + off).toFixed(5);
    await c.orderSend({ symbol: 'EURUSD', type: x.buy ? 'BuyLimit' : 'SellLimit', volume: 0.01, price, expiration: w.clock.now() + x.expMs });
  } else {
    const { positions } = await c.openedOrders();
    if (positions.length) await c.orderClose({ ticket: positions[x.pick % positions.length]!.ticket });
  }
}

const record = (w: Awaited<ReturnType<typeof world>>) => journalAndBooks(w, SERVER, LOGINS);

describe('the clock walks busy accounts only when something may be due', () => {
  it('journals and books as a walk at every step does', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(cmd, { minLength: 1, maxLength: 40 }), async (cmds) => {
        const a = await world(false);
        const b = await world(true);
        for (const x of cmds) {
          await run(a, x);
          await run(b, x);
        }
        a.clock.advance(1);
        a.sim.advance();
        b.clock.advance(1);
        b.sim.advance();
        expect(record(a)).toEqual(record(b));
      }),
      { numRuns: 60 },
    );
  });

  it('a step inside the minute visits only the accounts that changed', async () => {
    const w = await world(false);
    for (const c of w.conns) await c.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 0.01 });
    w.clock.set(Math.ceil(w.clock.now() / 60_000) * 60_000 + 1_000);
    w.sim.advance();
    const samples = vi.spyOn(SimAccount.prototype, 'sampleEquity');
    const expiries = vi.spyOn(SimAccount.prototype, 'expireDue');
    try {
      for (let i = 0; i < 10; i++) {
        w.clock.advance(100);
        w.sim.advance();
      }
      expect(samples).not.toHaveBeenCalled();
      await w.conns[0]!.orderSend({ symbol: 'EURUSD', type: 'Sell', volume: 0.01 });
      w.clock.advance(100);
      w.sim.advance();
      expect(samples).toHaveBeenCalledTimes(1);
      // A new minute: every busy account is visited.
      samples.mockClear();
      w.clock.advance(60_000);
      w.sim.advance();
      expect(samples).toHaveBeenCalledTimes(LOGINS.length);
      expect(expiries).not.toHaveBeenCalled();
    } finally {
      samples.mockRestore();
      expiries.mockRestore();
    }
  });
});
