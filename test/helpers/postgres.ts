// A migrated cluster database for a test: a fresh database on a running PostgreSQL (engines.ts),
// its pool (idle-connection errors ignored: tests stop and kill the engine), the schema applied.
import { afterAll, beforeAll } from 'vitest';
import { openPgPool, type PgPool } from '../../src/cluster/pgPool.js';
import { runPgMigrations } from '../../src/cluster/pgMigrations.js';
import { createDatabase, startPostgres, type Engine } from './engines.js';

export async function migratedDatabase(engine: Engine): Promise<{ url: string; pool: PgPool }> {
  const url = await createDatabase(engine.url);
  const pool = openPgPool(url, { onIdleError: () => {} });
  await runPgMigrations(pool, url);
  return { url, pool };
}

/** One PostgreSQL for the test file with a migrated database on it: started before the file's
 *  tests, stopped after them. Read `engine` and `pool` inside tests and hooks (set once started). */
export function postgresForFile(): { engine: Engine; pool: PgPool } {
  const pg = {} as { engine: Engine; pool: PgPool };
  beforeAll(async () => {
    pg.engine = await startPostgres();
    pg.pool = (await migratedDatabase(pg.engine)).pool;
  }, 60_000);
  afterAll(async () => {
    await pg.pool?.end();
    await pg.engine?.stop();
  });
  return pg;
}
