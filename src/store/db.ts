import Database from 'better-sqlite3';
import { accessSync, closeSync, constants, mkdirSync, openSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { MIGRATIONS, runMigrations, SCHEMA_VERSION, schemaVersionOf } from './migrations.js';

export type Db = Database.Database;

/** WAL pages (4 KiB) after which a commit checkpoints inline: 64 MiB, the WAL's size limit. The
 *  background checkpointer copies frames back long before, and restarts the WAL when writes pause
 *  (checkpointWorker.ts); under sustained writes, with no pause, this inline pass is what restarts
 *  it, and the order whose commit runs it pays its three fsyncs and the new WAL header's. At 4,000
 *  pages that was one order in ~650 back to back (~6 pages each); now one in ~2,700. */
export const WAL_BACKSTOP_PAGES = 16_384;

/** After a restart the WAL file is cut back to this size (journal_size_limit). */
export const WAL_SIZE_LIMIT_BYTES = 64 * 1024 * 1024;

/**
 * WAL journal, synchronous=NORMAL (a commit survives a process crash), checkpoints left to a
 * background thread (checkpointer.ts) with the automatic one as a backstop for a WAL that grew
 * anyway (no checkpointer, or one that cannot keep up); after a reset the WAL file is cut back to
 * 64 MiB. The gateway's database and the standalone simulator's use the same settings.
 */
export function configureWal(db: Db): void {
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.pragma(`wal_autocheckpoint = ${WAL_BACKSTOP_PAGES}`);
  db.pragma(`journal_size_limit = ${WAL_SIZE_LIMIT_BYTES}`);
}

/**
 * Opens a SQLite file; a file SQLite cannot use (a directory, not a database, no permission) is
 * thrown as a system error naming the path (code SQLITE_..., syscall 'open'), which main reports as
 * one line with exit code 1 instead of a stack trace.
 */
export function openSqliteFile(file: string, options?: Database.Options, init?: (db: Db) => void): Db {
  let db: Db | undefined;
  try {
    db = new Database(file, options);
    init?.(db);
    return db;
  } catch (err) {
    db?.close();
    throw asSystemError(file, err);
  }
}

/** A SQLite error about `file` as a system error naming it (code SQLITE_... with SQLite's words,
 *  syscall 'open'), which main reports as one line with exit code 1; anything else as it is. */
export function asSystemError(file: string, err: unknown): unknown {
  const code = (err as { code?: unknown }).code;
  if (typeof code !== 'string' || !code.startsWith('SQLITE_')) return err;
  return Object.assign(new Error(`${file}: ${(err as Error).message}`), { code: `${code} (${(err as Error).message})`, syscall: 'open', path: file });
}

/**
 * Throws, as a system error naming the file (syscall 'write'), when one of `paths` that exists may
 * not be written by this process. SQLite opens such a database read-only without a word, and the
 * first write fails later (a shard's, which died and was restarted over and over): a file left
 * owned by root in a service user's DATA_DIR, say.
 */
export function assertWritable(paths: readonly string[]): void {
  for (const path of paths) {
    try {
      accessSync(path, constants.W_OK);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') continue;
      const owner = statSync(path).uid;
      throw Object.assign(new Error(`${path}: not writable`), { code: `${code} (owned by uid ${owner}, this process runs as uid ${process.getuid?.()})`, syscall: 'write', path });
    }
  }
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
export function openDb(dataDir: string, opts: { migrate?: boolean; onMigrated?: (m: Migrated) => void } = {}): Db {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const file = dbPath(dataDir);
  assertWritable([dataDir, file, `${file}-wal`, `${file}-shm`]);
  createPrivate(file);
  const db = openSqliteFile(file, undefined, configureWal);
  try {
    db.pragma('busy_timeout = 5000');
    db.pragma('foreign_keys = ON');
    if (opts.migrate !== false) {
      const from = schemaVersionOf(db);
      const applied = runMigrations(db, file);
      if (from > 0 && applied.length > 0) opts.onMigrated?.({ file, from, to: SCHEMA_VERSION, migrations: applied.map((v) => `${v} ${MIGRATIONS[v - 1]!.name}`) });
    }
  } catch (err) {
    db.close();
    throw err;
  }
  return db;
}

/**
 * Makes `file` empty and 0600 when it does not exist yet (SQLite takes an empty file as a new
 * database). SQLite would make it with the umask's mode, 0644 as a rule, and gives its -wal and
 * -shm files the database file's mode: in a DATA_DIR made beforehand with looser permissions than
 * the 0700 the gateway gives one it makes, key hashes, sealed broker passwords, logins and orders
 * were readable by every local user. An existing file keeps the mode its operator gave it.
 */
function createPrivate(file: string): void {
  try {
    closeSync(openSync(file, 'wx', 0o600)); // the umask can only narrow 0600
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
}

/** What a start's migration of an existing database did (an upgrade), for its log line ("database
 *  schema migrated"); a new database (version 0) is not reported. */
export interface Migrated { file: string; from: number; to: number; migrations: string[] }

/** Brings the schema up to date (src/store/migrations.ts); throws SchemaTooNewError on a newer one. */
export function migrate(db: Db): number {
  runMigrations(db);
  return SCHEMA_VERSION;
}

/**
 * Runs `f` in a transaction that takes the write lock at BEGIN (IMMEDIATE, waiting as busy_timeout
 * says). For a transaction that reads before it writes: a DEFERRED one would read from a snapshot,
 * and if another connection (a shard, the WAL checkpointer's restart write) commits before its first
 * write, SQLite answers that write SQLITE_BUSY at once, without the busy handler.
 */
export function writeTransaction<T>(db: Db, f: () => T): T {
  return db.transaction(f).immediate();
}
