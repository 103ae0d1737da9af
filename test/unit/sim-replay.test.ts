import { describe, expect, it } from 'vitest';
import { parseSimConfig } from '../../src/sim/config.js';
import { parseTickCsv } from '../../src/sim/replay.js';
import { ManualClock, Simulator } from '../../src/sim/simulator.js';
import { MemorySimStore } from '../../src/store/memorySimStore.js';
import { SimBrokerConnection } from '../../src/broker/sim.js';
import { T0, testConfig } from '../helpers/sim-helpers.js';

const CSV = `time,bid,ask,volume
2024-03-01T10:00:00.000Z,1.08000,1.08010,1
2024-03-01T10:00:10.000Z,1.08020,1.08030,1
2024-03-01T10:00:30.000Z,1.07990,1.08000,2
2024-03-01T10:01:00.000Z,1.08050,1.08060,1
1709287320000,1.08040,1.08050,1
`;

function replaySim(speed: number) {
  const base = testConfig();
  const p5 = base.servers[0]!;
  const eur = { ...p5.symbols[0]!, replay: { file: 'unused.csv', speed } };
  const config = parseSimConfig({ ...base, servers: [{ ...p5, symbols: [eur, ...p5.symbols.slice(1)] }] });
  const clock = new ManualClock(T0);
  const sim = new Simulator({ config, store: new MemorySimStore(), clock, replay: new Map([[p5.name, new Map([['EURUSD', CSV]])]]) });
  return { sim, clock };
}

describe('CSV tick replay', () => {
  it('parses ISO and epoch times, skips the header, keeps order', () => {
    const t = parseTickCsv(CSV, 5);
    expect(t.time.length).toBe(5);
    expect(t.bid[0]).toBe(108000);
    expect(t.time[4]! - t.time[0]!).toBe(120_000);
    expect(() => parseTickCsv('2,1,1\n1,1,1', 5)).toThrow(/out of order/);
  });

  it('plays the recording on the simulator clock at the given speed', async () => {
    const { sim, clock } = replaySim(10);
    const c = new SimBrokerConnection(sim, { server: 'Sim-P5-Demo', login: '1', password: 'p' });
    await c.connect();
    expect(await c.quote('EURUSD')).toEqual({ symbol: 'EURUSD', bid: 1.08, ask: 1.0801, timeMsc: T0 });
    const ticks: number[] = [];
    await c.subscribe(['EURUSD']);
    c.on('tick', (t) => ticks.push(t.bid));
    clock.advance(3000); // 30 s of recording at 10x
    sim.advance();
    expect(ticks).toEqual([1.0802, 1.0799]);
    clock.advance(10_000);
    sim.advance();
    expect(ticks).toEqual([1.0802, 1.0799, 1.0805, 1.0804]);
    const m1 = await c.priceHistory('EURUSD', 'M1', T0 - 60_000, T0 + 60_000);
    const all = m1.reduce((n, b) => n + b.ticks, 0);
    expect(all).toBe(5);
    expect(Math.max(...m1.map((b) => b.high))).toBe(1.0805);
  });
});
