// A real full file system for the disk-full tests: filled to the last byte by a file of its own.
import { closeSync, openSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import type Database from 'better-sqlite3';
import type { Scheduler } from '../../src/store/heldWrites.js';

/** Writes `root`/filler until the file system holding it has not one byte left; returns its path. */
export function fillUp(root: string): string {
  const f = join(root, 'filler');
  const fd = openSync(f, 'w');
  for (const b of [Buffer.alloc(1 << 20), Buffer.alloc(4096), Buffer.alloc(1)]) {
    try {
      for (;;) writeSync(fd, b);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOSPC') throw e;
    }
  }
  closeSync(fd);
  return f;
}

/** A scheduler in the test's hands (src/store/heldWrites.ts): timers run when the test fires them, not with time. */
export class ManualScheduler implements Scheduler {
  readonly timers = new Map<number, () => void>();
  private next = 1;
  setTimeout(fn: () => void): unknown {
    const id = this.next++;
    this.timers.set(id, fn);
    return id;
  }
  clearTimeout(handle: unknown): void {
    this.timers.delete(handle as number);
  }
  /** Runs the timers armed now. */
  fire(): void {
    for (const [id, fn] of [...this.timers]) {
      this.timers.delete(id);
      fn();
    }
  }
}

/** The writes `on` (table, operation) of `db` fail as a full disk makes them fail (SQLITE_FULL)
 *  while the returned `full` holds: TEMP triggers calling a function that throws. */
export function failWhenFull(db: Database.Database, on: ReadonlyArray<readonly [table: string, op: 'INSERT' | 'UPDATE' | 'DELETE']>): { full: boolean } {
  const disk = { full: false };
  db.function('full_now', { deterministic: false }, () => {
    if (disk.full) throw Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' });
    return 0;
  });
  for (const [t, op] of on) db.exec(`CREATE TEMP TRIGGER full_${t}_${op} BEFORE ${op} ON ${t} WHEN full_now() BEGIN SELECT 1; END`);
  return disk;
}
