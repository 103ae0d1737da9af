// One gateway per data directory. Two gateways on one DATA_DIR would each run their own shards and
// simulator over the same database: two live connections per account, two ticket ranges, and
// positions that vanish on the next restart. The lock is a file holding the owner's pid; a lock
// whose process is gone is stale and taken over (a crash must not need manual clean-up).
import { closeSync, mkdirSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { join, resolve } from 'node:path';

export class DataDirInUseError extends Error {}

/** Directories locked by this process (tests run several gateways, on different dirs, in one process). */
const held = new Set<string>();

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'; // exists, owned by someone else
  }
}

export function lockDataDir(dataDir: string): { release(): void } {
  const dir = resolve(dataDir);
  mkdirSync(dir, { recursive: true });
  const file = join(dir, 'gateway.lock');
  if (held.has(dir)) throw new DataDirInUseError(`DATA_DIR ${dir} is already in use by a gateway in this process`);
  for (let attempt = 0; ; attempt++) {
    try {
      const fd = openSync(file, 'wx', 0o600);
      try {
        writeSync(fd, String(process.pid));
      } finally {
        closeSync(fd);
      }
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST' || attempt > 0) throw err;
      let pid = NaN;
      try {
        pid = Number(readFileSync(file, 'utf8').trim());
      } catch {
        // unreadable: treated as stale below
      }
      if (Number.isInteger(pid) && pid > 0 && pid !== process.pid && alive(pid)) {
        throw new DataDirInUseError(`DATA_DIR ${dir} is in use by another gateway (pid ${pid}); stop it first, or use another DATA_DIR`);
      }
      unlinkSync(file); // stale: its process is gone
    }
  }
  held.add(dir);
  let released = false;
  return {
    release() {
      if (released) return;
      released = true;
      held.delete(dir);
      try {
        if (readFileSync(file, 'utf8').trim() === String(process.pid)) unlinkSync(file);
      } catch {
        // already gone
      }
    },
  };
}
