// SIM_START with a replayed symbol (docs/simulator.md, "Starting the market at a fixed instant"): the
// recording's first tick plays at SIM_START, not at each simulator's own start, so simulators with the
// same SIM_START started at different wall times (two runs of a benchmark, the shards of one gateway,
// a restart) play it at the same market instants. Before, each played it from its own start: two
// shards 92 ms apart each sent every recorded tick, and a bot's stream got each one twice (103 quotes
// for 52; found benchmarking an SDK bot with SHARDS=2), its n-th quote depending on its shard.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SimBrokerConnection } from '../../src/broker/sim.js';
import { parseSimConfig } from '../../src/sim/config.js';
import { ManualClock, Simulator } from '../../src/sim/simulator.js';
import { MemorySimStore } from '../../src/store/memorySimStore.js';
import { T0, testConfig } from '../helpers/sim-helpers.js';

const S = T0; // SIM_START

function csvOf(gaps: number[], moves: number[]): string {
  const lines = ['time,bid,ask'];
  let t = 1_700_000_000_000;
  let p = 108_000;
  gaps.forEach((g, i) => {
    t += g;
    p += moves[i % moves.length]!;
    lines.push(`${t},${(p / 1e5).toFixed(5)},${((p + 10) / 1e5).toFixed(5)}`);
  });
  return lines.join('\n');
}

/** A simulator started `lagMs` after SIM_START, advanced in `stepMs` steps to `untilMs`: its quote then,
 *  the ticks it sent after `fromMs`, and its M1 bars. */
async function run(csv: string, lagMs: number, stepMs: number, fromMs: number, untilMs: number, replayStartMs: number | undefined) {
  const base = testConfig();
  const p5 = base.servers[0]!;
  const eur = { ...p5.symbols[0]!, replay: { file: 'unused.csv', speed: 1 } };
  const config = parseSimConfig({ ...base, servers: [{ ...p5, symbols: [eur, ...p5.symbols.slice(1)] }] });
  const clock = new ManualClock(S + lagMs);
  const sim = new Simulator({
    config, store: new MemorySimStore(), clock, replay: new Map([[p5.name, new Map([['EURUSD', csv]])]]),
    ...(replayStartMs !== undefined ? { replayStartMs } : {}),
  });
  const c = new SimBrokerConnection(sim, { server: p5.name, login: '1', password: 'p' });
  await c.connect();
  const ticks: Array<[number, number]> = [];
  await c.subscribe(['EURUSD']);
  c.on('tick', (t) => { if (t.timeMsc > fromMs) ticks.push([t.timeMsc, t.bid]); });
  while (clock.now() < untilMs) {
    clock.set(Math.min(untilMs, clock.now() + stepMs));
    sim.advance();
  }
  const quote = await c.quote('EURUSD');
  const bars = await c.priceHistory('EURUSD', 'M1', S - 60_000, untilMs);
  return { quote, ticks, bars };
}

describe('a replayed symbol under SIM_START', () => {
  it('plays at the same market instants whenever each simulator started: the same quote, ticks and bars', async () => {
    await fc.assert(fc.asyncProperty(
      fc.array(fc.integer({ min: 1, max: 3_000 }), { minLength: 2, maxLength: 40 }),
      fc.array(fc.integer({ min: -20, max: 20 }), { minLength: 1, maxLength: 10 }),
      fc.integer({ min: 0, max: 20_000 }), fc.integer({ min: 0, max: 20_000 }),
      fc.integer({ min: 1, max: 700 }), fc.integer({ min: 1, max: 700 }),
      fc.integer({ min: 0, max: 60_000 }),
      async (gaps, moves, lagA, lagB, stepA, stepB, more) => {
        const csv = csvOf(gaps, moves);
        const from = S + Math.max(lagA, lagB);
        const until = from + more;
        const a = await run(csv, lagA, stepA, from, until, S);
        const b = await run(csv, lagB, stepB, from, until, S);
        expect(a.quote).toEqual(b.quote);
        expect(a.ticks).toEqual(b.ticks);
        expect(a.bars).toEqual(b.bars);
        // The first recorded tick is at SIM_START, the others after it by their recorded gaps.
        const recorded = gaps.slice(1).reduce<number[]>((acc, g) => [...acc, acc[acc.length - 1]! + g], [S]);
        expect(recorded.filter((t) => t <= until).at(-1)).toBe(a.quote?.timeMsc);
      },
    ), { numRuns: 60 });
  });

  it("without SIM_START the recording still starts at the simulator's start", async () => {
    const csv = csvOf([1, 5_000, 5_000], [3]);
    const a = await run(csv, 2_000, 100, 0, S + 2_000, undefined);
    expect(a.quote?.timeMsc).toBe(S + 2_000);
  });
});
