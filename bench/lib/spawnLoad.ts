// Runs a load job in separate client processes so the client does not compete with the server's
// event loop, and merges their histograms.
import { fork } from 'node:child_process';
import { loaderArgs, moduleBeside } from './launch.js';
import { Histogram, type HistogramData } from './histogram.js';
import type { LoadJob, LoadResult } from './httpLoadWorker.js';

const WORKER = moduleBeside('./httpLoadWorker.ts', import.meta.url);

export interface MergedLoad {
  requests: number;
  /** Requests sent, warm-ups included. */
  sent: number;
  errors: number;
  statuses: Record<string, number>;
  rps: number;
  latencyUs: ReturnType<Histogram['summary']>;
  /** The merged histogram, for pooling several runs. */
  hist: HistogramData;
}

export async function spawnLoad(job: LoadJob, processes: number): Promise<MergedLoad> {
  const results = await Promise.all(
    Array.from({ length: processes }, () =>
      new Promise<LoadResult>((resolve, reject) => {
        const child = fork(WORKER, [], { execArgv: loaderArgs(WORKER), stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
        child.once('message', (m) => resolve(m as LoadResult));
        child.once('error', reject);
        child.once('exit', (code) => code !== 0 && reject(new Error(`load client exited ${code}`)));
        child.send(job);
      }),
    ),
  );
  const hist = new Histogram();
  const statuses: Record<string, number> = {};
  let requests = 0;
  let sent = 0;
  let errors = 0;
  let rps = 0;
  for (const r of results) {
    hist.merge(r.hist);
    requests += r.requests;
    sent += r.sent;
    errors += r.errors;
    rps += r.requests / r.seconds;
    for (const [k, v] of Object.entries(r.statuses)) statuses[k] = (statuses[k] ?? 0) + v;
  }
  return { requests, sent, errors, statuses, rps: Math.round(rps), latencyUs: hist.summary(), hist: hist.toJSON() };
}
