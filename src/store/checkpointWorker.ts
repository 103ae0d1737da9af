// The checkpointer's thread: its own connection to the database, copying committed WAL frames
// back into the database file with PASSIVE checkpoints, which never take the write lock and never
// wait for a writer. Trade commits on the shards then only append to the WAL; the copy and its
// fsync happen here instead of inside whichever commit crossed the auto-checkpoint threshold.
//
// It also restarts the WAL. Once every frame is copied back, SQLite has the next writer start the
// WAL over from its beginning, and that writer writes a new WAL header and fsyncs it inside its
// commit (the header must be on disk before frames that overwrite the old ones). Left to itself,
// that writer is a shard committing an order, and with orders a little apart every one of them
// paid it (one order every 50 ms, 200 orders: an fsync in all 200 commits, commit p50 559 µs,
// order p50 2.08 ms; with this thread restarting: none, 179 µs, 1.75 ms). So when a checkpoint
// has copied everything and nobody committed meanwhile, this thread is that next writer: a
// one-frame write of its own (the file's application_id, written back unchanged), whose commit
// carries the restart and its fsync. Until someone else commits, the next checkpoint is skipped,
// so that frame stays in the WAL and no shard finds it fully copied. (Under sustained writes there
// is no such pause; see WAL_BACKSTOP_PAGES in db.ts.)
import Database from 'better-sqlite3';
import { execFileSync } from 'node:child_process';
import { readlinkSync } from 'node:fs';
import { setPriority } from 'node:os';
import { parentPort, workerData } from 'node:worker_threads';
import { checkpointWait, type CheckpointFound, type CheckpointPace } from './checkpointPace.js';

export interface CheckpointWorkerData extends CheckpointPace {
  file: string;
  /** A run that found at least this many new frames found writes without a pause (busyIntervalMs). */
  busyFrames: number;
  walSizeLimitBytes: number;
  /** 'idle': this thread yields the CPU to any other (see lowerPriority). */
  priority: 'idle' | 'normal';
}
/** nextWaitMs: the wait the timer was given before the next run (what a run found decides it). */
export type CheckpointStats = {
  runs: number; failures: number; walFrames: number; checkpointedFrames: number; restarts: number; nextWaitMs?: number; lastError?: string;
  /** The scheduling the thread got: SCHED_IDLE, nice 19 (chrt missing), or as any thread. */
  policy?: 'idle' | 'nice' | 'normal'; tid?: number;
};

const pace = workerData as CheckpointWorkerData;
const { file, busyFrames, walSizeLimitBytes } = pace;

/**
 * This thread's copies and syncs compete for the CPU with the threads an order runs on (two vCPUs
 * here): woken behind a running checkpoint, a shard or the main thread waited for its slice, and
 * the sequential orders' p99 showed it (issue 19: 889-1,234 vs 1,230-1,414 µs, three alternating
 * pairs; docs/orders-performance.md). SCHED_IDLE (Linux, `chrt` of util-linux: Node has no call for
 * it) makes any woken thread preempt this one at once; nice 19 where chrt is missing. Commits never
 * wait for this thread, so durability does not change; starved, the WAL backstop checkpoints inline.
 */
function lowerPriority(): Pick<CheckpointStats, 'policy' | 'tid'> {
  let tid: number;
  try {
    tid = Number(readlinkSync('/proc/thread-self').split('/').pop()); // Linux: "<pid>/task/<tid>"
  } catch {
    return { policy: 'normal' }; // no per-thread scheduling to set here
  }
  try {
    execFileSync('chrt', ['--idle', '-p', '0', String(tid)], { stdio: 'ignore', timeout: 5_000 });
    return { policy: 'idle', tid };
  } catch {
    try {
      setPriority(tid, 19); // on Linux a thread id names that thread alone
      return { policy: 'nice', tid };
    } catch {
      return { policy: 'normal', tid };
    }
  }
}
const db = new Database(file);
db.pragma('busy_timeout = 0');
db.pragma('wal_autocheckpoint = 0');
// As the gateway's own connections: the restart's commit syncs the WAL header (not every commit),
// and cuts the WAL file back as theirs would.
db.pragma('synchronous = NORMAL');
db.pragma(`journal_size_limit = ${walSizeLimitBytes}`);
const stats: CheckpointStats = { runs: 0, failures: 0, walFrames: 0, checkpointedFrames: 0, restarts: 0, ...(pace.priority === 'idle' ? lowerPriority() : { policy: 'normal' }) };
/** data_version right after this thread's restart: while it is unchanged nobody else committed. */
let quietSince: number | undefined;
const dataVersion = () => db.pragma('data_version', { simple: true }) as number;

/** Be the WAL's next writer (see the top) with a write that changes nothing, if nobody committed
 *  since `seen` (before the checkpoint): otherwise frames were appended that the checkpoint did
 *  not copy, this write would only append too, and holding the lock would only delay a writer. */
const restart = (seen: number) => {
  try {
    db.exec('BEGIN IMMEDIATE');
  } catch {
    return; // a writer holds the lock: it appends to the WAL, which is then in use again
  }
  try {
    if (dataVersion() !== seen) {
      db.exec('ROLLBACK');
      return;
    }
    const id = db.pragma('application_id', { simple: true }) as number;
    db.pragma(`application_id = ${id}`);
    db.exec('COMMIT');
    stats.restarts++;
    quietSince = dataVersion();
  } catch (err) {
    if (db.inTransaction) db.exec('ROLLBACK');
    throw err;
  }
};

/** The WAL's frame count at the end of the last run (a restart starts it over). */
let lastLog = 0;
/** Whether the last run found writes without a pause. */
let busy = false;

/** Runs a checkpoint: whether it found at least busyFrames frames appended since the last one
 *  ('busy'), some, or nothing committed since (only this thread's restart frame, or no WAL). */
const run = (last = false): CheckpointFound => {
  try {
    // Only this thread's restart frame is in the WAL: copying it would hand the next restart
    // (and its fsync) to whoever writes next.
    const seen = dataVersion();
    if (quietSince !== undefined && seen === quietSince) return 'none';
    quietSince = undefined;
    const [r] = db.pragma('wal_checkpoint(PASSIVE)') as Array<{ busy: number; log: number; checkpointed: number }>;
    stats.runs++;
    if (!r) return 'some';
    // -1: it could not run (a writer's own backstop checkpoint was running): as busy as before.
    if (r.log < 0) return busy ? 'busy' : 'some';
    stats.walFrames = r.log;
    stats.checkpointedFrames = r.checkpointed;
    // A WAL shorter than at the last run was started over meanwhile: all of it is new.
    const appended = r.log >= lastLog ? r.log - lastLog : r.log;
    lastLog = r.log;
    busy = appended >= busyFrames;
    if (r.log === 0) return 'none'; // an empty WAL (nothing written since it was cut back)
    if (!last && r.checkpointed === r.log) {
      restart(seen);
      if (quietSince !== undefined) {
        // Restarted: nobody committed since the checkpoint began, so the writes paused.
        lastLog = 1; // the restart's own frame
        busy = false;
      }
    }
    return busy ? 'busy' : 'some';
  } catch (err) {
    // SQLITE_BUSY (another checkpoint in progress) and the like: the next run tries again.
    stats.failures++;
    stats.lastError = err instanceof Error ? err.message : String(err);
    return 'some';
  }
};
// Every intervalMs while writes are few, so the WAL is restarted soon after they pause (see the
// top). Under sustained writes, every busyIntervalMs: a run copies each page once however often
// it was rewritten since the last, and syncs both files once. Orders of 100 accounts rewrote the
// same index leaves many times within 100 ms, and this thread's CPU per order fell 7-8 -> 3-4 us
// (prof-orders CONC=32 N=20000 ACCTS=100, three alternating pairs); a commit never waits for it.
// Once nothing was committed for a while (idleAfterRuns runs), every idleIntervalMs: an idle node
// is not woken 50 times a second to find nothing (issue 19). The first commit after that only
// appends to the WAL (this thread's restart frame is still in it), and the next run catches up.
let timer: NodeJS.Timeout | undefined;
let idleRuns = 0;
const schedule = (found: CheckpointFound) => {
  idleRuns = found === 'none' ? idleRuns + 1 : 0;
  stats.nextWaitMs = checkpointWait(pace, found, idleRuns);
  timer = setTimeout(() => schedule(run()), stats.nextWaitMs);
};
schedule('some');

parentPort!.on('message', (m: { t: 'stats' } | { t: 'stop' }) => {
  if (m.t === 'stats') parentPort!.postMessage({ t: 'stats', stats });
  else {
    clearTimeout(timer);
    quietSince = undefined;
    run(true);
    db.close();
    parentPort!.postMessage({ t: 'stopped', stats });
    parentPort!.close();
  }
});
