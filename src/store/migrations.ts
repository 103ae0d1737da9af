// Versioned schema migrations. Each entry runs once, in order, inside a transaction; the applied
// version is SQLite's user_version. Never edit a released migration: append a new one.
export const MIGRATIONS: readonly string[] = [
  // 1: tenancy: customers, keys (management and API), seats, seat actor state
  `
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
  `,
  // 2: account bindings (a seat bound to a broker login; password sealed with AES-256-GCM) and the
  // per-account idempotency records of trade requests (SPEC §3, §8: kept 24 h).
  `
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
  `,
  // 3: idempotency records keyed by their primary key alone (WITHOUT ROWID): the 'sent' insert is
  // a commit on every idempotent order's critical path, and two b-trees instead of three cut it by
  // about a sixth. The expiry index stays: settled records live only here (not as actors in
  // memory), and a periodic sweep deletes the expired ones by it.
  `
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
  `,
  // 4: the management API (issue 17): when each key was last used (written in coalesced batches,
  // src/auth/keyUsage.ts), per-key rate-limit overrides (NULL: the configured default), which key
  // replaced a revoked one, and the audit log of management actions (never deleted, seats removed or not).
  `
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
  `,
];
