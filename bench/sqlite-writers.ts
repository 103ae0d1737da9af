// npm run bench -- sqlite-writers [--threads 1,2,4] [--seconds N]
// What shards writing one SQLite file cost each other (issue 19 item 5). N worker threads each commit
// an idempotent order's writes in a loop (BEGIN IMMEDIATE; the claim row and a journal row; COMMIT,
// as the embedded mode's booking transaction does; WAL, synchronous=NORMAL, busy_timeout 5000), all
// into one file, then each into a file of its own. The shards share one file today: commits/s per
// thread count shows whether more shards can commit more, or queue on the one write lock (SQLite's
// busy handler sleeps 1 ms and more while another connection holds it).
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { floorDbSource } from './lib/orderFloor.js';
import { watchHost } from './lib/hostFacts.js';
import { argText as arg } from './lib/args.js';

const machineFacts = watchHost();

const counts = arg('threads', [1, 2, 4].filter((n) => n <= Math.max(2, availableParallelism())).join(',')).split(',').map(Number);
const seconds = Number(arg('seconds', '2'));
const sqlite = createRequire(import.meta.url).resolve('better-sqlite3');

const WORKER = (file: string) => `
const { parentPort, workerData: { ms, id } } = require('node:worker_threads');
${floorDbSource(sqlite, file)}
const tx = db.transaction((n) => { claim.run('acct-' + id, 'o' + n, 'x'.repeat(43)); book.run(deal); });
parentPort.once('message', () => {
  let n = 0;
  const t0 = performance.now();
  while (performance.now() - t0 < ms) tx.immediate(n++);
  db.close();
  parentPort.postMessage(n);
});`;

async function run(threads: number, sharedFile: boolean): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'tagw-bench-writers-'));
  const workers = Array.from({ length: threads }, (_, id) =>
    new Worker(WORKER(join(dir, sharedFile ? 'one.sqlite' : `own-${id}.sqlite`)), { eval: true, workerData: { ms: seconds * 1000, id } }));
  // Schema first (one at a time), then all start together.
  await new Promise((r) => setTimeout(r, 300));
  const done = workers.map((w) => new Promise<number>((resolve, reject) => {
    w.once('message', resolve);
    w.once('error', reject);
  }));
  for (const w of workers) w.postMessage('go');
  const commits = (await Promise.all(done)).reduce((a, b) => a + b, 0);
  await Promise.all(workers.map((w) => w.terminate()));
  rmSync(dir, { recursive: true, force: true });
  return Math.round(commits / seconds);
}

const points = [];
for (const n of counts) {
  const oneFile = await run(n, true);
  const filePerThread = await run(n, false);
  points.push({ threads: n, oneFileCommitsPerSec: oneFile, filePerThreadCommitsPerSec: filePerThread, oneOverOwn: Math.round((oneFile / filePerThread) * 1000) / 1000 });
  console.error(JSON.stringify(points.at(-1)));
}
console.log(JSON.stringify({ machine: machineFacts(), bench: 'sqlite-writers', cores: availableParallelism(), seconds, points }));
process.exit(0);
