// A real full file system for the disk-full tests: filled to the last byte by a file of its own.
import { closeSync, openSync, writeSync } from 'node:fs';
import { join } from 'node:path';

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
