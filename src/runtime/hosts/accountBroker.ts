// Where an account's BrokerConnection comes from inside a shard. Embedded mode (default): one
// in-process simulator per shard thread, over the shard's own SQLite connection. The simulator is
// deterministic from its seed and the clock, so every shard shows the same market; a login's
// account state lives in SQLite and is only ever driven by the one shard owning its account: a
// shard whose account lets the login go lets its simulator's copy go (letGo).
// Bridge mode: each connection is a BridgeBrokerConnection to BRIDGE_URL (the standalone simulator
// server or a real terminal bridge); the server's platform, build and clock are known once connected.
import { readFileSync } from 'node:fs';
import { BridgeBrokerConnection } from '../../broker/bridge.js';
import { SimBrokerConnection } from '../../broker/sim.js';
import { createSimulator } from '../../broker/simulatorSetup.js';
import { fullDiskOf } from '../../store/fullDisk.js';
import type { BrokerConnectionFactory } from '../../broker/types.js';
import type { Fault, FaultSpec } from '../../sim/faults.js';
import { marketClockOf, type ShardContext } from './context.js';

export interface BrokerSource {
  factory: BrokerConnectionFactory;
  /** Fault injection (tests, benchmarks); undefined when the upstream is not the simulator. */
  /** `shared`: its count, shared by the gateway's shards (FaultController.set). */
  injectFault?(spec: FaultSpec, shared?: Int32Array): number;
  /** Those of a server, of one login of it (not the server-wide ones), or one by id, when given. */
  clearFaults?(server?: string, login?: string, id?: number): number;
  listFaults?(): Fault[];
  /** No account of this thread binds the login any more: the embedded simulator lets its copy go
   *  (SimServer.forget), as the login's next account may run in another thread. False: its copy
   *  stays here (its checkpoint could not be written: a full disk), to be let go later. */
  letGo?(server: string, login: string): boolean;
  stop(): void;
}

/** How often the same reason a bridge could not be reached is logged again by a shard. */
const BRIDGE_FAILURE_REPEAT_MS = 60_000;

/**
 * Why the bridge cannot be reached, logged: a certificate that fails the check, a refused port.
 * Before, nothing said it (the accounts stayed `connecting`, docs/operations.md#tls promised the
 * log would say why). Every account of the shard meets the same failure at each of its backoff's
 * tries: one line per reason per minute, not one per account and try.
 */
function bridgeFailureLog(ctx: ShardContext, url: string): (err: Error) => void {
  const said = new Map<string, number>();
  return (err) => {
    // The socket's own error (ECONNREFUSED, a timeout) when the message does not carry it already.
    const cause = err.cause instanceof Error && !err.message.includes(err.cause.message) ? err.cause.message : undefined;
    const reason = cause === undefined ? err.message : `${err.message}: ${cause}`;
    const now = ctx.clock.now();
    const last = said.get(reason);
    if (last !== undefined && now - last < BRIDGE_FAILURE_REPEAT_MS) return;
    if (said.size >= 100) said.clear();
    said.set(reason, now);
    ctx.log.warn('cannot connect to the bridge; its accounts stay not connected and retry with backoff', { bridge: url, error: reason });
  };
}

export function createBrokerSource(ctx: ShardContext): BrokerSource {
  const mode = ctx.settings.brokerMode;
  if (mode === 'bridge') {
    const url = ctx.settings.bridgeUrl;
    const m = url ? /^(?:(tcp|tls):\/\/)?([^:/]+):(\d+)$/.exec(url) : null;
    if (!m) throw new Error('brokerMode=bridge needs bridgeUrl (BRIDGE_URL), e.g. tcp://127.0.0.1:4510');
    const [host, port] = [m[2]!, Number(m[3])];
    const caFile = ctx.settings.bridgeCaFile;
    const tls = m[1] === 'tls' ? { tls: caFile ? { ca: readFileSync(caFile) } : {} } : {};
    const onConnectError = bridgeFailureLog(ctx, url!);
    return {
      factory: (c) => new BridgeBrokerConnection({
        host, port, server: c.server, login: c.login, password: c.password, ...(c.platform ? { platform: c.platform } : {}), ...tls, clock: ctx.clock, onConnectError,
      }),
      stop: () => {},
    };
  }
  // SIM_SERVERS_FILE, or config/sim-servers.json; replay files are read relative to it; SIM_MARKET_HOURS.
  const path = ctx.settings.simConfigPath;
  const hours = ctx.settings.simMarketHours;
  const simStartMs = ctx.settings.simStartMs;
  const sim = createSimulator({ db: ctx.db, clock: marketClockOf(ctx), ...(path ? { configPath: path } : {}), ...(hours ? { marketHours: hours } : {}),
    ...(simStartMs !== undefined ? { replayStartMs: simStartMs } : {}),
    ...(ctx.commitGroup ? { commitGroup: ctx.commitGroup } : {}),
    ...(ctx.fatal ? { onStoreFailure: ctx.fatal } : {}),
    fullDisk: fullDiskOf(ctx),
  });
  return {
    factory: (credentials) => new SimBrokerConnection(sim, credentials),
    injectFault: (spec, shared) => sim.faults.set(spec, shared).id,
    clearFaults: (server, login, id) => sim.faults.clear(id, server, login),
    listFaults: () => sim.faults.list(),
    letGo: (server, login) => sim.server(server)?.forget(login) ?? true,
    stop: () => sim.stop(),
  };
}
