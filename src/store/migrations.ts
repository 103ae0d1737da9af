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
];
