// The PostgreSQL connection pool of a cluster node (node-postgres). Every cluster table is reached
// through one Pool: short statements borrow a client per query; transactions hold one client from
// BEGIN to COMMIT (withTransaction). Waits are bounded so an engine that is down or frozen turns
// into a failed call the caller maps to 503, never a request that hangs.
import pg from 'pg';

export type PgPool = pg.Pool;
/** What a statement runs on: the pool, or the client of an open transaction. */
export type Queryable = Pick<pg.Pool | pg.PoolClient, 'query'>;

export interface PgPoolOptions {
  /** Shown in pg_stat_activity: which node holds a connection. */
  applicationName?: string;
  max?: number;
  /** A connection PostgreSQL does not accept within this fails (a down engine answers fast anyway). */
  connectTimeoutMs?: number;
  /** A statement unanswered this long fails (a frozen engine would otherwise hold the caller forever). */
  queryTimeoutMs?: number;
  /** Errors of idle connections (the server restarted, a network cut): reported, not thrown. Without a
   *  listener node-postgres would end the process on them. */
  onIdleError?: (err: Error) => void;
}

const INT8 = 20;
// bigint columns (epochs, ms times) as numbers: they stay far below 2^53, and strings would leak
// into every comparison.
const types: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === INT8 && format !== 'binary' ? (v: string) => Number(v) : pg.types.getTypeParser(oid, format)) as pg.CustomTypesConfig['getTypeParser'],
};

export function openPgPool(url: string, opts: PgPoolOptions = {}): PgPool {
  const pool = new pg.Pool({
    connectionString: url,
    max: opts.max ?? 10,
    connectionTimeoutMillis: opts.connectTimeoutMs ?? 2_000,
    query_timeout: opts.queryTimeoutMs ?? 5_000,
    application_name: opts.applicationName ?? 'tagw',
    types,
  });
  pool.on('error', (err) => opts.onIdleError?.(err));
  return pool;
}

/** `f` inside BEGIN ... COMMIT on one client; ROLLBACK and rethrow on any error. A client whose
 *  rollback failed (its connection is broken) is destroyed, not returned to the pool. */
export async function withTransaction<T>(pool: PgPool, f: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  // A connection lost while the client is out of the pool (PostgreSQL went away mid-transaction) is
  // also an 'error' event on it, which without a listener would end the process; the failed query
  // carries the same error to the caller, so the event itself needs nothing more.
  const lost = () => {};
  client.on('error', lost);
  let broken: Error | undefined;
  try {
    await client.query('BEGIN');
    const out = await f(client);
    await client.query('COMMIT');
    return out;
  } catch (err) {
    await client.query('ROLLBACK').catch((e: unknown) => {
      broken = e instanceof Error ? e : new Error(String(e));
    });
    throw err;
  } finally {
    client.removeListener('error', lost);
    client.release(broken);
  }
}

/** A connection string as it may be shown or logged: host, port and database, no user or password. */
export function describePgUrl(url: string): string {
  try {
    const u = new URL(url);
    return `postgres://${u.host}${u.pathname}`;
  } catch {
    return 'postgres://(unparsable url)';
  }
}
