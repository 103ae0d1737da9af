// SIM_START (docs/simulator.md, "Starting the market at a fixed instant"): the setting's form, the
// simulated clock a data directory keeps (src/store/simClock.ts), and the property it exists for: two
// simulators with the same seed and SIM_START, started at different wall times, give the same quotes
// and bars at the same elapsed time. Wall clocks here are manual: nothing depends on today.
import Database from 'better-sqlite3';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { unsetMeanings } from '../../src/configUnset.js';
import { checkBrokerConfig, simClockOffset } from '../../src/startupChecks.js';
import { createLogger } from '../../src/log.js';
import { loadSimConfig } from '../../src/sim/config.js';
import { createSimulator } from '../../src/broker/simulatorSetup.js';
import { SimBrokerConnection } from '../../src/broker/sim.js';
import { ManualClock, type Simulator } from '../../src/sim/simulator.js';
import { closedAt, parseSimStart } from '../../src/sim/simStart.js';
import { SimClockError, simClockOf } from '../../src/store/simClock.js';
import { SqliteSimStore } from '../../src/store/simStore.js';
import { shiftedClock } from '../../src/util/clock.js';

const START = '2026-11-18T12:00:00Z'; // a Wednesday: forex open
const START_MS = Date.parse(START);
const DAY = 86_400_000;

describe('SIM_START, the setting', () => {
  it('takes an ISO instant with its zone, kept as UTC ISO', () => {
    expect(loadConfig({}).simStart).toBeUndefined();
    expect(loadConfig({ SIM_START: START }).simStart).toBe('2026-11-18T12:00:00.000Z');
    expect(loadConfig({ SIM_START: '2026-11-18T14:00+02:00' }).simStart).toBe('2026-11-18T12:00:00.000Z');
    expect(loadConfig({ SIM_START: '2026-11-18T12:00:00.250Z' }).simStart).toBe('2026-11-18T12:00:00.250Z');
  });

  it.each([
    ['tomorrow', /is not an ISO 8601 instant with its zone/],
    ['2026-11-18', /is not an ISO 8601 instant with its zone/],
    ['2026-11-18T12:00:00', /is not an ISO 8601 instant with its zone/], // no zone: another instant on each machine
    ['1763467200000', /is not an ISO 8601 instant with its zone/],
    ['2026-02-30T10:00:00Z', /is not a date and time that exists/],
    ['2026-11-18T24:30:00Z', /is not a date and time that exists/],
  ])('refuses %s in one line naming SIM_START', (value, why) => {
    expect(() => loadConfig({ SIM_START: value })).toThrow(ConfigError);
    try {
      loadConfig({ SIM_START: value });
    } catch (e) {
      const msg = (e as Error).message;
      expect(msg).toMatch(why);
      expect(msg).toMatch(/^invalid configuration: simStart: .* \(from SIM_START\)$/);
      expect(msg).not.toContain('\n');
    }
  });

  it('is refused in bridge mode (the simulator process has --start), and its absence is explained', () => {
    const bridge = loadConfig({ BROKER_MODE: 'bridge', BRIDGE_URL: 'tcp://127.0.0.1:1', SIM_START: START });
    expect(() => checkBrokerConfig(bridge)).toThrow(/SIM_START is for the embedded simulator; .*npm run sim -- --start/);
    expect(() => checkBrokerConfig(loadConfig({ SIM_START: START }))).not.toThrow();
    expect(unsetMeanings(loadConfig({})).simStart).toMatch(/wall clock/);
  });

  it('parseSimStart: the same rules for `npm run sim -- --start`', () => {
    expect(parseSimStart(START)).toEqual({ ms: START_MS });
    expect(parseSimStart('10000-01-01T00:00:00Z')).toHaveProperty('problem');
  });
});

describe('a SIM_START where symbols do not quote (a weekend) is said at start', () => {
  const SATURDAY = '2026-11-21T12:00:00Z';
  it('closedAt: the forex symbols and the index on a Saturday, nothing on a Wednesday or with always', () => {
    const closed = closedAt(loadSimConfig(), Date.parse(SATURDAY));
    expect(closed).toContain('Sim-P5-Demo:EURUSD');
    expect(closed).toContain('Sim-P4-Demo:EURUSD');
    expect(closed).toContain('Sim-P5-Demo:US500');
    expect(closed.some((s) => s.endsWith(':BTCUSD'))).toBe(false);
    expect(closedAt(loadSimConfig(), START_MS)).toEqual([]);
    expect(closedAt(loadSimConfig(undefined, { marketHours: 'always' }), Date.parse(SATURDAY))).toEqual([]);
  });

  const warnings = (env: Record<string, string>) => {
    const lines: string[] = [];
    const log = createLogger('warn', {}, (l) => lines.push(l));
    simClockOffset(new Database(':memory:'), loadConfig(env), Date.now(), log);
    return lines.map((l) => JSON.parse(l) as { msg: string; closed?: string[] });
  };
  it('the gateway warns, naming the closed symbols; not on a weekday, nor with SIM_MARKET_HOURS=always', () => {
    const w = warnings({ SIM_START: SATURDAY });
    expect(w).toHaveLength(1);
    expect(w[0]!.msg).toMatch(/a SIM_START on a weekend opens into a closed forex market/);
    expect(w[0]!.closed).toContain('Sim-P5-Demo:EURUSD');
    expect(warnings({ SIM_START: START })).toEqual([]);
    expect(warnings({ SIM_START: SATURDAY, SIM_MARKET_HOURS: 'always' })).toEqual([]);
  });
});

/** A database with the simulator's tables, as a shard or the simulator process opens it. */
function simDb(): Database.Database {
  const db = new Database(':memory:');
  new SqliteSimStore(db); // creates the sim_ tables
  return db;
}

/** Gives the database simulator state: an account (its initial deposit is a journal row). */
async function withAccount(db: Database.Database, clock: ManualClock, offsetMs: number): Promise<void> {
  const sim = createSimulator({ db, clock: shiftedClock(clock, offsetMs), driveMs: false });
  const c = new SimBrokerConnection(sim, { server: 'Sim-P5-Demo', login: '7001', password: 'pw' });
  await c.connect();
  sim.stop();
}

describe('the simulated clock a data directory keeps', () => {
  it('fresh: the offset from this start; the same SIM_START later on state made with it: the same offset', async () => {
    const db = simDb();
    const wall = new ManualClock(START_MS + 9 * DAY);
    const first = simClockOf(db, START_MS, wall.now(), 'DATA_DIR d');
    expect(first).toEqual({ offsetMs: -9 * DAY, startMs: START_MS });
    await withAccount(db, wall, first.offsetMs);
    wall.advance(3 * DAY + 5_000); // down three days
    expect(simClockOf(db, START_MS, wall.now(), 'DATA_DIR d')).toEqual({ offsetMs: -9 * DAY, startMs: START_MS });
    // The market goes on from where it was plus the downtime: never back to SIM_START.
    expect(wall.now() - 9 * DAY).toBe(START_MS + 3 * DAY + 5_000);
  });

  it('while it holds no simulator state, each start fixes the offset again (or drops it)', () => {
    const db = simDb();
    expect(simClockOf(db, START_MS, START_MS + DAY, 'DATA_DIR d').offsetMs).toBe(-DAY);
    expect(simClockOf(db, START_MS, START_MS + 2 * DAY, 'DATA_DIR d').offsetMs).toBe(-2 * DAY);
    expect(simClockOf(db, undefined, START_MS + 3 * DAY, 'DATA_DIR d')).toEqual({ offsetMs: 0 });
  });

  it('another SIM_START over its state: refused, naming both instants', async () => {
    const db = simDb();
    const wall = new ManualClock(START_MS + DAY);
    await withAccount(db, wall, simClockOf(db, START_MS, wall.now(), 'DATA_DIR d').offsetMs);
    const other = START_MS + 3_600_000;
    expect(() => simClockOf(db, other, wall.now(), 'DATA_DIR d')).toThrow(SimClockError);
    expect(() => simClockOf(db, other, wall.now(), 'DATA_DIR d')).toThrow(/DATA_DIR d: its simulated clock started at 2026-11-18T12:00:00.000Z .* cannot start again at 2026-11-18T13:00:00.000Z/);
  });

  it('SIM_START removed: the stored clock goes on (kept, for a warning)', async () => {
    const db = simDb();
    const wall = new ManualClock(START_MS + DAY);
    await withAccount(db, wall, simClockOf(db, START_MS, wall.now(), 'DATA_DIR d').offsetMs);
    wall.advance(60_000);
    expect(simClockOf(db, undefined, wall.now(), 'DATA_DIR d')).toEqual({ offsetMs: -DAY, startMs: START_MS, kept: true });
  });

  it('SIM_START on state made on the wall clock: refused (the market would go back behind its deals)', async () => {
    const db = simDb();
    const wall = new ManualClock(START_MS + DAY);
    expect(simClockOf(db, undefined, wall.now(), 'DATA_DIR d').offsetMs).toBe(0);
    await withAccount(db, wall, 0);
    expect(() => simClockOf(db, START_MS, wall.now(), 'DATA_DIR d')).toThrow(/DATA_DIR d holds simulator state .* made on the wall clock/);
    expect(simClockOf(db, undefined, wall.now(), 'DATA_DIR d')).toEqual({ offsetMs: 0 });
  });
});

/** Every symbol's current tick on every server. */
function quotes(sim: Simulator): unknown[] {
  const out: unknown[] = [];
  for (const s of sim.servers.values()) for (const sym of s.market.symbols) out.push(s.market.tick(sym));
  return out;
}

describe('the same seed and SIM_START, started at different wall times', () => {
  it('give identical quotes and bars at the same elapsed time (property)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 1_000 }),
        fc.integer({ min: 0, max: 400 * DAY }), // SIM_START: any instant of 2026-2027 (weekends included)
        fc.integer({ min: 0, max: 2_000 * DAY }), // the first run's wall time, after SIM_START
        fc.integer({ min: 1, max: 2_000 * DAY }), // the second's, later
        fc.array(fc.integer({ min: 1, max: 4_000 }), { minLength: 1, maxLength: 12 }),
        (seed, startAfter, wallA, laterB, steps) => {
          const start = Date.UTC(2026, 0, 1) + startAfter;
          const runs = [start + wallA, start + wallA + laterB].map((wall0) => {
            const wall = new ManualClock(wall0);
            const { offsetMs } = simClockOf(simDb(), start, wall.now(), 'DATA_DIR d');
            const sim = createSimulator({ db: simDb(), seed, clock: shiftedClock(wall, offsetMs), driveMs: false });
            return { wall, sim };
          });
          const [a, b] = runs as [(typeof runs)[0], (typeof runs)[0]];
          let elapsed = 0;
          for (const ms of steps) {
            elapsed += ms;
            for (const r of runs) {
              r.wall.advance(ms);
              r.sim.advance();
            }
            expect(a.sim.clock.now()).toBe(start + elapsed);
            expect(quotes(b.sim)).toEqual(quotes(a.sim));
          }
          const history = (r: typeof a) => {
            const s = r.sim.server('Sim-P5-Demo')!;
            const sym = s.market.bySymbol.get('BTCUSD')!;
            return [s.market.priceHistory(sym, 'M1', start - 3_600_000, start + elapsed + 1), s.market.priceHistory(sym, 'H1', start - 6 * 3_600_000, start + elapsed + 1)];
          };
          expect(history(b)).toEqual(history(a));
          for (const r of runs) r.sim.stop();
        },
      ),
      { numRuns: 15 },
    );
  }, 60_000); // ~2-5 s alone; up to 10 s seen at load 13
});
