// Shared fixtures for simulator tests: a small two-server config and a manual clock.
import { parseSimConfig, type SimConfig } from '../../src/sim/config.js';
import { loadSimConfig } from '../../src/sim/config.js';
import { ManualClock, Simulator } from '../../src/sim/simulator.js';
import type { SimPersistence } from '../../src/sim/persistence.js';
import { MemorySimStore } from '../../src/store/simStore.js';
import { SimBrokerConnection } from '../../src/broker/sim.js';

/** Wednesday 2026-11-18 12:00 UTC: FX sessions open. */
export const T0 = Date.UTC(2026, 10, 18, 12, 0, 0);

export function testConfig(seed = 7): SimConfig {
  const full = loadSimConfig();
  return parseSimConfig({ ...full, seed });
}

export function makeSim(opts: { seed?: number; store?: SimPersistence; t0?: number } = {}) {
  const clock = new ManualClock(opts.t0 ?? T0);
  const store = opts.store ?? new MemorySimStore();
  const sim = new Simulator({ config: testConfig(opts.seed), store, clock });
  return { sim, clock, store };
}

export async function connect(sim: Simulator, server = 'Sim-P5-Demo', login = '1001', password = 'pw') {
  const c = new SimBrokerConnection(sim, { server, login, password });
  await c.connect();
  return c;
}
