// One gateway per DATA_DIR: the lock is held by the kernel for the owning process's lifetime, so a
// killed owner frees it at once (even before it is reaped), and a pid reused by an unrelated process
// does not keep it.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { until } from '../helpers/until.js';
import { DataDirInUseError, lockDataDir } from '../../src/store/dataDirLock.js';

const LOCK_MODULE = fileURLToPath(new URL('../../src/store/dataDirLock.ts', import.meta.url));
const dirs: string[] = [];
const children: ChildProcess[] = [];
afterEach(() => {
  // The whole group: the shell, its sleep and the holder (a sleep left behind keeps the pipe open).
  for (const c of children.splice(0)) {
    try {
      process.kill(-c.pid!, 'SIGKILL');
    } catch {
      // gone already
    }
    c.stdout?.destroy();
  }
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'tagw-lock-'));
  dirs.push(d);
  return d;
};

/** A process holding the lock whose parent never reaps it (the shell execs `sleep`): killed, it stays a zombie. */
async function holder(dir: string): Promise<{ pid: number }> {
  const script = `import(${JSON.stringify(LOCK_MODULE)}).then((m) => { m.lockDataDir(${JSON.stringify(dir)}); console.log('locked'); setInterval(() => {}, 1000); })`;
  const sh = spawn('sh', ['-c', `node --import tsx -e '${script.replace(/'/g, "'\\''")}' & echo pid=$!; exec sleep 60`], { stdio: ['ignore', 'pipe', 'inherit'], detached: true });
  children.push(sh);
  let out = '';
  await new Promise<void>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`holder did not lock: ${out}`)), 20_000);
    sh.stdout!.on('data', (d: Buffer) => {
      out += String(d);
      if (out.includes('locked')) {
        clearTimeout(t);
        resolve();
      }
    });
  });
  return { pid: Number(/pid=(\d+)/.exec(out)![1]) };
}

const stateOf = (pid: number) => {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]![0];
  } catch {
    return 'gone';
  }
};

describe('DATA_DIR lock', () => {
  it('refuses a second owner, naming its pid; a killed owner frees it at once, even while not yet reaped', async () => {
    const dir = tempDir();
    const h = await holder(dir);
    expect(() => lockDataDir(dir)).toThrow(DataDirInUseError);
    expect(() => lockDataDir(dir)).toThrow(`(pid ${h.pid})`);
    process.kill(h.pid, 'SIGKILL');
    // The kernel frees the lock once the process's last thread is gone, while it stays a zombie.
    let lock: { release(): void } | undefined;
    await until(() => {
      try {
        lock = lockDataDir(dir);
        return true;
      } catch (err) {
        if (!(err instanceof DataDirInUseError)) throw err;
        return false;
      }
    }, 'the lock of a killed process to be freed');
    expect(lock).toBeDefined();
    expect(stateOf(h.pid)).toBe('Z');
    lock!.release();
  }, 30_000);

  it('a pid file naming a live unrelated process (a reused pid) does not hold the directory', () => {
    const dir = tempDir();
    // As an earlier version (pid in the lock file) or a crash (pid file left behind) would leave it.
    writeFileSync(join(dir, 'gateway.lock'), String(process.ppid));
    writeFileSync(join(dir, 'gateway.pid'), String(process.ppid));
    let lock: ReturnType<typeof lockDataDir> | undefined;
    expect(() => (lock = lockDataDir(dir))).not.toThrow();
    lock!.release();
    expect(() => lockDataDir(dir).release()).not.toThrow(); // released: free again
  });

  it('a plain-text lock file of an earlier version is taken over; the same process cannot lock twice; release frees it', () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'gateway.lock'), '999999');
    const lock = lockDataDir(dir);
    expect(() => lockDataDir(dir)).toThrow(/already in use by a gateway in this process/);
    lock.release();
    lockDataDir(dir).release();
  });
});
