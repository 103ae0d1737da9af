// All settings in one zod schema. Sources, later wins: defaults < JSON file (TAGW_CONFIG) < env vars.
// The defaults make `npm start` work on a fresh machine.
import { readFileSync } from 'node:fs';
import { availableParallelism, hostname } from 'node:os';
import { resolve } from 'node:path';
import { z } from 'zod';
import { parseOrigins } from './util/origins.js';
import { isTimeZone } from './news/zone.js';
import { MARKET_HOURS } from './sim/config.js';
import { parseSimStart } from './sim/simStart.js';

const bool = z.union([z.boolean(), z.enum(['1', '0', 'true', 'false', 'yes', 'no', ''])], { error: 'must be 1, 0, true, false, yes or no' }).transform((v) =>
  typeof v === 'boolean' ? v : v === '1' || v === 'true' || v === 'yes');
/** Not a number, or not a whole one: said so ("received NaN" told an operator who wrote PORT=abc little). */
const int = (min: number, max: number) =>
  z.coerce.number({ error: (i) => (i.code === 'invalid_type' ? 'must be a whole number' : undefined) }).int().min(min).max(max);
/** The path of a PEM file. The PEM itself given instead (TLS_KEY_FILE="$(cat key.pem)", the usual
 *  slip with a secrets store) is refused without being repeated: the error naming the "path" that
 *  does not exist went to the log with the whole private key in it. */
const pemPath = z.string().min(1).refine((v) => !v.includes('-----BEGIN') && !/[\r\n]/.test(v), {
  message: 'holds a PEM block (the key or certificate itself), not a path: write it to a file (mode 0600 for a key) and give its path',
}).optional();

/** Whether an engine's client can parse the address (WHATWG URL, as pg-connection-string and nats.js
 *  parse it; pg also takes an empty host, `postgres://user@/db?host=/socket`). One that cannot (a port
 *  that is no number) is a mistake in the value, exit 2, not an engine away (exit 1, restarted). */
function parsesAsUrl(v: string): boolean {
  return [v, v.replace('@/', '@host/')].some((u) => URL.canParse(u));
}
/** The value may hold a password: the message never repeats it. */
const NOT_A_URL = (form: string) => `not a valid URL (a port that is not a number? characters of the user or password not percent-encoded?): expected ${form}`;

export const configSchema = z.object({
  host: z.string().min(1).default('127.0.0.1'),
  port: int(0, 65535).default(8080),
  /** An extra, opt-in listener that answers HTTP/1.1 pipelined requests in order (docs/http.md
   *  "The pipelining port"); off when unset. Its host defaults to HOST. */
  pipeliningPort: int(0, 65535).optional(),
  pipeliningHost: z.string().min(1).optional(),
  dataDir: z.string().min(1).default('./data'),
  /** A fixed management key for scripted set-up; otherwise the first start creates one. */
  managementKey: z.string().min(16, 'must be at least 16 characters').optional(),
  allowUwsFallback: bool.default(false),
  trustProxy: bool.default(false),
  logLevel: z.enum(['debug', 'info', 'warn', 'error', 'silent']).default('info'),
  // One core stays with the main thread (HTTP, WebSocket fan-out): with a shard per core, a 2-core
  // machine ran three busy threads on two cores and orders took 20% longer (bench http).
  shards: int(1, 256).default(Math.max(1, availableParallelism() - 1)),
  /** Broker logins of new and re-bound accounts (/ConnectEx, POST /v1/broker-accounts, POST
   *  /v1/seats) running at once on this node; more wait, each key's in arrival order (at most
   *  accountCreationQueue of a key, one more answered 429 ACCOUNT_CREATION_BUSY with retry-after),
   *  the keys served in turn.
   *  0: no bound (docs/scale.md, "The main thread during a creation ramp"). */
  accountCreationConcurrency: int(0, 10_000).default(4),
  accountCreationQueue: int(0, 1_000_000).default(1_000),
  /** How long a private seat takes to build (ms). */
  seatBuildMs: int(0, 86_400_000).default(3_000),
  maxBodyBytes: int(1_024, 16 * 1024 * 1024).default(64 * 1024),
  /** A request body must be complete this long after its headers, or it is answered 408. Below
   *  10 s: uWS itself closes the connection, unanswered, some 10 s after the headers (docs/http.md). */
  bodyTimeoutMs: int(50, 8_000).default(5_000),
  /** 32-byte key (hex or base64) for encrypting broker passwords at rest; generated into dataDir when absent. */
  secretKey: z.string().optional(),
  /** Start although the key opens none of the stored broker passwords (they must be bound again). */
  secretKeyReset: bool.default(false),
  /** Where account connections go: the in-process simulator (one per shard) or a bridge server. */
  brokerMode: z.enum(['embedded', 'bridge']).default('embedded'),
  /** Servers, symbols and faults of the embedded simulator (docs/simulator.md); default config/sim-servers.json. */
  simServersFile: z.string().min(1).optional(),
  /** The embedded simulator's market hours: each symbol's own sessions (default; forex closed over
   *  the weekend) or `always` (every symbol quotes and trades around the clock). Not for bridge mode:
   *  there it is the simulator process's `--market-hours`. */
  simMarketHours: z.enum(MARKET_HOURS).optional(),
  /** The instant the embedded simulator's market starts at, on a fresh DATA_DIR (an ISO instant with
   *  its zone); the offset from the wall clock is kept in DATA_DIR (src/store/simClock.ts). Unset: the
   *  wall clock. Not for bridge mode: there it is the simulator process's `--start`. */
  simStart: z.string().transform((v, ctx) => {
    const r = parseSimStart(v);
    if ('ms' in r) return new Date(r.ms).toISOString();
    ctx.addIssue({ code: 'custom', message: r.problem });
    return z.NEVER;
  }).optional(),
  /** Bridge server address when brokerMode=bridge, e.g. tcp://127.0.0.1:4510. */
  bridgeUrl: z.string().regex(/^((tcp|tls):\/\/)?[^:/]+:\d+$/, 'expected tcp://host:port or tls://host:port').optional(),
  /** CA certificate(s) (PEM) a tls:// bridge's certificate must chain to, instead of the system's (a pinned CA). */
  bridgeCaFile: pemPath,
  /** HTTPS and WSS on the same port when both are set (docs/operations.md#tls); plain HTTP otherwise. */
  tlsCertFile: pemPath,
  tlsKeyFile: pemPath,
  /** Intermediate/client CA file handed to uWS (ca_file_name). */
  tlsCaFile: pemPath,
  tlsKeyPassphrase: z.string().min(1).optional(),
  drainTimeoutMs: int(0, 600_000).default(10_000),
  /** Broker reconnect backoff of each account: the first delay and the cap (full jitter between). */
  reconnectBaseMs: int(1, 600_000).default(250),
  reconnectCapMs: int(1, 3_600_000).default(30_000),
  /** How long a request waits for its account's broker connection before 503 NOT_CONNECTED. */
  brokerWaitMs: int(0, 120_000).default(2_000),
  /** A bind (ConnectEx, POST /v1/broker-accounts) or an account upgrade: how long it waits for the
   *  first connect before answering with the phase it is in. */
  bindWaitMs: int(0, 120_000).default(3_000),
  /** CheckConnect: how long it waits for the reconnect it triggered. */
  checkWaitMs: int(0, 120_000).default(1_000),
  /** A gateway session resumed after a restart: how long it waits, once, for last-known account values. */
  resumeWaitMs: int(0, 3_600_000).default(30_000),
  /** The shards' subscription upkeep at the broker (releases, resubscribes after a reconnect, closed
   *  candles missed during one): how long each waits for the account's connection. */
  subscriptionWaitMs: int(0, 120_000).default(1_000),
  /** Tests: the shards' clock (and their embedded simulators') runs this far from the system clock. */
  shardClockOffsetMs: z.coerce.number().int().min(-86_400_000).max(86_400_000).default(0),
  /** Free space DATA_DIR's file system must keep (MiB); below it trading calls answer 503
   *  STORAGE_UNAVAILABLE before anything is sent (src/store/storageHealth.ts). */
  storageMinFreeMb: z.coerce.number().min(0).max(1_000_000).default(16),
  /** How often the free space is looked at (also the most a refusal can outlast freed space). */
  storageCheckMs: int(10, 600_000).default(1_000),
  /** The WAL checkpointer thread's CPU scheduling (src/store/checkpointer.ts): `idle` (Linux
   *  SCHED_IDLE, nice 19 where that cannot be set) so a woken order thread takes the CPU from it at
   *  once; `normal` as any thread. Idle costs no durability (commits never wait for it); on a CPU
   *  kept busy it may fall behind, and the WAL backstop checkpoints inline as without the thread. */
  checkpointerPriority: z.enum(['idle', 'normal']).default('idle'),
  /** Origins of browser pages allowed to call the API (CORS) and open its WebSockets: comma-separated
   *  scheme://host[:port]; default none (docs/dashboard.md). */
  corsOrigins: z.union([z.string(), z.array(z.string())]).default([]).transform((v, ctx) => {
    try {
      return parseOrigins(v);
    } catch (e) {
      ctx.addIssue({ code: 'custom', message: (e as Error).message });
      return z.NEVER;
    }
  }),
  idleTimeoutSec: int(8, 960).default(120),
  authFailLimit: int(1, 1_000_000).default(40),
  authFailWindowMs: int(1_000, 86_400_000).default(5 * 60_000),
  authBlockMs: int(1_000, 86_400_000).default(10 * 60_000),
  /** Per-API-key limits (token buckets, burst = one second's worth); 0: unlimited. A key's own
   *  overrides are set with PUT /v1/keys/{id}/limits or `tagw keys limits`. */
  keyRequestsPerSec: z.coerce.number().min(0).max(10_000_000).default(5_000),
  /** Trading calls (classic order routes and /v1/proxy trade operations) per key per second. */
  keyOrdersPerSec: z.coerce.number().min(0).max(10_000_000).default(500),
  /** How often keys' last-use times are written (one transaction for all keys used meanwhile). */
  keyUsageFlushMs: int(10, 3_600_000).default(10_000),
  /** /v1/stream (docs/stream.md): heartbeat interval, per-socket backpressure limits, sweep period, shard waits. */
  streamHeartbeatMs: int(50, 600_000).default(10_000),
  streamSoftLimitBytes: int(1_024, 64 * 1024 * 1024).default(64 * 1024),
  streamHardLimitBytes: int(4_096, 1024 * 1024 * 1024).default(4 * 1024 * 1024),
  streamSweepMs: int(1, 10_000).default(20),
  streamSubscribeTimeoutMs: int(100, 120_000).default(10_000),
  streamSnapshotTimeoutMs: int(100, 120_000).default(15_000),
  /** Cluster mode: how long a fresh socket's snapshot or a resume waits for the cluster (the account's
   *  role being taken; on the owner, its numbered frames stored in JetStream while events keep
   *  arriving faster than it acknowledges; a resume's read of the shared history); then an ERROR
   *  frame and close 4010 (docs/cluster.md). */
  streamSnapshotStoreWaitMs: int(100, 120_000).default(10_000),
  /** How often open /v1/stream sockets re-check that their API key is not revoked. */
  streamKeyCheckMs: int(50, 600_000).default(5_000),
  /** Resume history per account (docs/stream.md "History"): at most this many account events, none
   *  older than this; an account's stream is kept this long after its last socket closed. Defaults
   *  cover a 60 s disconnect of a busy account (100 events/s). */
  streamHistoryMaxEvents: int(1, 1_000_000).default(10_000),
  streamHistoryMaxAgeMs: int(100, 86_400_000).default(120_000),
  /** The most memory (bytes, about) account frames waiting for a full DATA_DIR take on one node
   *  (docs/storage.md): past it an account whose frame does not fit has its waiting frames dropped
   *  (none was sent) and its stream begins a new epoch (sockets close 4014, resume recovered:false). */
  streamHistoryHeldMaxBytes: int(64 * 1024, 64 * 1024 * 1024 * 1024).default(64 * 1024 * 1024),
  /** Economic calendar for /news: rules JSON, events JSON, CSV or ICS export (docs/news.md). Missing file: built-in schedule. */
  calendarFile: z.string().min(1).default('./config/calendar.json'),
  /** Zone of wall-clock times in CSV/ICS calendar exports without an explicit zone (ForexFactory exports: New York). */
  /** Cluster mode (docs/cluster.md) iff both are set: NATS carries forwarding and stream events,
   *  PostgreSQL the records of value. Either may hold credentials: /v1/status shows them redacted. */
  natsUrl: z.string().regex(/^(nats|tls):\/\/\S+$/, 'expected nats://host:port (comma-separate several servers)')
    .refine((v) => v.split(',').map((u) => u.trim()).filter((u) => u !== '').every(parsesAsUrl), NOT_A_URL('nats://user:password@host:port')).optional(),
  databaseUrl: z.string().regex(/^postgres(ql)?:\/\/\S+$/, 'expected postgres://user:password@host:port/database')
    .refine(parsesAsUrl, NOT_A_URL('postgres://user:password@host:port/database')).optional(),
  /** This node's name in the cluster; default `${hostname}:${port}` (clusterSettings). */
  nodeId: z.string().min(1).max(200).regex(/^[A-Za-z0-9._:-]+$/, 'letters, digits and . _ : - only (it is part of NATS subjects)').optional(),
  /** An account's owner must renew its lease within this (renewals every third of it); a node that
   *  dies loses its accounts to the others after at most this long. */
  clusterLeaseMs: int(300, 600_000).default(10_000),
  /** A request for an account with no owner (a takeover) waits this long for one, then 503. */
  clusterOwnerWaitMs: int(0, 120_000).default(5_000),
  /** How long a node waits for another node's process to say it is alive over NATS (a few NATS
   *  round trips): a restart under its NODE_ID asking its earlier process, a forwarded call its owner. */
  clusterAliveAskMs: int(10, 10_000).default(250),
  /** A node whose NATS link is down this long while another live node reports its own up hands its
   *  accounts over (as on SIGTERM) and takes none until the link is back; default CLUSTER_LEASE_MS. */
  clusterStepDownMs: int(100, 3_600_000).optional(),
  /** Cold start (no node holds a live lease): how long a starting node only heartbeats before its
   *  first acquisition, so nodes started together see each other and each takes its own share.
   *  Default: a renewal period (a third of the lease). */
  clusterSettleMs: int(0, 600_000).optional(),
  /** Replicas of the account streams' resume history in JetStream (the stream TAGW_HISTORY): 1 keeps it
   *  on one nats-server, lost with it; 3 on a 3-server JetStream cluster survives the loss of any one.
   *  At most the number of JetStream servers (else the start fails: "insufficient resources"). */
  natsStreamReplicas: int(1, 5).default(1),
  /** Cluster mode: per broker server, a market-data login used only for quotes (a JSON file,
   *  src/runtime/quoteLogins.ts): a node whose sockets follow a symbol of a server no account
   *  running on it is of takes its quotes from a session of that login rather than the owner's relay. */
  quoteLoginsFile: z.string().min(1).optional(),
  calendarTimeZone: z.string().min(1).default('America/New_York').superRefine((tz, ctx) => {
    // Checked here, not at the first calendar load: an unknown zone there throws for every row and
    // the operator's whole file is dropped for the built-in schedule.
    if (!isTimeZone(tz)) ctx.addIssue({ code: 'custom', message: `unknown time zone '${tz}' (an IANA name such as America/New_York or UTC)` });
  }),
}).superRefine((c, ctx) => {
  // Half a TLS configuration would silently serve plain HTTP.
  if ((c.tlsCertFile === undefined) !== (c.tlsKeyFile === undefined)) {
    ctx.addIssue({ code: 'custom', path: [c.tlsCertFile ? 'tlsKeyFile' : 'tlsCertFile'], message: 'TLS_CERT_FILE and TLS_KEY_FILE go together' });
  }
  // A soft limit at or above the hard one would never make a slow socket coalesce: uWS caps its
  // backpressure at the hard limit (maxBackpressure), so the slow-client policy would be silently off.
  if (c.streamSoftLimitBytes >= c.streamHardLimitBytes) {
    ctx.addIssue({ code: 'custom', path: ['streamSoftLimitBytes'], message: `must be below streamHardLimitBytes (${c.streamHardLimitBytes})` });
  }
  // Half a cluster would run as a lone node believing it is one, or fail at the first forward.
  if ((c.natsUrl === undefined) !== (c.databaseUrl === undefined)) {
    ctx.addIssue({ code: 'custom', path: [c.natsUrl ? 'databaseUrl' : 'natsUrl'], message: 'NATS_URL and DATABASE_URL go together (cluster mode needs both)' });
  }
  // The embedded simulator lives inside one process: each node would trade against its own broker.
  if (c.natsUrl !== undefined && c.databaseUrl !== undefined && c.brokerMode === 'embedded') {
    ctx.addIssue({
      code: 'custom', path: ['brokerMode'],
      message: 'cluster mode (NATS_URL and DATABASE_URL) cannot use the embedded simulator: use bridge mode, ' +
        'BROKER_MODE=bridge BRIDGE_URL=tcp://host:port, with a simulator process (`npm run sim`) or a real bridge that every node reaches',
    });
  }
});

export type Config = z.infer<typeof configSchema>;
export type ConfigInput = z.input<typeof configSchema>;

export const CONFIG_ENV: Readonly<Record<string, keyof Config>> = {
  HOST: 'host', PORT: 'port', HTTP_PIPELINING_PORT: 'pipeliningPort', HTTP_PIPELINING_HOST: 'pipeliningHost', DATA_DIR: 'dataDir', GATEWAY_MANAGEMENT_KEY: 'managementKey',
  ALLOW_UWS_FALLBACK: 'allowUwsFallback', TRUST_PROXY: 'trustProxy', LOG_LEVEL: 'logLevel', SHARDS: 'shards',
  SEAT_BUILD_MS: 'seatBuildMs', ACCOUNT_CREATION_CONCURRENCY: 'accountCreationConcurrency', ACCOUNT_CREATION_QUEUE: 'accountCreationQueue', MAX_BODY_BYTES: 'maxBodyBytes', BODY_TIMEOUT_MS: 'bodyTimeoutMs', TAGW_SECRET_KEY: 'secretKey', SECRET_KEY_RESET: 'secretKeyReset',
  BROKER_MODE: 'brokerMode', BRIDGE_URL: 'bridgeUrl', SIM_SERVERS_FILE: 'simServersFile', SIM_MARKET_HOURS: 'simMarketHours', SIM_START: 'simStart',
  DRAIN_TIMEOUT_MS: 'drainTimeoutMs', RECONNECT_BASE_MS: 'reconnectBaseMs', RECONNECT_CAP_MS: 'reconnectCapMs',
  BROKER_WAIT_MS: 'brokerWaitMs', BIND_WAIT_MS: 'bindWaitMs', CHECK_WAIT_MS: 'checkWaitMs', RESUME_WAIT_MS: 'resumeWaitMs', SUBSCRIPTION_WAIT_MS: 'subscriptionWaitMs', KEY_USAGE_FLUSH_MS: 'keyUsageFlushMs',
  KEY_REQUESTS_PER_SEC: 'keyRequestsPerSec', KEY_ORDERS_PER_SEC: 'keyOrdersPerSec', IDLE_TIMEOUT_SEC: 'idleTimeoutSec',
  CALENDAR_FILE: 'calendarFile', CALENDAR_TIME_ZONE: 'calendarTimeZone',
  STREAM_HEARTBEAT_MS: 'streamHeartbeatMs', STREAM_SOFT_LIMIT_BYTES: 'streamSoftLimitBytes',
  STREAM_HARD_LIMIT_BYTES: 'streamHardLimitBytes', STREAM_SWEEP_MS: 'streamSweepMs', STREAM_SNAPSHOT_STORE_WAIT_MS: 'streamSnapshotStoreWaitMs',
  STREAM_HISTORY_MAX_EVENTS: 'streamHistoryMaxEvents', STREAM_HISTORY_MAX_AGE_MS: 'streamHistoryMaxAgeMs',
  STREAM_HISTORY_HELD_MAX_BYTES: 'streamHistoryHeldMaxBytes',
  CORS_ORIGINS: 'corsOrigins', STORAGE_MIN_FREE_MB: 'storageMinFreeMb', STORAGE_CHECK_MS: 'storageCheckMs', CHECKPOINTER_PRIORITY: 'checkpointerPriority',
  TLS_CERT_FILE: 'tlsCertFile', TLS_KEY_FILE: 'tlsKeyFile', TLS_CA_FILE: 'tlsCaFile', TLS_KEY_PASSPHRASE: 'tlsKeyPassphrase',
  BRIDGE_CA_FILE: 'bridgeCaFile',
  NATS_URL: 'natsUrl', DATABASE_URL: 'databaseUrl', NODE_ID: 'nodeId', CLUSTER_LEASE_MS: 'clusterLeaseMs',
  CLUSTER_OWNER_WAIT_MS: 'clusterOwnerWaitMs', CLUSTER_ALIVE_ASK_MS: 'clusterAliveAskMs', CLUSTER_STEP_DOWN_MS: 'clusterStepDownMs',
  CLUSTER_SETTLE_MS: 'clusterSettleMs', NATS_STREAM_REPLICAS: 'natsStreamReplicas', QUOTE_LOGINS_FILE: 'quoteLoginsFile',
};

/** The environment variables the configuration reads (README "Configuration" lists each). */
export const CONFIG_VARIABLES: readonly string[] = Object.keys(CONFIG_ENV);

export class ConfigError extends Error {}

/** What cluster mode runs with, resolved; undefined on a single node (the default). */
export interface ClusterSettings {
  natsUrl: string;
  databaseUrl: string;
  nodeId: string;
  leaseMs: number;
  ownerWaitMs: number;
  aliveAskMs: number;
  /** CLUSTER_STEP_DOWN_MS, or the lease when unset. */
  stepDownMs: number;
  /** Unset: a third of the lease (LeaseKeeperOptions.settleMs). */
  settleMs?: number;
  /** NATS_STREAM_REPLICAS: the history stream's replicas in JetStream. */
  streamReplicas: number;
  /** QUOTE_LOGINS_FILE, absolute (checked at start: checkBrokerConfig). */
  quoteLoginsFile?: string;
}

export function clusterSettings(c: Config): ClusterSettings | undefined {
  if (c.natsUrl === undefined || c.databaseUrl === undefined) return undefined;
  return {
    natsUrl: c.natsUrl, databaseUrl: c.databaseUrl, nodeId: c.nodeId ?? `${hostname()}:${c.port}`,
    leaseMs: c.clusterLeaseMs, ownerWaitMs: c.clusterOwnerWaitMs, aliveAskMs: c.clusterAliveAskMs, stepDownMs: c.clusterStepDownMs ?? c.clusterLeaseMs,
    streamReplicas: c.natsStreamReplicas,
    ...(c.clusterSettleMs === undefined ? {} : { settleMs: c.clusterSettleMs }),
    ...(c.quoteLoginsFile === undefined ? {} : { quoteLoginsFile: resolve(c.quoteLoginsFile) }),
  };
}

/** A zod error as one line, as every start-up error is: `path: message; ...`. */
/** Each issue as `path: message`, and `from(path)` after it (where the value came from: loadConfig). */
export function issuesLine(err: z.ZodError, from: (path: PropertyKey[]) => string = () => ''): string {
  return err.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}${from(i.path)}`).join('; ');
}

export function parseConfig(input: Record<string, unknown>): Config {
  const r = configSchema.safeParse(input);
  if (!r.success) throw new ConfigError(`invalid configuration: ${issuesLine(r.error)}`);
  return r.data;
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  let fromFile: Record<string, unknown> = {};
  if (env.TAGW_CONFIG) {
    try {
      fromFile = JSON.parse(readFileSync(env.TAGW_CONFIG, 'utf8')) as Record<string, unknown>;
    } catch (e) {
      throw new ConfigError(`TAGW_CONFIG ${env.TAGW_CONFIG}: ${(e as Error).message}`);
    }
    if (typeof fromFile !== 'object' || fromFile === null || Array.isArray(fromFile)) throw new ConfigError(`TAGW_CONFIG ${env.TAGW_CONFIG}: not a JSON object of settings`);
    // A misspelt key would otherwise be left out without a word, its setting at its default.
    const unknown = Object.keys(fromFile).filter((k) => !(k in configSchema.shape));
    if (unknown.length) throw new ConfigError(`TAGW_CONFIG ${env.TAGW_CONFIG}: unknown setting ${unknown.map((k) => `'${k}'`).join(', ')} (the camelCase keys of src/config.ts, e.g. port, dataDir)`);
  }
  const fromEnv: Record<string, unknown> = {};
  for (const [name, key] of Object.entries(CONFIG_ENV)) {
    const v = env[name];
    if (v !== undefined && v !== '') fromEnv[key] = v;
  }
  const r = configSchema.safeParse({ ...fromFile, ...fromEnv });
  if (r.success) return r.data;
  // Each bad value named as the operator wrote it: the variable (PORT), or the key in the file.
  const envName = Object.fromEntries(Object.entries(CONFIG_ENV).filter(([, k]) => k in fromEnv).map(([n, k]) => [k, n]));
  const from = (path: PropertyKey[]) => {
    const key = String(path[0] ?? '');
    return envName[key] ? ` (from ${envName[key]})` : key in fromFile ? ` (from TAGW_CONFIG ${env.TAGW_CONFIG})` : '';
  };
  throw new ConfigError(`invalid configuration: ${issuesLine(r.error, from)}`);
}
