// Shared fixtures for simulator tests: a small two-server config and a manual clock; a simulator
// behind a bridge server on a free loopback port, for gateways in bridge mode.
import { parseSimConfig, type SimConfig } from '../../src/sim/config.js';
import { loadSimConfig } from '../../src/sim/config.js';
import { ManualClock, Simulator } from '../../src/sim/simulator.js';
import type { SimPersistence } from '../../src/sim/persistence.js';
import { MemorySimStore } from '../../src/store/memorySimStore.js';
import { SimBrokerConnection } from '../../src/broker/sim.js';
import { startSimServer, type SimServerHandle, type SimServerOptions } from '../../src/simServer.js';

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

/** Each login's journal (equity points, deals, history orders) and books (open orders, positions)
 *  on a server: what two simulators given the same commands must agree on (the A/B property tests
 *  of a walk cut short against the full walk). */
export function journalAndBooks(w: { sim: Simulator; store: SimPersistence }, server: string, logins: readonly string[]) {
  const s = w.sim.server(server)!;
  return logins.map((login) => ({
    equity: w.store.equity(server, login, 0),
    deals: w.store.deals(server, login, 0, Number.MAX_SAFE_INTEGER),
    orders: w.store.historyOrders(server, login, 0, Number.MAX_SAFE_INTEGER),
    open: [...s.accounts.get(login)!.orders.values()],
    positions: [...s.accounts.get(login)!.positions.values()],
  }));
}

export async function connect(sim: Simulator, server = 'Sim-P5-Demo', login = '1001', password = 'pw') {
  const c = new SimBrokerConnection(sim, { server, login, password });
  await c.connect();
  return c;
}

export interface BridgeSim {
  readonly sim: Simulator;
  /** The bridge's port, the same after a restart. */
  readonly port: number;
  /** `BRIDGE_URL` for a gateway (`tls://` when the bridge serves TLS). */
  readonly url: string;
  /** The bridge server; undefined while stopped. */
  readonly bridge: SimServerHandle | undefined;
  /** Stop serving (the simulator runs on): a broker outage for the gateways. */
  stopBridge(): Promise<void>;
  /** Serve again on the same port; nothing if serving. */
  restartBridge(): Promise<void>;
  /** The bridge and the simulator. */
  close(): Promise<void>;
}

/**
 * A simulator (in-memory store, running unless `start: false`) behind a bridge server on a free
 * loopback port.
 */
export async function startBridgeSim(opts: { config?: SimConfig; start?: boolean; tls?: SimServerOptions['tls'] } = {}): Promise<BridgeSim> {
  const sim = new Simulator({ config: opts.config ?? loadSimConfig(), store: new MemorySimStore() });
  if (opts.start !== false) sim.start();
  const serve = (port: number) => startSimServer(sim, { port, host: '127.0.0.1', ...(opts.tls ? { tls: opts.tls } : {}) });
  let bridge: SimServerHandle | undefined = await serve(0);
  const port = bridge.port;
  const stopBridge = async () => {
    const b = bridge;
    bridge = undefined;
    await b?.close();
  };
  return {
    sim,
    port,
    url: `${opts.tls ? 'tls' : 'tcp'}://127.0.0.1:${port}`,
    get bridge() { return bridge; },
    stopBridge,
    async restartBridge() {
      bridge ??= await serve(port);
    },
    async close() {
      await stopBridge();
      sim.stop();
    },
  };
}
