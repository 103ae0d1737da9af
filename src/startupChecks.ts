// What the operator configured is checked at start, so a mistake is one clear line and a non-zero
// exit (ConfigError, exit 2) instead of a gateway that reports ready and then answers every bind
// with a 500.
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { createSecureContext } from 'node:tls';
import { resolve } from 'node:path';
import { ZodError } from 'zod';
import { ConfigError, issuesLine, type Config } from './config.js';
import { loadSecretKey, parseSecretKey, readKeyFile, SecretBox, SecretKeyError, secretKeyPath, writeSecretKey } from './crypto/secretBox.js';
import type { Logger } from './log.js';
import { clusterKeyFingerprint, recordedKeyFingerprint, recordKeyFingerprint } from './cluster/clusterKey.js';
import type { Queryable } from './cluster/pgPool.js';
import { DEFAULT_CONFIG_PATH, loadSimConfig } from './sim/config.js';
import { loadQuoteLogins, QuoteLoginsError } from './runtime/quoteLogins.js';
import { AccountStore } from './store/accounts.js';
import type { Db } from './store/db.js';
import { SimClockError, simClockOf } from './store/simClock.js';
import { closedAt } from './sim/simStart.js';

/** A zod error as one line: `path: message; ...`; any other error's message, first line. */
export function oneLine(err: unknown): string {
  if (err instanceof ZodError) return issuesLine(err);
  return (err instanceof Error ? err.message : String(err)).split('\n')[0]!;
}

/** The broker side: a bridge needs its address; the embedded simulator needs a valid servers file;
 *  market-data logins a valid file, in cluster mode. */
export function checkBrokerConfig(config: Config): void {
  if (config.quoteLoginsFile !== undefined) checkQuoteLogins(config, config.quoteLoginsFile);
  if (config.brokerMode === 'bridge') {
    // The bridge's simulator (or real broker) keeps its own hours: the setting would do nothing.
    if (config.simMarketHours !== undefined) throw new ConfigError('SIM_MARKET_HOURS is for the embedded simulator; with BROKER_MODE=bridge start the simulator with `npm run sim -- --market-hours always`');
    if (config.simStart !== undefined) throw new ConfigError('SIM_START is for the embedded simulator; with BROKER_MODE=bridge start the simulator with `npm run sim -- --start <ISO instant>`');
    if (!config.bridgeUrl) throw new ConfigError('BROKER_MODE=bridge needs BRIDGE_URL=tcp://host:port (or tls://host:port)');
    if (config.bridgeCaFile) {
      if (!config.bridgeUrl.startsWith('tls://')) throw new ConfigError('BRIDGE_CA_FILE needs BRIDGE_URL=tls://host:port');
      try {
        const ca = readFileSync(config.bridgeCaFile);
        createSecureContext({ ca });
      } catch (err) {
        throw new ConfigError(`BRIDGE_CA_FILE ${resolve(config.bridgeCaFile)}: ${oneLine(err)}`);
      }
    }
    return;
  }
  const path = config.simServersFile === undefined ? DEFAULT_CONFIG_PATH : resolve(config.simServersFile);
  try {
    loadSimConfig(path); // the file's validity: market hours change no part that could fail
  } catch (err) {
    throw new ConfigError(`SIM_SERVERS_FILE ${path}: ${oneLine(err)}`);
  }
}

/**
 * The embedded simulator's clock: its offset from the wall clock (0 without SIM_START), fixed in
 * DATA_DIR the first time it holds simulator state (src/store/simClock.ts). A SIM_START the directory
 * cannot take (another instant than its own, or state made on the wall clock) is exit 2; SIM_START
 * unset on a directory with a simulated clock keeps that clock, with a warning. Bridge mode: 0.
 * `startMs`: the instant it started at (replayed recordings play from it), absent on the wall clock.
 */
export function simClockOffset(db: Db, config: Config, nowMs: number, log: Logger): { offsetMs: number; startMs?: number } {
  if (config.brokerMode !== 'embedded') return { offsetMs: 0 };
  try {
    const c = simClockOf(db, config.simStart === undefined ? undefined : Date.parse(config.simStart), nowMs, `DATA_DIR ${config.dataDir}`);
    if (c.kept) log.warn('SIM_START unset: the simulated clock DATA_DIR keeps goes on (only an empty DATA_DIR runs on the wall clock)', { simStart: new Date(c.startMs!).toISOString(), simNow: new Date(nowMs + c.offsetMs).toISOString() });
    else if (c.startMs !== undefined) log.info('simulated clock', { simStart: new Date(c.startMs).toISOString(), simNow: new Date(nowMs + c.offsetMs).toISOString() });
    if (c.startMs !== undefined) warnClosed(config, nowMs + c.offsetMs, log);
    return c.startMs === undefined ? { offsetMs: c.offsetMs } : { offsetMs: c.offsetMs, startMs: c.startMs };
  } catch (err) {
    if (err instanceof SimClockError) throw new ConfigError(`SIM_START: ${err.message}`);
    throw err;
  }
}

/** A simulated clock that starts where symbols do not quote (SIM_START on a weekend: forex closed) is
 *  said at start: the operator sees why EURUSD is silent and answers MARKET_CLOSED. */
function warnClosed(config: Config, simNowMs: number, log: Logger): void {
  const path = config.simServersFile === undefined ? DEFAULT_CONFIG_PATH : resolve(config.simServersFile);
  const closed = closedAt(loadSimConfig(path, config.simMarketHours ? { marketHours: config.simMarketHours } : {}), simNowMs);
  if (closed.length) {
    log.warn('the simulated clock is where these symbols do not quote or trade (a SIM_START on a weekend opens into a closed forex market): they start at their next session, or use SIM_MARKET_HOURS=always', { simNow: new Date(simNowMs).toISOString(), closed });
  }
}

/** QUOTE_LOGINS_FILE: cluster mode only (one node takes its quotes from its own accounts or the
 *  owners'), and a file that parses. The message names the setting and the file, never a password. */
function checkQuoteLogins(config: Config, file: string): void {
  const path = resolve(file);
  if (config.natsUrl === undefined || config.databaseUrl === undefined) {
    throw new ConfigError(`QUOTE_LOGINS_FILE ${path}: market-data logins are for cluster mode (NATS_URL and DATABASE_URL): a single node takes its quotes from its own accounts`);
  }
  try {
    loadQuoteLogins(path);
  } catch (err) {
    throw new ConfigError(`QUOTE_LOGINS_FILE ${path}: ${err instanceof QuoteLoginsError ? err.message : 'cannot be read'}`);
  }
}

/**
 * The key that seals broker passwords. A configured key that differs from DATA_DIR/secret.key is
 * refused: the stored passwords were sealed with one of them, and silently taking the other makes
 * every account unreadable.
 */
export function secretKeyOf(config: Config): Buffer {
  try {
    // A key file is only created by a start that got past the checks (persistSecretKey): a refused
    // start must leave DATA_DIR as it found it.
    const key = loadSecretKey(config.secretKey, config.dataDir) ?? randomBytes(32);
    const file = secretKeyPath(config.dataDir);
    if (config.secretKey && existsSync(file) && !parseSecretKey(readKeyFile(file)).equals(key) && !config.secretKeyReset) {
      throw new ConfigError(`TAGW_SECRET_KEY is not the key in ${file}: use that key (or remove the file if the configured key is the right one)`);
    }
    return key;
  } catch (err) {
    // Name where the bad key came from: the variable, or the key file in DATA_DIR.
    if (err instanceof SecretKeyError) throw new ConfigError(`${config.secretKey ? 'TAGW_SECRET_KEY' : secretKeyPath(config.dataDir)}: ${err.message}`);
    throw err;
  }
}

/** Writes a key this start generated (no TAGW_SECRET_KEY, no key file yet) to DATA_DIR/secret.key. */
export function persistSecretKey(config: Config, key: Buffer): void {
  if (config.secretKey || existsSync(secretKeyPath(config.dataDir))) return;
  writeSecretKey(config.dataDir, key);
}

/**
 * The stored broker passwords must open with the key. None opening means the key changed: refused
 * unless SECRET_KEY_RESET=1 (then those accounts must be bound again with /ConnectEx, which
 * re-seals their password). The check stops at the first password that opens, so a start with the
 * right key reads one page of bindings, not every account; passwords that do not open are named
 * one by one, and counted, by the shards as they restore those accounts
 * (src/runtime/hosts/accounts.ts).
 */
export function checkSealedPasswords(db: Db, key: Buffer, config: Config, log: Logger, cluster = false): void {
  const store = AccountStore.of(db);
  const box = new SecretBox(key);
  let after = '';
  let unreadable = 0;
  for (;;) {
    const rows = store.livePage(after, 256);
    for (const r of rows) {
      try {
        box.open(r.password_enc, r.seat_id);
        if (unreadable > 0) log.error('broker passwords that this secret key cannot open: bind those accounts again with /ConnectEx', { unreadable });
        return;
      } catch {
        unreadable++;
      }
    }
    if (rows.length < 256) break;
    after = rows[rows.length - 1]!.seat_id;
  }
  if (unreadable === 0) return;
  if (!config.secretKeyReset) {
    throw new ConfigError(cluster
      ? `the secret key opens none of the ${unreadable} broker passwords stored in the cluster's PostgreSQL: ${keySource(config)} is not the cluster's key? ` +
        'Give every node the same TAGW_SECRET_KEY, the one they were sealed with (see docs/cluster.md), or set SECRET_KEY_RESET=1 to make this key the cluster\'s and bind those accounts again with /ConnectEx'
      : `the secret key opens none of the ${unreadable} broker passwords stored in ${config.dataDir} (TAGW_SECRET_KEY or secret.key changed?): ` +
        'restore the key they were sealed with, or set SECRET_KEY_RESET=1 to start anyway and bind those accounts again with /ConnectEx',
    );
  }
  log.error('broker passwords that this secret key cannot open: bind those accounts again with /ConnectEx', { unreadable });
}

/** Where the node's key comes from, for a message (never the key). */
function keySource(config: Config): string {
  if (config.secretKey) return 'TAGW_SECRET_KEY';
  const file = secretKeyPath(config.dataDir);
  return existsSync(file) ? `the key in ${resolve(file)} (no TAGW_SECRET_KEY set)` : 'a key generated for this node (no TAGW_SECRET_KEY set)';
}

/**
 * Cluster mode: every node must have the cluster's key (src/cluster/clusterKey.ts). A key whose
 * fingerprint is not the one recorded in PostgreSQL is refused (exit 2), SECRET_KEY_RESET=1 makes it
 * the cluster's key instead (never a key generated for this node: it would live in one node's
 * DATA_DIR only). No fingerprint yet (a new cluster, or one from a build before it): recorded by
 * the first node whose key opens the stored passwords (checkSealedPasswords on the mirror of the
 * cluster's bindings), or that finds none. A recorded fingerprint that matches is the whole check:
 * after a reset the other nodes start with the new key without one.
 */
export async function checkClusterKey(pool: Queryable, db: Db, key: Buffer, config: Config, log: Logger, nodeId: string): Promise<void> {
  const mine = clusterKeyFingerprint(key);
  const recorded = await recordedKeyFingerprint(pool);
  if (recorded === mine) return;
  const generated = !config.secretKey && !existsSync(secretKeyPath(config.dataDir));
  const refuse = () => new ConfigError(generated
    ? 'this cluster node has no TAGW_SECRET_KEY (nor a secret.key in its DATA_DIR), and a key generated for it is not the cluster\'s: ' +
      'give every node the cluster\'s key in TAGW_SECRET_KEY (the one the other nodes run with; a first node started without it generated it into its DATA_DIR/secret.key)'
    : `${keySource(config)} is not the cluster's secret key (its fingerprint differs from the one recorded in PostgreSQL): ` +
      'give every node the same TAGW_SECRET_KEY, the one the other nodes run with; or, to replace the cluster\'s key, start with SECRET_KEY_RESET=1 ' +
      '(accounts sealed with the old key must then be bound again with /ConnectEx, and every other node restarted with the new key)');
  if (recorded !== undefined && (generated || !config.secretKeyReset)) throw refuse();
  checkSealedPasswords(db, key, config, log, true);
  const now = await recordKeyFingerprint(pool, mine, nodeId, recorded !== undefined);
  if (now !== mine) throw refuse(); // another node recorded its own first
  if (recorded === undefined) log.info('cluster secret key fingerprint recorded: every node must run with this key');
  else log.error('SECRET_KEY_RESET=1: this node\'s secret key is now the cluster\'s; restart every other node with it (a node with the old key is refused at its next start)');
}
