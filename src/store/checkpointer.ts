// Background WAL checkpoints (see checkpointWorker.ts). Every gateway connection keeps SQLite's
// automatic checkpoint only as a far-off backstop (openDb), so a commit on the trade path is an
// append to the WAL; the copy back into the database file and its fsync, which took up to ~15 ms
// inside an unlucky commit, run on this thread instead.
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { CheckpointStats, CheckpointWorkerData } from './checkpointWorker.js';
import { WAL_SIZE_LIMIT_BYTES } from './db.js';

const selfUrl = import.meta.url;
const fromSource = selfUrl.endsWith('.ts');
const workerFile = fileURLToPath(new URL(fromSource ? './checkpointWorker.ts' : './checkpointWorker.js', selfUrl));

export interface Checkpointer {
  stats(): Promise<CheckpointStats>;
  /** Runs a last checkpoint and ends the thread. */
  stop(): Promise<CheckpointStats | undefined>;
}

/** A run that finds this many new WAL frames (1 MiB) means writes without a pause: the next waits busyIntervalMs. */
const BUSY_FRAMES = 256;

/** Nothing committed for this long: the checkpointer runs every IDLE_INTERVAL_MS until a commit. */
const IDLE_AFTER_MS = 1_000;
const IDLE_INTERVAL_MS = 1_000;

/** `workerFile`: a compiled checkpointWorker.js to run instead of this module's sibling (the tests
 *  point it at their build: from the sources the thread first registers tsx's loader, ~5x the CPU
 *  and ~7x the time to start, and a test run starts a gateway, so a thread, hundreds of times). */
export function startCheckpointer(file: string, opts: { intervalMs?: number; busyIntervalMs?: number; busyFrames?: number; idleIntervalMs?: number; idleAfterMs?: number; onError?: (err: unknown) => void; workerFile?: string; priority?: 'idle' | 'normal' } = {}): Checkpointer {
  const intervalMs = opts.intervalMs ?? 20;
  const data: CheckpointWorkerData = {
    file, intervalMs, busyIntervalMs: Math.max(intervalMs, opts.busyIntervalMs ?? 100), busyFrames: opts.busyFrames ?? BUSY_FRAMES, walSizeLimitBytes: WAL_SIZE_LIMIT_BYTES, priority: opts.priority ?? 'normal',
    idleIntervalMs: Math.max(intervalMs, opts.idleIntervalMs ?? IDLE_INTERVAL_MS),
    idleAfterRuns: Math.max(1, Math.ceil((opts.idleAfterMs ?? IDLE_AFTER_MS) / intervalMs)),
  };
  // From the sources (tests, tsx) the thread registers tsx's loader, then imports the .ts entry
  // (a .ts file as a Worker's entry is not loaded through `--import tsx`).
  const worker = opts.workerFile !== undefined
    ? new Worker(opts.workerFile, { workerData: data })
    : fromSource
    ? new Worker(`import('tsx/esm/api').then((m) => m.register()).then(() => import(${JSON.stringify(pathToFileURL(workerFile).href)}))`, { eval: true, workerData: data })
    : new Worker(workerFile, { workerData: data });
  // The thread is a helper: it must not keep the process alive, and its death only costs the
  // backstop (inline auto-checkpoints), never data.
  worker.unref();
  let dead = false;
  worker.on('error', (err) => opts.onError?.(err));
  worker.on('exit', () => (dead = true));
  const ask = (msg: 'stats' | 'stop', answer: 'stats' | 'stopped'): Promise<CheckpointStats | undefined> =>
    dead
      ? Promise.resolve(undefined)
      : new Promise((resolve) => {
          const onExit = () => resolve(undefined);
          const onMsg = (m: { t: string; stats: CheckpointStats }) => {
            if (m.t !== answer) return;
            worker.off('message', onMsg);
            worker.off('exit', onExit);
            resolve(m.stats);
          };
          worker.on('message', onMsg);
          worker.once('exit', onExit);
          worker.postMessage({ t: msg });
        });
  return {
    stats: async () => (await ask('stats', 'stats')) ?? { runs: 0, failures: 0, walFrames: 0, checkpointedFrames: 0, restarts: 0, lastError: 'checkpointer not running' },
    stop: () => ask('stop', 'stopped'),
  };
}
