// One gateway per data directory. Two gateways on one DATA_DIR would each run their own shards and
// simulator over the same database: two live connections per account, two ticket ranges, and
// positions that vanish on the next restart.
//
// The lock is an exclusive SQLite lock (a POSIX advisory lock underneath) on DATA_DIR/gateway.lock,
// held by an open transaction for the gateway's lifetime. The kernel drops it the moment the
// process dies, however it dies, so a crash never needs clean-up. A pid file alone could not tell:
// `kill(pid, 0)` still succeeds for a killed process not yet reaped (a supervisor restarting at
// once was refused) and for an unrelated process that reused the pid. The pid is kept beside the
// lock only to name the owner in the error message.
import Database from 'better-sqlite3';
import { chownSync, mkdirSync, readFileSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { asSystemError, assertWritable, openSqliteFile } from './db.js';
import { join, resolve } from 'node:path';

export class DataDirInUseError extends Error {}

/** Directories locked by this process (tests run several gateways, on different dirs, in one process). */
const held = new Set<string>();

const isBusy = (err: unknown) => /^SQLITE_(BUSY|LOCKED)/.test((err as { code?: string }).code ?? '');

/**
 * Root locking a DATA_DIR another user owns (`tagw restore` as root on the service's own, as
 * docs/operations.md does) made the lock file root's when there was none: the service's next start
 * could not open it for writing (EACCES, exit 1, restarted by systemd every 2 s). It goes to the
 * directory's owner, as the restored database does.
 */
function givenToDirOwner(dir: string, file: string): void {
  if (process.getuid?.() !== 0) return;
  const d = statSync(dir);
  const f = statSync(file);
  if (f.uid !== d.uid || f.gid !== d.gid) chownSync(file, d.uid, d.gid);
}

export function lockDataDir(dataDir: string): { release(): void } {
  const dir = resolve(dataDir);
  mkdirSync(dir, { recursive: true, mode: 0o700 }); // made here: for this user only (orders, logins, sealed passwords)
  if (held.has(dir)) throw new DataDirInUseError(`DATA_DIR ${dir} is already in use by a gateway in this process`);
  const pidFile = join(dir, 'gateway.pid');
  const lockFile = join(dir, 'gateway.lock');
  assertWritable([dir, lockFile]);
  let db: Database.Database;
  for (let attempt = 0; ; attempt++) {
    db = openSqliteFile(lockFile, { timeout: 0 });
    try {
      db.exec('BEGIN EXCLUSIVE');
      break;
    } catch (err) {
      db.close();
      // A plain-text lock file left by an earlier version (pid inside): not ours to keep.
      if ((err as { code?: string }).code === 'SQLITE_NOTADB' && attempt === 0) {
        unlinkSync(lockFile);
        continue;
      }
      if (!isBusy(err)) throw asSystemError(lockFile, err); // e.g. SQLITE_FULL: DATA_DIR's disk is full
      let owner = '';
      try {
        owner = ` (pid ${readFileSync(pidFile, 'utf8').trim()})`;
      } catch {
        // no pid file: name no pid
      }
      throw new DataDirInUseError(`DATA_DIR ${dir} is in use by another gateway${owner}; stop it first, or use another DATA_DIR`);
    }
  }
  givenToDirOwner(dir, lockFile);
  writeFileSync(pidFile, String(process.pid), { mode: 0o600 });
  held.add(dir);
  let released = false;
  return {
    release() {
      if (released) return;
      released = true;
      held.delete(dir);
      try {
        unlinkSync(pidFile);
      } catch {
        // already gone
      }
      db.close(); // ends the transaction: the lock is free
    },
  };
}
