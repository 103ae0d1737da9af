// The simulator store's tables (simJournal.ts writes them, simStore.ts reads them).
import type Database from 'better-sqlite3';
import { migrateDirtyMarks } from './simDirty.js';

/** DDL of the simulator tables; idempotent, callable from the gateway's migration runner.
 *
 *  Layout, chosen because a WAL commit costs roughly per distinct page it rewrites (about
 *  40 us each on a virtual disk) and a shard has many accounts trading at once:
 *  - sim_journal: one row per applied change (a trade, a triggered SL, a balance deposit),
 *    clustered by (server, time), so every account appends to the same right-most leaf;
 *    it is the source of truth for deals, finished orders and equity points.
 *  - sim_state: per account, a checkpoint document (account, open positions, active
 *    orders, last journal seq) and request ids ('R' rows), written every second or so, not
 *    per trade. Loading an account reads the checkpoint and replays the journal after it.
 *  - sim_dirty: per account with rows after its checkpoint, where they start (simDirty.ts). */
export function migrateSimStore(db: Database.Database): void {
  db.exec(`
    CREATE TABLE IF NOT EXISTS sim_counters (server TEXT PRIMARY KEY, next INTEGER NOT NULL) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS sim_state (
      server TEXT NOT NULL, login TEXT NOT NULL, kind TEXT NOT NULL, key TEXT NOT NULL, data TEXT NOT NULL,
      PRIMARY KEY (server, login, kind, key)) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS sim_journal (
      server TEXT NOT NULL, time_ms INTEGER NOT NULL, login TEXT NOT NULL, seq INTEGER NOT NULL, data TEXT NOT NULL,
      PRIMARY KEY (server, time_ms, login, seq)) WITHOUT ROWID;
  `);
  // An account's rows after its checkpoint are found from its mark in sim_dirty (an index of the
  // journal by account did it before, at one more b-tree leaf per trade).
  migrateDirtyMarks(db);
}
