import Database from 'better-sqlite3';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { MIGRATIONS } from './migrations.js';

export type Db = Database.Database;

/** Extra migration steps owned by other modules (e.g. the simulator's tables), run after ours. */
export type ExtraMigration = (db: Db) => void;
const extras: ExtraMigration[] = [];
export function registerMigration(step: ExtraMigration): void {
  extras.push(step);
}

export function dbPath(dataDir: string): string {
  return join(dataDir, 'tagw.sqlite');
}

/**
 * Opens the gateway database in WAL mode. Every thread (main and each shard) opens its own
 * connection; WAL lets readers run beside the one writer, and busy_timeout absorbs the brief
 * write-lock waits between threads. synchronous=NORMAL: a commit survives a process crash
 * (the WAL is in the OS), only an OS crash/power loss can drop the last commits.
 */
export function openDb(dataDir: string, opts: { migrate?: boolean } = {}): Db {
  mkdirSync(dataDir, { recursive: true });
  const db = new Database(dbPath(dataDir));
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.pragma('busy_timeout = 5000');
  db.pragma('foreign_keys = ON');
  if (opts.migrate !== false) migrate(db);
  return db;
}

export function migrate(db: Db): number {
  const current = db.pragma('user_version', { simple: true }) as number;
  for (let v = current; v < MIGRATIONS.length; v++) {
    db.transaction(() => {
      db.exec(MIGRATIONS[v]!);
      db.pragma(`user_version = ${v + 1}`);
    })();
  }
  for (const step of extras) step(db);
  return MIGRATIONS.length;
}
