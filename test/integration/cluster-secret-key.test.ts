// Every cluster node must have the cluster's TAGW_SECRET_KEY (docs/cluster.md, "The secret key"):
// the first node records a fingerprint of its key in PostgreSQL (an HMAC under the key, never the
// key), and a node whose key gives another one (another TAGW_SECRET_KEY, or none: a key generated
// for it) refuses to start, exit 2, one line naming TAGW_SECRET_KEY and never a key. Before, such a
// node started and binds failed later (500 "stored broker credentials cannot be read").
// SECRET_KEY_RESET=1 makes a node's key the cluster's. A cluster from a build before the fingerprint
// (sealed passwords, no fingerprint) gets it from the first node whose key opens them. Real
// nats-server and PostgreSQL, gateway processes.
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { generateKey } from '../../src/auth/keys.js';
import { clusterKeyFingerprint } from '../../src/cluster/clusterKey.js';
import { runPgMigrations } from '../../src/cluster/pgMigrations.js';
import { openPgPool } from '../../src/cluster/pgPool.js';
import { PgTenancy } from '../../src/cluster/pgTenancy.js';
import { seedBoundAccount, startClusterEngines, type ClusterEngines } from '../helpers/cluster.js';
import { createDatabase } from '../helpers/engines.js';
import { cleanupProcesses, startProcess, type GatewayProcess } from '../helpers/process.js';

afterEach(cleanupProcesses);

const KEY = randomBytes(32);
const OTHER = randomBytes(32);
let engines: ClusterEngines;

beforeAll(async () => {
  engines = await startClusterEngines();
}, 60_000);
afterAll(async () => {
  await engines?.stop();
});

let n = 0;
function node(databaseUrl: string, env: Record<string, string>): GatewayProcess {
  return startProcess({
    NATS_URL: engines.nats.url, DATABASE_URL: databaseUrl, BROKER_MODE: 'bridge', BRIDGE_URL: engines.sim.url,
    NODE_ID: `key-${process.pid}-${++n}`, CLUSTER_SETTLE_MS: '0', LOG_LEVEL: 'info', ...env,
  });
}

/** The keys in every form an operator could give them. */
function keysIn(text: string): string[] {
  return [KEY, OTHER].flatMap((k) => [k.toString('hex'), k.toString('hex').toUpperCase(), k.toString('base64')]).filter((v) => text.includes(v));
}

async function recorded(databaseUrl: string): Promise<string[]> {
  const pool = openPgPool(databaseUrl);
  try {
    return (await pool.query<{ fingerprint: string }>('SELECT fingerprint FROM cluster_secret_key')).rows.map((r) => r.fingerprint);
  } finally {
    await pool.end();
  }
}

/** Refused: exit 2, one line naming TAGW_SECRET_KEY, no key in it, DATA_DIR left without a key file. */
async function expectRefused(p: GatewayProcess, message: RegExp): Promise<void> {
  expect(await p.exited, p.output()).toBe(2);
  const lines = p.output().trim().split('\n');
  expect(lines, p.output()).toHaveLength(1);
  expect(lines[0]).toMatch(/TAGW_SECRET_KEY/);
  expect(lines[0]).toMatch(message);
  expect(keysIn(p.output())).toEqual([]);
  expect(existsSync(join(p.dir, 'secret.key'))).toBe(false);
}

async function stop(p: GatewayProcess): Promise<void> {
  p.child.kill('SIGTERM');
  expect(await p.exited).toBe(0);
}

describe('cluster: every node has the cluster\'s secret key', () => {
  it('a second node with another TAGW_SECRET_KEY, or none, exits 2 naming TAGW_SECRET_KEY; the same key starts', async () => {
    const db = await createDatabase(engines.postgres.url);
    const first = node(db, { TAGW_SECRET_KEY: KEY.toString('hex') });
    await first.listening;
    expect(await recorded(db)).toEqual([clusterKeyFingerprint(KEY)]);

    await expectRefused(node(db, { TAGW_SECRET_KEY: OTHER.toString('hex'), LOG_LEVEL: 'error' }), /is not the cluster's secret key.*give every node the same TAGW_SECRET_KEY.*SECRET_KEY_RESET=1/);
    // No key at all: the one it would generate into its DATA_DIR is not the cluster's.
    await expectRefused(node(db, { LOG_LEVEL: 'error' }), /no TAGW_SECRET_KEY.*give every node the cluster's key in TAGW_SECRET_KEY/);
    // The same key given in base64: the same key, it starts.
    const second = node(db, { TAGW_SECRET_KEY: KEY.toString('base64') });
    await second.listening;
    await Promise.all([stop(first), stop(second)]);
    expect(keysIn(first.output() + second.output())).toEqual([]);
    expect(await recorded(db)).toEqual([clusterKeyFingerprint(KEY)]);
  }, 90_000);

  it('a first node without TAGW_SECRET_KEY: the key it generates is the cluster\'s, a second node without one is refused', async () => {
    const db = await createDatabase(engines.postgres.url);
    const first = node(db, {});
    await first.listening;
    await stop(first);
    expect(existsSync(join(first.dir, 'secret.key'))).toBe(true);
    await expectRefused(node(db, { LOG_LEVEL: 'error' }), /no TAGW_SECRET_KEY/);
    // The first node again, its key from its DATA_DIR: still the cluster's.
    const again = startProcess({ NATS_URL: engines.nats.url, DATABASE_URL: db, BROKER_MODE: 'bridge', BRIDGE_URL: engines.sim.url, NODE_ID: `key-${process.pid}-${++n}`, CLUSTER_SETTLE_MS: '0' }, first.dir);
    await again.listening;
    await stop(again);
  }, 90_000);

  it('SECRET_KEY_RESET=1 makes the node\'s key the cluster\'s: a node with the old key is then refused', async () => {
    const db = await createDatabase(engines.postgres.url);
    const first = node(db, { TAGW_SECRET_KEY: KEY.toString('hex') });
    await first.listening;
    await stop(first);
    const reset = node(db, { TAGW_SECRET_KEY: OTHER.toString('hex'), SECRET_KEY_RESET: '1' });
    await reset.listening;
    expect(reset.output()).toMatch(/SECRET_KEY_RESET=1: this node's secret key is now the cluster's/);
    expect(await recorded(db)).toEqual([clusterKeyFingerprint(OTHER)]);
    await expectRefused(node(db, { TAGW_SECRET_KEY: KEY.toString('hex'), LOG_LEVEL: 'error' }), /is not the cluster's secret key/);
    // Never a key generated for one node, even with the reset.
    await expectRefused(node(db, { SECRET_KEY_RESET: '1', LOG_LEVEL: 'error' }), /no TAGW_SECRET_KEY/);
    await stop(reset);
  }, 90_000);

  it('upgrade: passwords sealed in PostgreSQL, no fingerprint yet: a node whose key opens none is refused; the first whose key opens them records it', async () => {
    const db = await createDatabase(engines.postgres.url);
    const pool = openPgPool(db);
    try {
      await runPgMigrations(pool, db);
      await seedBoundAccount(new PgTenancy(pool), { apiKey: generateKey('api'), account: 'upgraded', login: `upgraded-${process.pid}`, secretKey: KEY });
    } finally {
      await pool.end();
    }
    expect(await recorded(db)).toEqual([]);
    await expectRefused(node(db, { TAGW_SECRET_KEY: OTHER.toString('hex'), LOG_LEVEL: 'error' }), /opens none of the 1 broker passwords stored in the cluster's PostgreSQL.*give every node the same TAGW_SECRET_KEY/i);
    expect(await recorded(db)).toEqual([]);
    const first = node(db, { TAGW_SECRET_KEY: KEY.toString('hex') });
    await first.listening;
    expect(await recorded(db)).toEqual([clusterKeyFingerprint(KEY)]);
    await stop(first);
  }, 90_000);
});
