// Versioned schema migrations. Migration N (1-based) runs once, in order, inside its own
// transaction together with `user_version = N`, so a crash mid-upgrade leaves the database at
// N-1, never half-way. Never edit a released migration: append a new one. The runner below
// also refuses a database newer than this list (an old build started on an upgraded DATA_DIR).
import Database from 'better-sqlite3';
import { existsSync } from 'node:fs';

export interface Migration {
  /** One line for `tagw migrate --check` and the upgrade log. */
  name: string;
  sql: string;
}

export const MIGRATIONS: readonly Migration[] = [
  // 1: tenancy: customers, keys (management and API), seats, seat actor state
  { name: 'tenancy: customers, keys, seats, seat state', sql: `
  CREATE TABLE customers (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    created_at INTEGER NOT NULL
  );
  CREATE TABLE keys (
    id TEXT PRIMARY KEY,
    customer_id TEXT NOT NULL REFERENCES customers(id),
    kind TEXT NOT NULL CHECK (kind IN ('management', 'api')),
    hash TEXT NOT NULL,
    label TEXT NOT NULL DEFAULT '',
    read_only INTEGER NOT NULL DEFAULT 0,
    account_scoped INTEGER NOT NULL DEFAULT 0,
    seat_id TEXT,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER
  );
  CREATE INDEX keys_customer ON keys(customer_id);
  CREATE TABLE seats (
    id TEXT PRIMARY KEY,
    customer_id TEXT NOT NULL REFERENCES customers(id),
    private_hosting INTEGER NOT NULL,
    region TEXT,
    created_at INTEGER NOT NULL,
    removed_at INTEGER
  );
  CREATE INDEX seats_customer ON seats(customer_id);
  -- Written only by the shard that owns the seat's actor.
  CREATE TABLE seat_state (
    seat_id TEXT PRIMARY KEY REFERENCES seats(id),
    status TEXT NOT NULL,
    ready_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
  );
  ` },
  // 2: account bindings (a seat bound to a broker login; password sealed with AES-256-GCM) and the
  // per-account idempotency records of trade requests (SPEC §3, §8: kept 24 h).
  { name: 'account bindings and idempotency records', sql: `
  CREATE TABLE account_bindings (
    seat_id TEXT PRIMARY KEY,
    customer_id TEXT NOT NULL,
    platform TEXT NOT NULL CHECK (platform IN ('P4', 'P5')),
    server TEXT NOT NULL,
    login TEXT NOT NULL,
    password_enc TEXT NOT NULL,
    -- Terminal build of the connection (NULL: the server's own build).
    build INTEGER,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
  );
  CREATE TABLE idempotency (
    account_id TEXT NOT NULL,
    client_order_id TEXT NOT NULL,
    params_hash TEXT NOT NULL,
    -- sent: durable before the broker call; result: final answer stored; uncertain: the send's outcome is unknown.
    phase TEXT NOT NULL CHECK (phase IN ('sent', 'result', 'uncertain')),
    status INTEGER,
    result_json TEXT,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (account_id, client_order_id)
  );
  CREATE INDEX idempotency_expiry ON idempotency(expires_at);
  ` },
  // 3: idempotency records keyed by their primary key alone (WITHOUT ROWID): the 'sent' insert is
  // a commit on every idempotent order's critical path, and two b-trees instead of three cut it by
  // about a sixth. The expiry index stays: settled records live only here (not as actors in
  // memory), and a periodic sweep deletes the expired ones by it.
  { name: 'idempotency records WITHOUT ROWID', sql: `
  CREATE TABLE idempotency_v3 (
    account_id TEXT NOT NULL,
    client_order_id TEXT NOT NULL,
    params_hash TEXT NOT NULL,
    phase TEXT NOT NULL CHECK (phase IN ('sent', 'result', 'uncertain')),
    status INTEGER,
    result_json TEXT,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (account_id, client_order_id)
  ) WITHOUT ROWID;
  INSERT INTO idempotency_v3 SELECT account_id, client_order_id, params_hash, phase, status, result_json, created_at, expires_at FROM idempotency;
  DROP TABLE idempotency;
  ALTER TABLE idempotency_v3 RENAME TO idempotency;
  CREATE INDEX idempotency_expiry ON idempotency(expires_at);
  ` },
  // 4: the management API (issue 17): when each key was last used (written in coalesced batches,
  // src/auth/keyUsage.ts), per-key rate-limit overrides (NULL: the configured default), which key
  // replaced a revoked one, and the audit log of management actions (never deleted, seats removed or not).
  { name: 'management API: key last use, rate-limit overrides, replacement, audit log', sql: `
  ALTER TABLE keys ADD COLUMN last_used_at INTEGER;
  ALTER TABLE keys ADD COLUMN requests_per_sec REAL;
  ALTER TABLE keys ADD COLUMN orders_per_sec REAL;
  ALTER TABLE keys ADD COLUMN replaced_by TEXT;
  CREATE INDEX keys_seat ON keys(seat_id);
  CREATE TABLE audit_log (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    customer_id TEXT NOT NULL,
    at INTEGER NOT NULL,
    -- the management key that acted ('env': the one configured as GATEWAY_MANAGEMENT_KEY)
    actor_key_id TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT,
    detail_json TEXT
  );
  CREATE INDEX audit_log_customer ON audit_log(customer_id, id);
  ` },
  // 5: gateway session handles and their subscriptions (src/store/sessions.ts). Before they were
  // numbered these tables were created by idempotent DDL at every start, so a database at
  // version 4 or below may have them already: IF NOT EXISTS.
  { name: 'gateway sessions and subscriptions', sql: `
  CREATE TABLE IF NOT EXISTS gateway_sessions (
    handle_hash TEXT PRIMARY KEY,
    account_id TEXT NOT NULL,
    customer_id TEXT NOT NULL,
    platform TEXT NOT NULL CHECK (platform IN ('P4', 'P5')),
    handle_sealed TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('live', 'invalidated')),
    connected_at INTEGER NOT NULL,
    invalidated_at INTEGER
  );
  CREATE INDEX IF NOT EXISTS gateway_sessions_live ON gateway_sessions(account_id) WHERE state = 'live';
  CREATE TABLE IF NOT EXISTS gateway_subscriptions (
    handle_hash TEXT NOT NULL,
    sub_key TEXT NOT NULL,
    spec_json TEXT NOT NULL,
    PRIMARY KEY (handle_hash, sub_key)
  );
  ` },
  // 6: lookups that must not grow with the number of accounts (issue 19; test/query-plans.test.ts):
  // /ConnectEx finds the seat a broker login is bound to, start-up finds the operator's customer by name.
  { name: 'indexes: bindings by server and login, customers by name', sql: `
  CREATE INDEX account_bindings_login ON account_bindings(server, login, created_at);
  CREATE INDEX customers_name ON customers(name, created_at);
  ` },
  // 7: /v1/stream resume (src/store/streamHistory.ts): per account its epoch and last seq, and the
  // recent account events as the frames sent (docs/stream.md "History").
  { name: 'stream history: account epochs and recent account events', sql: `
  CREATE TABLE stream_epochs (
    account_id TEXT PRIMARY KEY,
    epoch TEXT NOT NULL,
    seq INTEGER NOT NULL,
    alive_at INTEGER NOT NULL
  ) WITHOUT ROWID;
  CREATE TABLE stream_history (
    account_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    at INTEGER NOT NULL,
    frame TEXT NOT NULL,
    PRIMARY KEY (account_id, seq)
  ) WITHOUT ROWID;
  ` },
  // 8: per account stream, the last deal it carried (ticket, broker time; ticket 0 with the epoch's
  // start): after a restart, deals at the broker after it and not in the history go into the stream.
  { name: 'stream history: last deal of each account stream', sql: `
  ALTER TABLE stream_epochs ADD COLUMN deal_ticket INTEGER NOT NULL DEFAULT 0;
  ALTER TABLE stream_epochs ADD COLUMN deal_at INTEGER NOT NULL DEFAULT 0;
  ` },
  // 9: the seats still building, the only ones a restart starts an actor for: found without reading
  // every seat (issue 19, a start that does nothing per idle account).
  { name: 'seats still building', sql: `
  CREATE INDEX seat_state_building ON seat_state(seat_id) WHERE status <> 'ACTIVE';
  ` },
  // 10: no table changes. The embedded simulator's checkpoints are version 2 (src/store/simCheckpoint.ts):
  // open positions and active orders in sim_state rows of their own. A build before this one reads
  // only the account row and would start its accounts without their positions: the version bump
  // makes it refuse the DATA_DIR (exit 5) instead.
  { name: 'simulator checkpoints v2 (positions and orders in rows of their own)', sql: `SELECT 1;` },
  // 11: idempotency records in the order they are written (a rowid table), found by a unique index
  // on (account, id). Keyed by (account, id) (migration 3), a record of ~700 bytes (its stored
  // answer) went into the middle of a b-tree with five rows a leaf: an order rewrote its account's
  // leaf, its neighbours when it split and their parents, ~3.6 of the ~5.3 WAL pages a commit
  // writes per order (issue 19). Appended, the records of one commit share the right-most leaves;
  // only the small index entry lands in its account's place. A claim's check reads the index alone.
  { name: 'idempotency records appended, found by a unique index', sql: `
  CREATE TABLE idempotency_v11 (
    id INTEGER PRIMARY KEY,
    account_id TEXT NOT NULL,
    client_order_id TEXT NOT NULL,
    params_hash TEXT NOT NULL,
    phase TEXT NOT NULL CHECK (phase IN ('sent', 'result', 'uncertain')),
    status INTEGER,
    result_json TEXT,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
  );
  INSERT INTO idempotency_v11 (account_id, client_order_id, params_hash, phase, status, result_json, created_at, expires_at)
    SELECT account_id, client_order_id, params_hash, phase, status, result_json, created_at, expires_at FROM idempotency ORDER BY created_at;
  DROP TABLE idempotency;
  ALTER TABLE idempotency_v11 RENAME TO idempotency;
  CREATE UNIQUE INDEX idempotency_key ON idempotency(account_id, client_order_id);
  CREATE INDEX idempotency_expiry ON idempotency(expires_at);
  ` },
  // 12: no table changes here. The embedded simulator finds an account's journal rows after its
  // checkpoint from a mark in sim_dirty instead of an index of the journal by account (one b-tree
  // leaf less in every trade's commit; src/store/simDirty.ts, which moves a database across when a
  // shard opens it). A build before this one writes rows without marks, which a restart of this
  // one would not replay: the version bump makes it refuse the DATA_DIR (exit 5) instead.
  { name: 'simulator journal rows after a checkpoint marked in sim_dirty (no journal index by account)', sql: `SELECT 1;` },
  // 13: cluster mode's audit rows on their way to PostgreSQL (src/store/auditQueue.ts): on disk from
  // the moment the action is answered until PostgreSQL has them, so a node killed meanwhile writes
  // them at its next start. `ref` is the row's id in PostgreSQL too (a write repeated after a crash
  // lands once). Unused on one node.
  { name: 'cluster audit rows waiting for PostgreSQL', sql: `
  CREATE TABLE cluster_audit_queue (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    ref TEXT NOT NULL UNIQUE,
    row_json TEXT NOT NULL
  );
  ` },
  // 14: an audit row written with the change it records (an upgrade's, in the shard's transaction)
  // carries a reference made with the request, as PostgreSQL's does: the same call run again (the
  // shard restarted before it answered, and the call is re-sent) writes no second row (AuditStore.add).
  // NULL for rows without one (SQLite's unique index lets NULLs repeat).
  { name: 'audit rows with a unique reference', sql: `
  ALTER TABLE audit_log ADD COLUMN ref TEXT;
  CREATE UNIQUE INDEX audit_log_ref ON audit_log(ref);
  ` },
  // 15: the idempotency records' keys off the order's commit (issue 19 item 5; src/store/idempotencyKeys.ts).
  // The unique index (account, id) of migration 11 put every order's entry in its account's leaf: a
  // group commit of 32 orders rewrote ~27 of them. The keys now go into idempotency_keys in bulk
  // (every second, or every few thousand records), from the records above `through`; the shard
  // finds the ones not moved yet from its memory (and, after a restart, from their ids), and
  // checks a key's uniqueness before every claim. Every record here is moved at once.
  { name: 'idempotency keys moved in bulk, off the order\'s commit', sql: `
  CREATE TABLE idempotency_keys (
    account_id TEXT NOT NULL,
    client_order_id TEXT NOT NULL,
    record INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (account_id, client_order_id)
  ) WITHOUT ROWID;
  -- One row: every record whose id is at or below it has its key in idempotency_keys.
  CREATE TABLE idempotency_moved (
    only INTEGER PRIMARY KEY CHECK (only = 0),
    through INTEGER NOT NULL
  );
  INSERT INTO idempotency_keys (account_id, client_order_id, record, expires_at)
    SELECT account_id, client_order_id, id, expires_at FROM idempotency ORDER BY account_id, client_order_id;
  INSERT INTO idempotency_moved (only, through) SELECT 0, coalesce(max(id), 0) FROM idempotency;
  DROP INDEX idempotency_key;
  ` },
];

/** The schema version this code writes and understands: the number of migrations. */
export const SCHEMA_VERSION = MIGRATIONS.length;

/** A database written by a newer build: this code would misread it (main exits 5). */
export class SchemaTooNewError extends Error {
  constructor(readonly file: string, readonly found: number, readonly known: number, backup = false) {
    super(backup
      // A backup to restore, not a DATA_DIR: "a newer tagw ran on this DATA_DIR ... restore a backup" misled here.
      ? `${file}: this backup's schema version ${found} is newer than this build's ${known} (taken by a newer tagw): restore it with that build, or choose a backup taken by this one; DATA_DIR is unchanged`
      : `${file}: database schema version ${found} is newer than this build's ${known} (a newer tagw ran on this DATA_DIR): run that build, or restore a backup taken before the upgrade`);
  }
}

export interface MigrationPlan {
  /** user_version of the database (0: empty or new). */
  current: number;
  /** The version this build migrates to (SCHEMA_VERSION). */
  target: number;
  /** What would run, in order (empty when up to date or too new). */
  pending: { version: number; name: string }[];
  /** The database is newer than this build: it refuses to start on it. */
  tooNew: boolean;
}

type Sqlite = Database.Database;

export function schemaVersionOf(db: Sqlite): number {
  return db.pragma('user_version', { simple: true }) as number;
}

/** What `migrate` would do to this database; changes nothing. */
export function migrationPlan(db: Sqlite): MigrationPlan {
  const current = schemaVersionOf(db);
  const pending = MIGRATIONS.slice(current).map((m, i) => ({ version: current + i + 1, name: m.name }));
  return { current, target: SCHEMA_VERSION, pending, tooNew: current > SCHEMA_VERSION };
}

/**
 * `tagw migrate --check`: the plan for a database file (DATA_DIR/tagw.sqlite), opened read-only,
 * so it is safe beside a running gateway. A missing file is a new database: every migration would run.
 */
export function checkMigrations(file: string): MigrationPlan {
  if (!existsSync(file)) return migrationPlan(new Database(':memory:'));
  const db = new Database(file, { readonly: true, fileMustExist: true });
  try {
    return migrationPlan(db);
  } finally {
    db.close();
  }
}

/**
 * Brings the database to SCHEMA_VERSION: each pending migration in its own transaction with its
 * user_version bump. BEGIN IMMEDIATE: two threads opening the same database at once (main and a
 * shard) serialise here, and the second one re-reads the version inside the transaction and finds
 * nothing left to do. A database newer than this build throws SchemaTooNewError, untouched.
 * Returns the versions it applied.
 */
export function runMigrations(db: Sqlite, file = db.name): number[] {
  const applied: number[] = [];
  for (;;) {
    const done = db.transaction(() => {
      const v = schemaVersionOf(db);
      if (v > SCHEMA_VERSION) throw new SchemaTooNewError(file, v, SCHEMA_VERSION);
      if (v === SCHEMA_VERSION) return true;
      db.exec(MIGRATIONS[v]!.sql);
      db.pragma(`user_version = ${v + 1}`);
      applied.push(v + 1);
      return false;
    }).immediate();
    if (done) return applied;
  }
}
