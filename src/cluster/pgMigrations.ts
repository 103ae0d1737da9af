// The cluster's PostgreSQL schema, as numbered migrations recorded in `schema_migrations`. As on
// SQLite (src/store/migrations.ts): migration N runs once, in order, in one transaction with its
// row, so a crash mid-upgrade leaves the schema at N-1; never edit a released migration, append.
// Nodes starting together serialise on an advisory lock; a schema newer than this build refuses.
import { SchemaTooNewError, type Migration, type MigrationPlan } from '../store/migrations.js';
import { describePgUrl, openPgPool, withTransaction, type PgPool, type Queryable } from './pgPool.js';

export const PG_MIGRATIONS: readonly Migration[] = [
  // 1: ownership (nodes, leases with their fencing epoch), idempotency claims (fenced by epoch), and
  // tenancy mirroring the SQLite tables' columns (customers, keys, seats, seat state, bindings with
  // sealed passwords, audit log). Times the gateway writes are ms since the epoch (bigint), as on
  // SQLite; lease and heartbeat times are PostgreSQL's own clock (timestamptz), the one clock every
  // node agrees on.
  { name: 'cluster: nodes, account leases, idempotency, tenancy', sql: `
  CREATE TABLE cluster_nodes (
    node_id TEXT PRIMARY KEY,
    url TEXT NOT NULL DEFAULT '',
    started_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    heartbeat_at TIMESTAMPTZ NOT NULL
  );
  CREATE TABLE account_leases (
    account_id TEXT PRIMARY KEY,
    -- NULL: released (handed over); otherwise valid while expires_at > now()
    owner TEXT,
    -- +1 at every acquisition: a write carrying an older epoch is refused (fencing)
    epoch BIGINT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
  );
  CREATE INDEX account_leases_owner ON account_leases(owner);
  CREATE TABLE idempotency (
    account_id TEXT NOT NULL,
    client_order_id TEXT NOT NULL,
    params_hash TEXT NOT NULL,
    -- sent: claimed before the broker call; result: its answer stored; uncertain: the outcome is unknown
    state TEXT NOT NULL CHECK (state IN ('sent', 'result', 'uncertain')),
    status INTEGER,
    result_json TEXT,
    -- the lease epoch of the owner that last wrote the row
    epoch BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    PRIMARY KEY (account_id, client_order_id)
  );
  CREATE INDEX idempotency_expiry ON idempotency(expires_at);
  CREATE TABLE customers (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    created_at BIGINT NOT NULL
  );
  CREATE INDEX customers_name ON customers(name, created_at);
  CREATE TABLE keys (
    id TEXT PRIMARY KEY,
    customer_id TEXT NOT NULL REFERENCES customers(id),
    kind TEXT NOT NULL CHECK (kind IN ('management', 'api')),
    -- SHA-256 of the key's secret part; the secret itself is never stored
    hash TEXT NOT NULL,
    label TEXT NOT NULL DEFAULT '',
    read_only BOOLEAN NOT NULL DEFAULT false,
    account_scoped BOOLEAN NOT NULL DEFAULT false,
    seat_id TEXT,
    created_at BIGINT NOT NULL,
    revoked_at BIGINT,
    last_used_at BIGINT,
    requests_per_sec DOUBLE PRECISION,
    orders_per_sec DOUBLE PRECISION,
    replaced_by TEXT
  );
  CREATE INDEX keys_customer ON keys(customer_id);
  CREATE INDEX keys_seat ON keys(seat_id);
  CREATE TABLE seats (
    id TEXT PRIMARY KEY,
    customer_id TEXT NOT NULL REFERENCES customers(id),
    private_hosting BOOLEAN NOT NULL,
    region TEXT,
    created_at BIGINT NOT NULL,
    removed_at BIGINT
  );
  CREATE INDEX seats_customer ON seats(customer_id);
  CREATE TABLE seat_state (
    seat_id TEXT PRIMARY KEY REFERENCES seats(id),
    status TEXT NOT NULL,
    ready_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
  );
  CREATE TABLE account_bindings (
    seat_id TEXT PRIMARY KEY,
    customer_id TEXT NOT NULL,
    platform TEXT NOT NULL CHECK (platform IN ('P4', 'P5')),
    server TEXT NOT NULL,
    login TEXT NOT NULL,
    -- AES-256-GCM sealed (src/crypto/secretBox.ts); the key is each node's TAGW_SECRET_KEY
    password_enc TEXT NOT NULL,
    build INTEGER,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
  );
  CREATE INDEX account_bindings_login ON account_bindings(server, login, created_at);
  CREATE TABLE audit_log (
    id BIGSERIAL PRIMARY KEY,
    customer_id TEXT NOT NULL,
    at BIGINT NOT NULL,
    actor_key_id TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT,
    detail_json TEXT
  );
  CREATE INDEX audit_log_customer ON audit_log(customer_id, id);
  ` },
  // 2: each tenancy row stamped with the transaction that last wrote it, so every node's SQLite
  // mirror (tenancyMirror.ts) copies only what changed since its last pass. A stamp, not a counter:
  // transactions commit out of order, and the mirror re-reads from the oldest one still running.
  { name: 'tenancy: rows stamped with their writing transaction, for the nodes\' mirrors', sql: `
  CREATE FUNCTION tagw_stamp_txid() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    NEW.txid := pg_current_xact_id()::text::bigint;
    RETURN NEW;
  END $$;
  ${['customers', 'keys', 'seats', 'seat_state', 'account_bindings', 'audit_log'].map((t) => `
  ALTER TABLE ${t} ADD COLUMN txid BIGINT NOT NULL DEFAULT 0;
  CREATE TRIGGER ${t}_txid BEFORE INSERT OR UPDATE ON ${t} FOR EACH ROW EXECUTE FUNCTION tagw_stamp_txid();
  CREATE INDEX ${t}_txid ON ${t}(txid);`).join('')}
  ` },
  // 3: gateway sessions (the SQLite tables of store/sessions.ts, subscriptions as one JSON object),
  // written by the account's owner under its lease (sessionRecords.ts): any node resolves a handle,
  // and a new owner restores the account's live sessions.
  { name: 'gateway sessions, for every node and the next owner', sql: `
  CREATE TABLE gateway_sessions (
    handle_hash TEXT PRIMARY KEY,
    account_id TEXT NOT NULL,
    customer_id TEXT NOT NULL,
    platform TEXT NOT NULL,
    handle_sealed TEXT NOT NULL,
    state TEXT NOT NULL,
    connected_at BIGINT NOT NULL,
    invalidated_at BIGINT,
    subscriptions_json TEXT NOT NULL DEFAULT '{}'
  );
  CREATE INDEX gateway_sessions_live ON gateway_sessions(account_id) WHERE state = 'live';
  ` },
  // 4: a broker login held for an account while its owner's shard re-binds it (pgTenancy.ts
  // claimLogin): another account binding that login meanwhile, on any node, is refused before its
  // own shard is asked. Expires by PostgreSQL's clock, so a node that died mid-bind frees it.
  { name: 'broker logins held during a re-bind', sql: `
  CREATE TABLE login_claims (
    server TEXT NOT NULL,
    login TEXT NOT NULL,
    seat_id TEXT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (server, login)
  );
  ` },
  // 5: an audit row's reference, made on the node that audited the action (auditOutbox.ts): the node
  // keeps the row on its disk until PostgreSQL has it, and a write repeated after a crash between
  // PostgreSQL's commit and the node's own bookkeeping finds the reference and adds nothing.
  { name: 'audit rows carry the reference their node gave them', sql: `
  ALTER TABLE audit_log ADD COLUMN ref TEXT;
  CREATE UNIQUE INDEX audit_log_ref ON audit_log(ref) WHERE ref IS NOT NULL;
  ` },
  // 6: each start of a node is an incarnation, numbered by one sequence for the cluster (always
  // higher than any before, whatever the node's id): a node started again under its NODE_ID within
  // the lease is told apart from the process before it, whose sockets' streams the owners release
  // (router.ts supersede). Written with every heartbeat.
  { name: 'node incarnations', sql: `
  CREATE SEQUENCE cluster_incarnations;
  ALTER TABLE cluster_nodes ADD COLUMN incarnation BIGINT;
  ` },
  // 7: whether the node's NATS link was up at its last heartbeat (NULL: a node that does not say): a
  // node cut off from NATS while others reach it hands its accounts over, one cut off with all the
  // others (nats-server down) keeps them (leaseKeeper.ts, stepping down).
  { name: 'node heartbeats say whether NATS is up', sql: `
  ALTER TABLE cluster_nodes ADD COLUMN nats_up BOOLEAN;
  ` },
  // 8: the node's counters since its process started (lease changes, takeovers, calls between
  // nodes), as of its last heartbeat: any node's status shows every node's, not only its own
  // (NULL: a node that does not say). Plain data, read back through a schema (leases.ts).
  { name: 'node heartbeats carry the node\'s counters', sql: `
  ALTER TABLE cluster_nodes ADD COLUMN counters JSONB;
  ` },
  // 9: the fingerprint of the cluster's TAGW_SECRET_KEY (an HMAC under the key, never the key), one
  // row, written by the first node (clusterKey.ts): a node started with another key is refused.
  { name: 'the cluster\'s secret key fingerprint', sql: `
  CREATE TABLE cluster_secret_key (
    one BOOLEAN PRIMARY KEY DEFAULT true CHECK (one),
    fingerprint TEXT NOT NULL,
    node_id TEXT NOT NULL,
    set_at TIMESTAMPTZ NOT NULL DEFAULT now()
  );
  ` },
];

export const PG_SCHEMA_VERSION = PG_MIGRATIONS.length;

/** The cluster database was migrated by a newer build (main exits 5, as for SQLite). */
export class PgSchemaTooNewError extends SchemaTooNewError {
  constructor(where: string, found: number, known: number) {
    super(where, found, known);
    this.message = `${where}: cluster schema version ${found} is newer than this build's ${known} (a newer tagw migrated it): run that build on every node`;
  }
}

// Any fixed number: the key of the advisory lock that serialises nodes migrating at once.
const MIGRATION_LOCK = 0x7461_6777;

const CREATE_LEDGER = `CREATE TABLE IF NOT EXISTS schema_migrations (
  version INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
)`;

async function versionOf(q: Queryable): Promise<number> {
  const r = await q.query<{ v: number | null }>('SELECT max(version) AS v FROM schema_migrations');
  return r.rows[0]?.v ?? 0;
}

/** The schema version of the cluster database (0: none yet). */
export async function pgSchemaVersion(pool: PgPool): Promise<number> {
  const r = await pool.query<{ t: string | null }>("SELECT to_regclass('schema_migrations')::text AS t");
  return r.rows[0]?.t ? versionOf(pool) : 0;
}

/**
 * `tagw migrate --check` for the cluster database: its version and what a node's start would run,
 * read only (a short-lived pool of one connection). Rejects with one line naming the server, never
 * the password, when it cannot be read.
 */
export async function checkPgMigrations(url: string): Promise<MigrationPlan & { database: string }> {
  const database = describePgUrl(url);
  const pool = openPgPool(url, { max: 1, connectTimeoutMs: 5_000, queryTimeoutMs: 5_000, applicationName: 'tagw migrate --check', onIdleError: () => {} });
  try {
    const current = await pgSchemaVersion(pool);
    const pending = PG_MIGRATIONS.slice(current).map((m, i) => ({ version: current + i + 1, name: m.name }));
    return { database, current, target: PG_SCHEMA_VERSION, pending, tooNew: current > PG_SCHEMA_VERSION };
  } catch (err) {
    throw new Error(`cannot read the cluster database ${database}: ${err instanceof Error ? err.message : String(err)}`);
  } finally {
    await pool.end().catch(() => {});
  }
}

/**
 * Brings the cluster database to PG_SCHEMA_VERSION, one transaction per migration under the advisory
 * lock (a second node waits, then finds nothing left). A newer schema throws PgSchemaTooNewError and
 * changes nothing. Returns the versions it applied.
 */
export async function runPgMigrations(pool: PgPool, url: string): Promise<number[]> {
  const applied: number[] = [];
  for (;;) {
    const done = await withTransaction(pool, async (c) => {
      await c.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
      await c.query(CREATE_LEDGER);
      const v = await versionOf(c);
      if (v > PG_SCHEMA_VERSION) throw new PgSchemaTooNewError(describePgUrl(url), v, PG_SCHEMA_VERSION);
      if (v === PG_SCHEMA_VERSION) return true;
      const m = PG_MIGRATIONS[v]!;
      await c.query(m.sql);
      await c.query('INSERT INTO schema_migrations (version, name) VALUES ($1, $2)', [v + 1, m.name]);
      applied.push(v + 1);
      return false;
    });
    if (done) return applied;
  }
}
