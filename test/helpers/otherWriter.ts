// Another SQLite connection, on a thread of its own, that holds the write lock (a shard's, say):
// for tests of transactions that read before they write (writeTransaction, src/store/db.ts).
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

/** Another connection to `file` takes the write lock, runs `sql` (one statement), and commits after
 *  `holdMs`. `locked`: the lock is held; `done`: committed and closed. */
export function otherWriter(file: string, holdMs: number, sql = "INSERT INTO t (v) VALUES ('other')"): { locked: Promise<void>; done: Promise<void> } {
  const sqlite = createRequire(import.meta.url).resolve('better-sqlite3');
  const shared = new Int32Array(new SharedArrayBuffer(4));
  const w = new Worker(`
    const { workerData } = require('node:worker_threads');
    const db = new (require(${JSON.stringify(sqlite)}))(workerData.file);
    db.pragma('busy_timeout = 5000');
    db.exec('BEGIN IMMEDIATE');
    db.prepare(workerData.sql).run();
    Atomics.store(workerData.shared, 0, 1);
    Atomics.notify(workerData.shared, 0);
    Atomics.wait(workerData.shared, 0, 1, workerData.holdMs);
    db.exec('COMMIT');
    db.close();`, { eval: true, workerData: { file, shared, holdMs, sql } });
  const done = new Promise<void>((resolve, reject) => {
    w.once('error', reject);
    w.once('exit', () => resolve());
  });
  const locked = (async () => {
    while (Atomics.load(shared, 0) !== 1) await new Promise((r) => setTimeout(r, 1));
  })();
  return { locked, done };
}
