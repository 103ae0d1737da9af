// Backup and restore of DATA_DIR's database (`tagw backup FILE`, `tagw restore FILE`).
//
// Backup uses SQLite's online backup API from a read-only connection of its own, so it runs in
// another process beside a gateway that keeps serving. The whole copy is one backup step: that
// step holds one WAL read transaction, so the copy is the database as of one commit, and the
// gateway's writers are not blocked meanwhile (WAL readers never block the writer). Copying in
// many small steps instead would restart from the first page after every commit of the gateway
// and, under a steady flow of orders, might never finish.
//
// The broker passwords in the copy are sealed with the secret key, which is not in the copy: the
// backup records where the key lives and a fingerprint of it (SHA-256, never the key), and
// restore says whether the key it finds there is the same one.
import Database from 'better-sqlite3';
import { createHash } from 'node:crypto';
import { accessSync, chmodSync, chownSync, constants, existsSync, renameSync, rmSync, statfsSync, statSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { loadSecretKey, secretKeyPath } from '../crypto/secretBox.js';
import { lockDataDir } from './dataDirLock.js';
import { dbPath } from './db.js';
import { migrationPlan, SCHEMA_VERSION, SchemaTooNewError, schemaVersionOf } from './migrations.js';

export type BackupErrorCode = 'NO_DATABASE' | 'BACKUP_EXISTS' | 'NOT_A_BACKUP' | 'INTEGRITY_FAILED' | 'NO_SPACE' | 'NO_ACCESS';

/** An operator's mistake or a damaged file: one line, the CLI's exit code by `code`. */
export class BackupError extends Error {
  constructor(readonly code: BackupErrorCode, message: string) {
    super(message);
  }
}

/** Where the key sealing the broker passwords is read from, and its fingerprint (null: no key yet). */
export interface SecretKeyRef {
  location: string;
  fingerprint: string | null;
}

export interface BackupReport {
  file: string;
  bytes: number;
  schemaVersion: number;
  takenAt: string;
  secretKey: SecretKeyRef;
}

export interface RestoreReport {
  file: string;
  dataDir: string;
  schemaVersion: number;
  /** Migrations the next start will run on the restored database (a backup from an older build). */
  pendingMigrations: { version: number; name: string }[];
  /** When the backup was taken (null: a database file not made by `tagw backup`). */
  takenAt: string | null;
  /** The key the backup's passwords were sealed with, whether the key found now is that one
   *  (null: unknown, no fingerprint recorded or no key found), and the key found now (`found`). */
  secretKey: SecretKeyRef & { matches: boolean | null; found: SecretKeyRef };
  /** Where the database it replaced was moved (null: there was none). */
  previous: string | null;
}

/** The settings backup and restore need: the same ones the gateway reads. */
export interface DataDirSettings {
  dataDir: string;
  /** TAGW_SECRET_KEY, when the key is configured rather than in DATA_DIR/secret.key. */
  secretKey?: string | undefined;
}

const META_TABLE = 'tagw_backup';

/**
 * Whether `path` is there (and, with `mode`, usable so). A path this user may not reach or use is
 * said to be so: `existsSync` answers false for it, and the operator of a 0700 DATA_DIR was told
 * there was no database (or no backup file) instead of who may read it.
 */
function present(path: string, mode: number = constants.F_OK, hint = "run it as the gateway's user or as root"): boolean {
  try {
    accessSync(path, mode);
    return true;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return false;
    if (code === 'EACCES' || code === 'EPERM') {
      throw new BackupError('NO_ACCESS', `${path}: permission denied to this user (uid ${process.getuid?.() ?? '?'}): ${hint}`);
    }
    throw err;
  }
}

/** Whether DATA_DIR's database is there, throwing BackupError NO_ACCESS when this user may not
 *  reach it (`tagw migrate --check` as another user read a fresh, empty schema off a 0700 DATA_DIR). */
export function databasePresent(file: string): boolean {
  return present(file);
}

/** SHA-256 of the key, domain-separated, first 16 bytes: names the key without revealing it. */
export function secretKeyFingerprint(key: Buffer): string {
  return createHash('sha256').update('tagw secret key fingerprint\0').update(key).digest('hex').slice(0, 32);
}

function secretKeyRef(s: DataDirSettings): SecretKeyRef {
  const location = s.secretKey ? 'TAGW_SECRET_KEY (environment or TAGW_CONFIG secretKey)' : resolve(secretKeyPath(s.dataDir));
  const key = loadSecretKey(s.secretKey, s.dataDir);
  return { location, fingerprint: key ? secretKeyFingerprint(key) : null };
}

/**
 * Writes a consistent copy of DATA_DIR's database to `file` (refused if it exists) while a
 * gateway may be serving. The copy is one self-contained file (rollback journal, not WAL) with a
 * small `tagw_backup` table: when, the schema version, where the secret key lives and its fingerprint.
 */
export async function backupDatabase(s: DataDirSettings, file: string, now: () => number = Date.now): Promise<BackupReport> {
  const source = dbPath(s.dataDir);
  if (!present(resolve(source), constants.R_OK)) throw new BackupError('NO_DATABASE', `${resolve(source)}: no database to back up (is DATA_DIR right?)`);
  const target = resolve(file);
  if (present(target, constants.F_OK, 'choose a directory it may write')) throw new BackupError('BACKUP_EXISTS', `${target} exists: choose a new file name (a backup never overwrites)`);
  if (!present(dirname(target), constants.F_OK, 'choose a directory it may write')) throw new BackupError('NO_DATABASE', `${dirname(target)}: no such directory`);
  present(dirname(target), constants.W_OK, 'choose a directory it may write');
  const secretKey = secretKeyRef(s);
  ensureRoom(dirname(target), statSync(source).size + sizeOf(`${source}-wal`));
  const partial = `${target}.partial`;
  rmSync(partial, { force: true });
  // Made 0600 before a byte is written (SQLite keeps an existing file's mode): the copy holds key
  // hashes, sealed broker passwords and orders, whatever the umask of the shell running it.
  writeFileSync(partial, '', { mode: 0o600, flag: 'wx' });
  const db = new Database(source, { readonly: true, fileMustExist: true });
  try {
    db.pragma('busy_timeout = 5000');
    // The first transfer (0 pages) only starts the backup; the second copies every page at once.
    await db.backup(partial, { progress: () => 0x7fffffff });
  } catch (err) {
    rmSync(partial, { force: true });
    throw err;
  } finally {
    db.close();
  }
  const copy = new Database(partial);
  let schemaVersion: number;
  const takenAt = new Date(now()).toISOString();
  try {
    copy.pragma('journal_mode = DELETE');
    schemaVersion = schemaVersionOf(copy);
    copy.exec(`CREATE TABLE ${META_TABLE} (key TEXT PRIMARY KEY, value TEXT)`);
    const put = copy.prepare(`INSERT INTO ${META_TABLE} VALUES (?, ?)`);
    copy.transaction(() => {
      put.run('taken_at', takenAt);
      put.run('schema_version', String(schemaVersion));
      put.run('source', resolve(source));
      put.run('secret_key_location', secretKey.location);
      put.run('secret_key_fingerprint', secretKey.fingerprint);
    })();
  } finally {
    copy.close();
  }
  renameSync(partial, target);
  return { file: target, bytes: statSync(target).size, schemaVersion, takenAt, secretKey };
}

interface Inspected {
  schemaVersion: number;
  meta: Map<string, string | null>;
}

/** Opens a backup read-only and checks it: a SQLite file, intact, a tagw schema this build can run. */
export function inspectBackup(file: string): Inspected {
  const path = resolve(file);
  if (!present(path, constants.R_OK)) throw new BackupError('NOT_A_BACKUP', `${path}: no such file`);
  let db: Database.Database;
  try {
    db = new Database(path, { readonly: true, fileMustExist: true });
  } catch (err) {
    throw new BackupError('NOT_A_BACKUP', `${path}: not a database (${(err as Error).message})`);
  }
  try {
    let problems: string[];
    try {
      problems = (db.pragma('integrity_check') as { integrity_check: string }[]).map((r) => r.integrity_check);
    } catch (err) {
      const corrupt = /^SQLITE_CORRUPT/.test((err as { code?: string }).code ?? '');
      throw new BackupError(corrupt ? 'INTEGRITY_FAILED' : 'NOT_A_BACKUP', `${path}: ${corrupt ? 'integrity check failed' : 'not a database'} (${(err as Error).message})`);
    }
    if (problems.join() !== 'ok') throw new BackupError('INTEGRITY_FAILED', `${path}: integrity check failed: ${problems.slice(0, 3).join('; ')}`);
    const schemaVersion = schemaVersionOf(db);
    const hasKeys = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'keys'").get();
    if (schemaVersion < 1 || !hasKeys) throw new BackupError('NOT_A_BACKUP', `${path}: not a tagw database (no schema version or tables)`);
    if (schemaVersion > SCHEMA_VERSION) throw new SchemaTooNewError(path, schemaVersion, SCHEMA_VERSION, true);
    const meta = new Map<string, string | null>();
    if (db.prepare(`SELECT 1 FROM sqlite_master WHERE name = '${META_TABLE}'`).get()) {
      for (const r of db.prepare(`SELECT key, value FROM ${META_TABLE}`).all() as { key: string; value: string | null }[]) meta.set(r.key, r.value);
    }
    return { schemaVersion, meta };
  } finally {
    db.close();
  }
}

/**
 * Replaces DATA_DIR's database with a backup. Refused while a gateway holds DATA_DIR (it takes the
 * same lock, so no gateway can start meanwhile either), and before anything changes if the backup
 * fails its integrity check or has a schema newer than this build. The replaced database is kept
 * beside it as tagw.sqlite.before-restore-<time>.
 */
export async function restoreDatabase(s: DataDirSettings, file: string, now: () => number = Date.now): Promise<RestoreReport> {
  const lock = lockDataDir(s.dataDir);
  try {
    const { schemaVersion, meta } = inspectBackup(file);
    const target = dbPath(s.dataDir);
    ensureRoom(s.dataDir, statSync(resolve(file)).size);
    const staged = `${target}.restoring`;
    rmSync(staged, { force: true });
    const src = new Database(resolve(file), { readonly: true, fileMustExist: true });
    try {
      await src.backup(staged, { progress: () => 0x7fffffff });
    } finally {
      src.close();
    }
    const restored = new Database(staged);
    let pendingMigrations: RestoreReport['pendingMigrations'];
    try {
      restored.exec(`DROP TABLE IF EXISTS ${META_TABLE}`);
      restored.pragma('journal_mode = WAL');
      pendingMigrations = migrationPlan(restored).pending;
    } finally {
      restored.close();
    }
    keepOwnership(staged, target, s.dataDir);
    const previous = existsSync(target) ? setAside(target, now) : null;
    for (const suffix of ['-wal', '-shm']) rmSync(target + suffix, { force: true });
    renameSync(staged, target);
    const current = secretKeyRef(s);
    const recorded = meta.get('secret_key_fingerprint') ?? null;
    return {
      file: resolve(file), dataDir: resolve(s.dataDir), schemaVersion, pendingMigrations,
      takenAt: meta.get('taken_at') ?? null, previous,
      secretKey: {
        location: meta.get('secret_key_location') ?? current.location,
        fingerprint: recorded,
        matches: recorded && current.fingerprint ? recorded === current.fingerprint : null,
        found: current,
      },
    };
  } finally {
    lock.release();
  }
}

const sizeOf = (file: string) => (existsSync(file) ? statSync(file).size : 0);

/**
 * Refuses a copy of about `bytes` into `dir` before it starts when its file system has less free
 * space (SQLite's backup, stopped by a full disk, threw from a timer: a stack trace, no clean-up).
 */
function ensureRoom(dir: string, bytes: number): void {
  const fs = statfsSync(dir);
  const free = fs.bavail * fs.bsize;
  const mib = (n: number) => (n / 1048576).toFixed(1);
  if (free < bytes) throw new BackupError('NO_SPACE', `${resolve(dir)}: not enough free space for the copy (${mib(bytes)} MiB needed, ${mib(free)} MiB free)`);
}

/**
 * Gives the restored file the owner and mode of the database it replaces (none: DATA_DIR's owner,
 * mode 0600). The documented restore runs as root on the DATA_DIR of the service's own user
 * (systemd's DynamicUser): a database left owned by root is one the gateway cannot write.
 */
function keepOwnership(staged: string, target: string, dataDir: string): void {
  const like = existsSync(target) ? statSync(target) : undefined;
  chmodSync(staged, like ? like.mode & 0o777 : 0o600);
  if (process.getuid?.() !== 0) return; // only root can give a file away; anyone else owns what it made
  const owner = like ?? statSync(dataDir);
  chownSync(staged, owner.uid, owner.gid);
}

/** Folds the WAL of the database being replaced into it and moves it aside; returns its new path. */
function setAside(target: string, now: () => number): string {
  const old = new Database(target);
  try {
    old.pragma('wal_checkpoint(TRUNCATE)');
  } finally {
    old.close();
  }
  const aside = `${target}.before-restore-${new Date(now()).toISOString().replace(/[:.]/g, '-')}`;
  renameSync(target, aside);
  return aside;
}
