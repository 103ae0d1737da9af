// What a shard is started with: plain data, cloned into the worker, typed on both sides. Every wait
// and backoff of the shard hosts is here, so a test (or an operator, through src/config.ts) sets
// them instead of waiting out hard-coded times.
import type { LogLevel } from '../log.js';
import type { MarketHours } from '../sim/config.js';

export interface ShardTiming {
  /** Broker reconnect backoff: the first delay and the cap (ms, full jitter in between). */
  reconnectBaseMs: number;
  reconnectCapMs: number;
  /** How long an operation waits for the account's broker connection before 503 NOT_CONNECTED (ms). */
  brokerWaitMs: number;
  /** How long a request waits instead while the account's first login is under way (it has just
   *  started: a restart, a takeover) before 503 SERVICE_UNAVAILABLE with retry-after (ms; default
   *  brokerWaitMs; cluster mode: the owner wait). A login that fails ends it (NOT_CONNECTED). */
  connectingWaitMs?: number;
  /** A bind or an account upgrade: how long it waits for the first connect before answering (ms). */
  bindWaitMs: number;
  /** CheckConnect: how long it waits for the reconnect it triggered (ms). */
  checkWaitMs: number;
  /** A gateway session resumed after a restart: how long it waits, once, for last-known account values (ms). */
  resumeWaitMs: number;
  /** The shard's own subscription upkeep at the broker (releasing what no socket or session wants
   *  any more, resubscribing a stream's symbols after a reconnect, reading the candles that closed
   *  during one): how long each waits for the account's connection before it gives up (ms). */
  subscriptionWaitMs: number;
  /** A background write that met a full DATA_DIR: how long it waits before it is tried again (ms;
   *  default FULL_DISK_RETRY_MS; the gateway passes STORAGE_CHECK_MS). */
  storageRetryMs?: number;
}

export interface ShardSettings {
  logLevel: LogLevel;
  /** Key of the secret box that seals broker passwords (hex); absent: stored passwords cannot be opened. */
  secretKeyHex?: string | undefined;
  brokerMode: 'embedded' | 'bridge';
  bridgeUrl?: string | undefined;
  /** CA file for a TLS bridge (absolute). */
  bridgeCaFile?: string | undefined;
  /** Servers file of the embedded simulator (absolute); absent: the shipped one. */
  simConfigPath?: string | undefined;
  /** The embedded simulator's market hours (SIM_MARKET_HOURS); absent: each symbol's own sessions. */
  simMarketHours?: MarketHours | undefined;
  timing: ShardTiming;
  /** Cluster mode: the market-data logins file (QUOTE_LOGINS_FILE, absolute; quoteSessions.ts). */
  quoteLoginsFile?: string | undefined;
  /** The shard's clock (its hosts and its embedded simulator) runs this far from the system clock
   *  (ms). 0 in production; a test sets it to put the simulator just before a bar boundary. */
  clockOffsetMs?: number | undefined;
  /** SIM_START: the embedded simulator's clock, and the market times the shard's hosts use with it
   *  (quote ages, default history ranges, sessions open now), run this far further (ms). Its own
   *  timing (idempotency records, waits, leases) stays on the clock above. */
  simClockOffsetMs?: number | undefined;
  /** SIM_START: the instant the simulated clock started at; replayed recordings play from it. */
  simStartMs?: number | undefined;
}

export const DEFAULT_SHARD_TIMING: ShardTiming = {
  reconnectBaseMs: 250,
  reconnectCapMs: 30_000,
  brokerWaitMs: 2_000,
  bindWaitMs: 3_000,
  checkWaitMs: 1_000,
  resumeWaitMs: 30_000,
  subscriptionWaitMs: 1_000,
};

/** Settings with the defaults of everything not given (tests, benchmarks, hosts started without a gateway). */
export function shardSettings(given: Partial<Omit<ShardSettings, 'timing'>> & { timing?: Partial<ShardTiming> } = {}): ShardSettings {
  return { logLevel: 'info', brokerMode: 'embedded', ...given, timing: { ...DEFAULT_SHARD_TIMING, ...given.timing } };
}
