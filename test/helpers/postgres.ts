// A migrated cluster database for a test: a fresh database on a running PostgreSQL (engines.ts),
// its pool (idle-connection errors ignored: tests stop and kill the engine), the schema applied.
import { openPgPool, type PgPool } from '../../src/cluster/pgPool.js';
import { runPgMigrations } from '../../src/cluster/pgMigrations.js';
import { createDatabase, type Engine } from './engines.js';

export async function migratedDatabase(engine: Engine): Promise<{ url: string; pool: PgPool }> {
  const url = await createDatabase(engine.url);
  const pool = openPgPool(url, { onIdleError: () => {} });
  await runPgMigrations(pool, url);
  return { url, pool };
}
