// `tagw migrate --check` in cluster mode (DATABASE_URL set): it reports the cluster database's
// schema version and pending migrations beside DATA_DIR's, against a real PostgreSQL, changes
// nothing, exits 5 on a schema newer than this build and 1 (no password in the line) when the
// database cannot be read. The CLI runs from this run's compiled build, as in cli.test.ts.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXIT } from '../../src/cli/errors.js';
import { PG_SCHEMA_VERSION, runPgMigrations } from '../../src/cluster/pgMigrations.js';
import { openPgPool } from '../../src/cluster/pgPool.js';
import { builtCli } from '../helpers/build.js';
import { createDatabase, freePort, type Engine } from '../helpers/engines.js';
import { sharedPostgres } from '../helpers/postgres.js';

const BUILT = builtCli();
const work = mkdtempSync(join(tmpdir(), 'tagw-cli-pg-'));
let engine: Engine;

beforeAll(async () => {
  engine = await sharedPostgres();
}, 60_000);
afterAll(async () => {
  await engine?.stop();
  rmSync(work, { recursive: true, force: true });
});

interface Run { code: number; stdout: string; stderr: string }
function tagw(args: string[], databaseUrl: string): Promise<Run> {
  const env: NodeJS.ProcessEnv = {
    ...process.env, DATA_DIR: work, DATABASE_URL: databaseUrl, NATS_URL: 'nats://127.0.0.1:4222', BROKER_MODE: 'bridge', BRIDGE_URL: 'tcp://127.0.0.1:4510',
  };
  for (const k of ['GATEWAY_MANAGEMENT_KEY', 'TAGW_CONFIG', 'TAGW_URL']) delete env[k];
  return new Promise((resolve) => {
    execFile(process.execPath, [...BUILT, ...args], { env, timeout: 30_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr });
    });
  });
}

describe('tagw migrate --check with DATABASE_URL', () => {
  it('reports the cluster schema: every migration pending on a new database, none once migrated, changing nothing', async () => {
    const url = await createDatabase(engine.url, 'climig');
    const fresh = await tagw(['--json', 'migrate', '--check'], url);
    expect(fresh.code, fresh.stderr).toBe(0);
    const plan = JSON.parse(fresh.stdout);
    expect(plan.cluster).toMatchObject({ current: 0, target: PG_SCHEMA_VERSION, tooNew: false });
    expect(plan.cluster.pending.map((m: { version: number }) => m.version)).toEqual(Array.from({ length: PG_SCHEMA_VERSION }, (_, i) => i + 1));
    expect(plan.cluster.database).not.toContain('@'); // no user or password
    const human = await tagw(['migrate', '--check'], url);
    expect(human.stdout).toMatch(/Cluster database \(DATABASE_URL\):\ndatabase:\s+postgres:\/\/127\.0\.0\.1:\d+\/climig/);
    expect(human.stdout).toMatch(new RegExp(`${PG_SCHEMA_VERSION} migration\\(s\\) would run`));

    // Checking changed nothing: the database has no schema yet; migrated, the check says up to date.
    const pool = openPgPool(url, { onIdleError: () => {} });
    try {
      expect((await pool.query("SELECT to_regclass('schema_migrations')::text AS t")).rows[0].t).toBeNull();
      await runPgMigrations(pool, url);
      const after = await tagw(['--json', 'migrate', '--check'], url);
      expect(JSON.parse(after.stdout).cluster).toMatchObject({ current: PG_SCHEMA_VERSION, pending: [], tooNew: false });

      // A newer build migrated it: exit 5, as the node would refuse to start.
      await pool.query('INSERT INTO schema_migrations (version, name) VALUES ($1, $2)', [PG_SCHEMA_VERSION + 1, 'from the future']);
      const newer = await tagw(['migrate', '--check'], url);
      expect(newer.code).toBe(EXIT.SCHEMA_TOO_NEW);
      expect(newer.stderr).toContain(`cluster schema version ${PG_SCHEMA_VERSION + 1} is newer than this build's ${PG_SCHEMA_VERSION}`);
    } finally {
      await pool.end();
    }
  }, 90_000);

  it('a cluster database that cannot be reached: exit 1, one line naming the server without the password', async () => {
    const port = await freePort();
    const r = await tagw(['migrate', '--check'], `postgres://tagw:hunter2secret@127.0.0.1:${port}/nowhere`);
    expect(r.code).toBe(EXIT.FAILED);
    expect(r.stderr).toContain(`cannot read the cluster database postgres://127.0.0.1:${port}/nowhere`);
    expect(r.stderr).not.toContain('hunter2secret');
  }, 60_000);
});
