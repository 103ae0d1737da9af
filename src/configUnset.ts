// What applies when an optional setting is left unset: its default is decided where it is used
// (the lease for CLUSTER_STEP_DOWN_MS, the shipped servers file, the key file in DATA_DIR...), so
// /v1/status's configuration alone shows those as null. The operator reads these words beside them.
import { hostname } from 'node:os';
import type { Config } from './config.js';

type Optional = {
  [K in keyof Config]-?: undefined extends Config[K] ? K : never
}[keyof Config];

/** Words for each unset optional setting, given the rest of the configuration. */
const MEANING: { [K in Optional]: (c: Config) => string } = {
  pipeliningPort: () => 'off (no pipelining listener)',
  pipeliningHost: (c) => `HOST (${c.host})`,
  managementKey: (c) => `created at first start (written to ${c.dataDir}/bootstrap.json)`,
  secretKey: (c) => `the key file ${c.dataDir}/secret.key (generated at first start)`,
  simServersFile: (c) => (c.brokerMode === 'embedded' ? 'config/sim-servers.json (shipped)' : 'not used (bridge mode)'),
  simMarketHours: (c) => (c.brokerMode === 'embedded' ? "sessions (each symbol's own hours)" : "not used (bridge mode: the simulator's --market-hours)"),
  simStart: (c) => (c.brokerMode === 'embedded' ? 'the wall clock (or the simulated clock DATA_DIR keeps)' : "not used (bridge mode: the simulator's --start)"),
  bridgeUrl: (c) => (c.brokerMode === 'bridge' ? 'required in bridge mode' : 'not used (embedded simulator)'),
  bridgeCaFile: () => "the system's CAs (tls:// bridges)",
  tlsCertFile: () => 'plain HTTP (no TLS)',
  tlsKeyFile: () => 'plain HTTP (no TLS)',
  tlsCaFile: () => 'none',
  tlsKeyPassphrase: () => 'none (unencrypted key file)',
  natsUrl: () => 'single node (no cluster)',
  databaseUrl: () => 'single node (SQLite in DATA_DIR)',
  nodeId: (c) => `${hostname()}:${c.port} (host name and port)`,
  clusterStepDownMs: (c) => `the lease: ${c.clusterLeaseMs}`,
  clusterSettleMs: (c) => `a third of the lease: ${Math.round(c.clusterLeaseMs / 3)}`,
  quoteLoginsFile: () => 'none (a node running no account of a server takes its quotes from the owner\'s relay)',
};

/** For each optional setting the configuration leaves unset, what applies instead. */
export function unsetMeanings(config: Config): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k of Object.keys(MEANING) as Optional[]) {
    if (config[k] === undefined) out[k] = MEANING[k](config);
  }
  return out;
}
