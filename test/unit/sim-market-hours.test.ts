// Market hours of the simulator: each symbol's own sessions (the default: forex closed over the
// weekend), or `always` (every symbol around the clock) for benches and demos run on a weekend.
// "Closed" is asserted on a manual clock set to a weekend, never on the wall clock's weekday.
import { describe, expect, it } from 'vitest';
import { loadSimConfig, withOverrides } from '../../src/sim/config.js';
import { ManualClock, Simulator } from '../../src/sim/simulator.js';
import { MemorySimStore } from '../../src/store/memorySimStore.js';
import { createSimulator } from '../../src/broker/simulatorSetup.js';
import { connect } from '../helpers/sim-helpers.js';
import type { MarketHours } from '../../src/sim/config.js';

/** Saturday 2026-11-21 12:00 UTC: forex closed (Friday 21:55 UTC to Sunday 22:00 UTC). */
const SAT_NOON = Date.UTC(2026, 10, 21, 12, 0, 0);
/** Wednesday 2026-11-18 22:30 UTC: US500's daily break (22:00-23:00 UTC). */
const WED_INDEX_BREAK = Date.UTC(2026, 10, 18, 22, 30, 0);
const FULL_WEEK = Array.from({ length: 7 }, () => [{ fromMin: 0, toMin: 1440 }]);

function simAt(t: number, marketHours?: MarketHours) {
  const clock = new ManualClock(t);
  const sim = new Simulator({ config: loadSimConfig(undefined, marketHours ? { marketHours } : {}), store: new MemorySimStore(), clock });
  return { sim, clock };
}

describe('loadSimConfig marketHours', () => {
  it('sessions (or none given) keeps each symbol\'s own; always makes every symbol\'s trade and quote sessions always', () => {
    for (const cfg of [loadSimConfig(), loadSimConfig(undefined, { marketHours: 'sessions' })]) {
      const p5 = cfg.servers[0]!.symbols;
      expect(p5.find((s) => s.name === 'EURUSD')).toMatchObject({ tradeSessions: 'forex', quoteSessions: 'forex' });
      expect(p5.find((s) => s.name === 'US500')).toMatchObject({ tradeSessions: 'index', quoteSessions: 'index' });
    }
    const always = loadSimConfig(undefined, { marketHours: 'always', seed: 5 });
    expect(always.seed).toBe(5);
    const all = always.servers.flatMap((s) => s.symbols);
    expect(all.length).toBeGreaterThan(10);
    for (const s of all) expect([s.name, s.tradeSessions, s.quoteSessions]).toEqual([s.name, 'always', 'always']);
  });

  it('an explicit week in the file is replaced too, and the given config is left as it was', () => {
    const base = loadSimConfig();
    const week = [[], [{ fromMin: 600, toMin: 700 }], [], [], [], [], []];
    base.servers[0]!.symbols[0]!.tradeSessions = week;
    const out = withOverrides(base, { marketHours: 'always' });
    expect(out.servers[0]!.symbols[0]!.tradeSessions).toBe('always');
    expect(base.servers[0]!.symbols[0]!.tradeSessions).toBe(week);
    expect(withOverrides(base, { marketHours: 'sessions' })).toBe(base);
  });
});

describe('a simulator on a manual clock set to a closed market', () => {
  it.each([['Sim-P5-Demo'], ['Sim-P4-Demo']])('%s, Saturday: EURUSD is refused MARKET_CLOSED with its own sessions, fills with always, and the sessions it reports say so', async (server) => {
    const closed = simAt(SAT_NOON);
    const c = await connect(closed.sim, server, '8301');
    expect(await c.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 0.1 })).toMatchObject({ ok: false, reason: 'MARKET_CLOSED' });
    expect((await c.symbol('EURUSD'))!.tradeSessions[6]).toEqual([]);

    const open = simAt(SAT_NOON, 'always');
    const o = await connect(open.sim, server, '8301');
    const r = await o.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 0.1 });
    expect(r).toMatchObject({ ok: true });
    const info = (await o.symbol('EURUSD'))!;
    expect(info.tradeSessions).toEqual(FULL_WEEK);
    expect(info.quoteSessions).toEqual(FULL_WEEK);
    // Quotes go on: the quote a minute later is a minute newer (the closed market's stays put).
    const before = (await o.quote('EURUSD'))!.timeMsc;
    open.clock.advance(60_000);
    open.sim.advance();
    expect((await o.quote('EURUSD'))!.timeMsc).toBeGreaterThan(before);
    const frozen = (await c.quote('EURUSD'))!.timeMsc;
    closed.clock.advance(60_000);
    closed.sim.advance();
    expect((await c.quote('EURUSD'))!.timeMsc).toBe(frozen);
  });

  it('US500 in its daily break: closed with its own sessions, open with always', async () => {
    const closed = await connect(simAt(WED_INDEX_BREAK).sim, 'Sim-P5-Demo', '8302');
    expect(await closed.orderSend({ symbol: 'US500', type: 'Buy', volume: 0.1 })).toMatchObject({ ok: false, reason: 'MARKET_CLOSED' });
    const open = await connect(simAt(WED_INDEX_BREAK, 'always').sim, 'Sim-P5-Demo', '8302');
    expect(await open.orderSend({ symbol: 'US500', type: 'Buy', volume: 0.1 })).toMatchObject({ ok: true });
  });

  it('createSimulator (the embedded simulator of a shard) passes marketHours on', async () => {
    const sim = createSimulator({ clock: new ManualClock(SAT_NOON), driveMs: false, marketHours: 'always' });
    const c = await connect(sim, 'Sim-P5-Demo', '8303');
    expect(await c.orderSend({ symbol: 'GBPUSD', type: 'Sell', volume: 0.1 })).toMatchObject({ ok: true });
    const dflt = createSimulator({ clock: new ManualClock(SAT_NOON), driveMs: false });
    const d = await connect(dflt, 'Sim-P5-Demo', '8303');
    expect(await d.orderSend({ symbol: 'GBPUSD', type: 'Sell', volume: 0.1 })).toMatchObject({ ok: false, reason: 'MARKET_CLOSED' });
  });
});
