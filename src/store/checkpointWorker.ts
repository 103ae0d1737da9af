// The checkpointer's thread: its own connection to the database, copying committed WAL frames
// back into the database file with PASSIVE checkpoints, which never take the write lock and never
// wait for a writer. Trade commits on the shards then only append to the WAL; the copy and its
// fsync happen here instead of inside whichever commit crossed the auto-checkpoint threshold.
import Database from 'better-sqlite3';
import { parentPort, workerData } from 'node:worker_threads';

export interface CheckpointWorkerData { file: string; intervalMs: number }
export type CheckpointStats = { runs: number; failures: number; walFrames: number; checkpointedFrames: number; lastError?: string };

const { file, intervalMs } = workerData as CheckpointWorkerData;
const db = new Database(file);
db.pragma('busy_timeout = 0');
db.pragma('wal_autocheckpoint = 0');
const stats: CheckpointStats = { runs: 0, failures: 0, walFrames: 0, checkpointedFrames: 0 };

const run = () => {
  try {
    const [r] = db.pragma('wal_checkpoint(PASSIVE)') as Array<{ busy: number; log: number; checkpointed: number }>;
    stats.runs++;
    if (r) {
      stats.walFrames = r.log;
      stats.checkpointedFrames = r.checkpointed;
    }
  } catch (err) {
    // SQLITE_BUSY (another checkpoint in progress) and the like: the next run tries again.
    stats.failures++;
    stats.lastError = err instanceof Error ? err.message : String(err);
  }
};
const timer = setInterval(run, intervalMs);

parentPort!.on('message', (m: { t: 'stats' } | { t: 'stop' }) => {
  if (m.t === 'stats') parentPort!.postMessage({ t: 'stats', stats });
  else {
    clearInterval(timer);
    run();
    db.close();
    parentPort!.postMessage({ t: 'stopped', stats });
    parentPort!.close();
  }
});
