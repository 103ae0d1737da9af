// npm run bench -- idle-heap [--from 1000] [--to 4000] [--restart]
// What an idle, connected account holds on each thread (issue 19, docs/scale.md): a gateway in
// this process (one shard, the embedded simulator), `from` accounts created through /ConnectEx and
// connected, a rest, heap snapshots of the main thread and of the shard; then up to `to`, again.
// The difference divided by the accounts added is the bytes per account, by object kind and by
// what each object is (closures by source location, plain objects by property names and holder).
// --restart: the gateway restarted on the same data, the `to` accounts restored, the shard again.
import { createRequire, syncBuiltinESMExports } from 'node:module';
import { createWriteStream, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { writeHeapSnapshot } from 'node:v8';
import type { Worker as WorkerT } from 'node:worker_threads';
import { diff, summarize, total, type DiffRow } from './lib/heapDiff.js';
import { watchHost } from './lib/hostFacts.js';
import { argText as arg } from './lib/args.js';

const machineFacts = watchHost();

const from = Number(arg('from', '1000'));
const to = Number(arg('to', '4000'));
const restart = process.argv.includes('--restart');

// The shard's thread is Piscina's Worker, which the gateway does not hand out: the Worker class is
// wrapped (before piscina loads, hence the dynamic imports below) to keep each one made, and its
// heap snapshot is taken with Worker.getHeapSnapshot().
const workerThreads = createRequire(import.meta.url)('node:worker_threads') as typeof import('node:worker_threads');
const made: WorkerT[] = [];
const Original = workerThreads.Worker;
workerThreads.Worker = class extends Original {
  constructor(...args: ConstructorParameters<typeof Original>) {
    super(...args);
    made.push(this);
  }
};
syncBuiltinESMExports();
const { startGateway } = await import('../src/gateway.js');
const { parseConfig } = await import('../src/config.js');
const { createLogger } = await import('../src/log.js');

const MK = 'bench-idle-heap-management-key-0123456789';
const dataDir = mkdtempSync(join(tmpdir(), 'tagw-bench-idle-heap-'));
const out = mkdtempSync(join(tmpdir(), 'tagw-bench-heaps-'));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function start() {
  const config = parseConfig({ host: '127.0.0.1', port: 0, dataDir, shards: 1, logLevel: 'silent', managementKey: MK, keyRequestsPerSec: 10_000_000, keyOrdersPerSec: 10_000_000 });
  const before = made.length;
  const gw = await startGateway(config, { log: createLogger('silent') });
  // Piscina's shard thread is the last worker started (the WAL checkpointer's comes first).
  const shard = made.slice(before).at(-1)!;
  return { gw, url: `http://127.0.0.1:${gw.port}`, shard };
}
async function call(url: string, path: string, headers: Record<string, string>, body: unknown) {
  const r = await fetch(url + path, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  const j = (await r.json()) as Record<string, unknown>;
  if (r.status >= 300) throw new Error(`${path}: ${r.status} ${JSON.stringify(j)}`);
  return j;
}
async function allConnected(url: string, n: number) {
  for (let i = 0; i < 1200; i++) {
    const m = /tagw_broker_connections\{phase="connected"\} (\d+)/.exec(await fetch(`${url}/metrics`).then((r) => r.text()));
    if (m && Number(m[1]) >= n) return;
    await sleep(250);
  }
  throw new Error(`not every account connected (${n})`);
}
/** Heap snapshots of main and the shard after a rest (parked machines park a turn after connecting). */
async function snapshots(g: Awaited<ReturnType<typeof start>>, label: string) {
  await sleep(3000);
  const main = writeHeapSnapshot(join(out, `${label}-main.heapsnapshot`));
  const shard = join(out, `${label}-shard.heapsnapshot`);
  await pipeline(await g.shard.getHeapSnapshot(), createWriteStream(shard));
  return { main, shard };
}

let g = await start();
const key = (await call(g.url, '/v1/keys', { authorization: `Bearer ${MK}` }, { label: 'idle-heap' })).key as string;
let next = 0;
async function createUpTo(n: number) {
  await Promise.all(Array.from({ length: 16 }, async () => {
    while (next < n) await call(g.url, '/ConnectEx', { 'x-api-key': key }, { user: `idle-${next++}`, password: 'pw', server: 'Sim-P5-Demo' });
  }));
  await allConnected(g.url, n);
}
await createUpTo(from);
const files = [await snapshots(g, 'from')];
await createUpTo(to);
files.push(await snapshots(g, 'to'));
if (restart) {
  await g.gw.close();
  g = await start();
  await allConnected(g.url, to);
  files.push(await snapshots(g, 'restored'));
}
await g.gw.close();
// Read once every snapshot is taken: the summaries would be in the main thread's next one.
const [a, b, r] = files.map((f) => ({ main: summarize(f.main), shard: summarize(f.shard) }));
const added = to - from;
const per = (x: { byType: Map<string, { n: number; b: number }> }, y: typeof x) => Math.round((total(y.byType) - total(x.byType)) / added);
const print = (title: string, rows: DiffRow[], bytes: number) => {
  console.error(`\n${title}: ${bytes} B per account`);
  for (const r of rows) console.error(`${String(r.bytes).padStart(7)} B ${r.count.toFixed(2).padStart(6)}x  ${r.what}`);
};
const shardRows = diff(a.shard.byWhat, b.shard.byWhat, added);
print(`shard, ${from} -> ${to} accounts created`, [...diff(a.shard.byType, b.shard.byType, added), { what: '---', bytes: 0, count: 0 }, ...shardRows.slice(0, 50)], per(a.shard, b.shard));
print(`main thread, ${from} -> ${to} accounts created`, diff(a.main.byType, b.main.byType, added), per(a.main, b.main));
const restored = r ? per(a.shard, r.shard) : null;
if (r) print(`shard, ${to} restored after a restart, against ${from} created`, diff(a.shard.byType, r.shard.byType, added), restored!);
rmSync(dataDir, { recursive: true, force: true });
rmSync(out, { recursive: true, force: true });
console.log(JSON.stringify({
  machine: machineFacts(),
  bench: 'idle-heap', from, to,
  shardBytesPerAccount: per(a.shard, b.shard), mainBytesPerAccount: per(a.main, b.main), restoredShardBytesPerAccount: restored,
  shardTop: shardRows.slice(0, 12),
}));
process.exit(0);
