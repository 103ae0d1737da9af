// npm run bench -- scale [--sizes 1000,20000,50000] [--concurrency 16] [--shards N] [--settle-ms 150000] [--source]
// The scale of one node (issue 19): accounts created through /ConnectEx in steps up to each size
// (creations/s of each step's first and last thousand: the last within 0.8x of the first means the
// cost of a creation does not grow with the accounts already there), RSS growth per account from the
// first size to the last (read once every account is connected and the process has rested long
// enough for V8 to collect the burst's garbage: read sooner, it moves by a third from run to run), each
// thread's heap per account, the gateway's idle CPU with every account connected, /GetQuote latency
// while accounts are being created, and the cold start at the last size: SIGTERM, start again on
// the same DATA_DIR, time until it listens, until the last account answers /GetQuote, and until every
// account is connected again (restored in the background). The gateway runs as its
// own process (as an operator runs it), so its RSS and CPU are its own.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Histogram } from './lib/histogram.js';
import { cpuSeconds, gatewayEntry, rssBytes, rssParts, spawnGateway, threadHeaps } from './lib/gatewayProcess.js';
import { watchHost } from './lib/hostFacts.js';
import { argText as arg } from './lib/args.js';

const machineFacts = watchHost();

const sizes = arg('sizes', '1000,20000,50000').split(',').map(Number);
const concurrency = Number(arg('concurrency', '16'));
const shards = arg('shards', '');
// When each step's RSS and heaps are read: once V8 has collected the burst's garbage and given its
// pages back (its memory reducer), seen on every shard (where the accounts are) as its heap in use
// down by a tenth at least since the idle sample and its reserved heap within 1.25x of that; at
// most settleMs after the burst. Read before, the RSS holds every creation's garbage
// (20,000 accounts in one process: 428 MiB from 0 to 33 s after the burst, 193 MiB from 48 s on,
// the shard's heap 188 -> 63 MiB reserved), and how much of it depends on when the last
// collection ran, which made the figure move by a third from run to run; the reducer ran 35 s to
// over 60 s after a burst here.
const settleMs = Number(arg('settle-ms', '150000'));
const SETTLED_USED = 0.9;
const SETTLED_RESERVE = 1.25;
const MK = 'bench-scale-management-key-0123456789';
const dataDir = mkdtempSync(join(tmpdir(), 'tagw-bench-scale-'));
const at = gatewayEntry(import.meta.url);
const startGateway = () => spawnGateway(at, { PORT: '0', HOST: '127.0.0.1', DATA_DIR: dataDir, GATEWAY_MANAGEMENT_KEY: MK,
  KEY_REQUESTS_PER_SEC: '10000000', KEY_ORDERS_PER_SEC: '10000000', ...(shards ? { SHARDS: shards } : {}) });

async function call(base: string, method: string, path: string, headers: Record<string, string>, body?: unknown) {
  const r = await fetch(`${base}${path}`, { method, headers: { 'content-type': 'application/json', ...headers }, ...(body ? { body: JSON.stringify(body) } : {}) });
  const json = (await r.json()) as Record<string, unknown>;
  if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(json)}`);
  return json;
}

let gw = await startGateway();
const pid = () => gw.child.pid!;
const key = (await call(gw.url, 'POST', '/v1/keys', { authorization: `Bearer ${MK}` }, { label: 'bench-scale' })).key as string;
const h = { 'x-api-key': key };
const ids: string[] = [];
const createOne = async (n: number) => {
  const r = await call(gw.url, 'POST', '/ConnectEx', h, { user: `scale-${n}`, password: 'pw', server: 'Sim-P5-Demo' });
  ids.push(r.id as string);
};

// /GetQuote while the ramp runs: one request at a time on the first account.
const quoteHist = new Histogram();
let probing = true;
/** Paused while a step's idle CPU is sampled. */
let probePaused = false;
async function probeQuotes(id: string) {
  while (probing) {
    if (probePaused) {
      await new Promise((r) => setTimeout(r, 50));
      continue;
    }
    const t = performance.now();
    const r = await fetch(`${gw.url}/GetQuote?id=${id}&symbol=BTCUSD`, { headers: h });
    await r.arrayBuffer();
    if (r.status === 200) quoteHist.record(Math.round((performance.now() - t) * 1000));
    await new Promise((r) => setTimeout(r, 5));
  }
}

await createOne(0);
const probe = probeQuotes(ids[0]!);
const steps: {
  size: number; firstThousandPerSec: number; lastThousandPerSec: number; perSec: number;
  rssAfterBurstMiB: number; connectedAfterMs: number | null; rssAfterIdleSampleMiB: number; settledAfterMs: number | null; rssMiB: number; rssPartsMiB: ReturnType<typeof rssParts>; heapUsedMiB: Record<string, number>; heapTotalMiB: Record<string, number>; idleCpuPercent: number;
}[] = [];
const metricsText = () => fetch(`${gw.url}/metrics`).then((r) => r.text());
/** Waits until /metrics counts `n` accounts connected (at most 120 s); the time it took, null past the bound. */
async function allConnected(n: number): Promise<number | null> {
  const t0 = performance.now();
  while (performance.now() - t0 < 120_000) {
    const m = /tagw_broker_connections\{phase="connected"\} (\d+)/.exec(await metricsText());
    if (m && Number(m[1]) >= n) return Math.round(performance.now() - t0);
    await new Promise((r) => setTimeout(r, 250));
  }
  return null;
}
/** Each thread's V8 heap (MiB), in use or reserved, as the gateway's last 5 s snapshot has it. */
const heapMiB = (text: string, which: 'used' | 'total') => Object.fromEntries(Object.entries(threadHeaps(text, which))
  .map(([t, b]) => [t, Math.round(b / 1048576 * 10) / 10]));
/** The process's CPU, as % of one core, over `ms` with no requests (after 2 s of rest). */
async function idleCpu(ms: number): Promise<number> {
  await new Promise((r) => setTimeout(r, 2000));
  const c0 = cpuSeconds(pid());
  const w0 = performance.now();
  await new Promise((r) => setTimeout(r, ms));
  return Math.round(((cpuSeconds(pid()) - c0) / ((performance.now() - w0) / 1000)) * 1000) / 10;
}
for (const size of sizes) {
  const from = ids.length;
  const stamps: number[] = [];
  const t0 = performance.now();
  let next = from;
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next < size) {
      await createOne(next++);
      stamps.push(performance.now());
    }
  }));
  const n = stamps.length;
  const rate = (a: number, b: number) => (b > a ? Math.round(((b - a) / ((stamps[b - 1]! - (a > 0 ? stamps[a - 1]! : t0)) / 1000))) : 0);
  const k = Math.min(1000, n);
  const rssAfterBurstMiB = Math.round(rssBytes(pid()) / 1048576);
  // Settled: every account created connected, then idle (2 s of rest and the 5 s CPU sample: what
  // still runs per account per interval would grow with the size; the RSS then, as before), then
  // at rest until settleMs after the burst; the RSS and heaps read then.
  probePaused = true;
  const burstEnd = performance.now();
  const connectedAfterMs = await allConnected(ids.length);
  const idleCpuPercent = await idleCpu(5000);
  const rssAfterIdleSampleMiB = Math.round(rssBytes(pid()) / 1048576);
  const usedAtSample = heapMiB(await metricsText(), 'used');
  let settledAfterMs: number | null = null;
  while (performance.now() - burstEnd < settleMs) {
    const m = await metricsText();
    const used = heapMiB(m, 'used'), reserved = heapMiB(m, 'total');
    const shardHeaps = Object.entries(used).filter(([t]) => t.startsWith('shard'));
    if (shardHeaps.length > 0 && shardHeaps.every(([t, u]) => u <= usedAtSample[t]! * SETTLED_USED && reserved[t]! <= u * SETTLED_RESERVE)) {
      settledAfterMs = Math.round(performance.now() - burstEnd);
      break;
    }
    await new Promise((r) => setTimeout(r, 2000));
  }
  const rssMiB = Math.round(rssBytes(pid()) / 1048576);
  const rssPartsMiB = rssParts(pid());
  const metrics = await metricsText();
  probePaused = false;
  steps.push({ size, firstThousandPerSec: rate(0, k), lastThousandPerSec: rate(n - k, n), perSec: rate(0, n), rssAfterBurstMiB, connectedAfterMs, rssAfterIdleSampleMiB, settledAfterMs, rssMiB, rssPartsMiB, heapUsedMiB: heapMiB(metrics, 'used'), heapTotalMiB: heapMiB(metrics, 'total'), idleCpuPercent });
  console.error(`${size} accounts: ${JSON.stringify(steps[steps.length - 1])}`);
}
probing = false;
await probe;

// Idle: every account bound and connected, no requests (the last step's sample, longer).
const idleCpuPercent = await idleCpu(10_000);

// Cold start on the same DATA_DIR with every account bound: serving is the first /GetQuote the last
// account created answers (its connection started on demand if the background restore has not
// reached it); restored is when /metrics counts every account connected again.
gw.child.kill('SIGTERM');
await gw.exited;
gw = await startGateway();
const restartT0 = performance.now() - gw.listenMs;
const last = ids[ids.length - 1]!;
for (;;) {
  const r = await fetch(`${gw.url}/GetQuote?id=${last}&symbol=BTCUSD`, { headers: h });
  await r.arrayBuffer();
  if (r.status === 200) break;
  await new Promise((r) => setTimeout(r, 20));
}
const servingMs = performance.now() - restartT0;
const readyz = await fetch(`${gw.url}/readyz`).then((r) => r.status);
let restoredMs: number | null = null;
while (performance.now() - restartT0 < 300_000) {
  const m = /tagw_broker_connections\{phase="connected"\} (\d+)/.exec(await fetch(`${gw.url}/metrics`).then((r) => r.text()));
  if (m && Number(m[1]) >= ids.length) {
    restoredMs = performance.now() - restartT0;
    break;
  }
  await new Promise((r) => setTimeout(r, 250));
}
gw.child.kill('SIGTERM');
await gw.exited;
rmSync(dataDir, { recursive: true, force: true });

const first = steps[0]!;
const lastStep = steps[steps.length - 1]!;
const added = lastStep.size - first.size;
const perAccountKiB = (a: number, b: number) => (added > 0 ? Math.round(((b - a) * 1024) / added * 10) / 10 : null);
const rssPerAccountKiB = perAccountKiB(first.rssMiB, lastStep.rssMiB);
const q = quoteHist.summary();
const summary = {
  bench: 'scale',
  build: at.build,
  sizes,
  steps,
  // The cost of a creation must not grow with the accounts there: last thousand of the last step against the first thousand of the first.
  creationRateLastOverFirst: Math.round((lastStep.lastThousandPerSec / first.firstThousandPerSec) * 1000) / 1000,
  // Settled (every account connected, V8's heaps collected: steps[].settledAfterMs, null when they
  // were not within settleMs of the burst, and the reading is then at settleMs); right after
  // the burst and after the idle sample (~8 s), as read before, for comparison.
  settleMs,
  rssPerAccountKiB,
  rssPerAccountAfterBurstKiB: perAccountKiB(first.rssAfterBurstMiB, lastStep.rssAfterBurstMiB),
  rssPerAccountAfterIdleSampleKiB: perAccountKiB(first.rssAfterIdleSampleMiB, lastStep.rssAfterIdleSampleMiB),
  heapPerAccountKiB: Object.fromEntries(Object.keys(lastStep.heapUsedMiB).map((t) => [t, perAccountKiB(first.heapUsedMiB[t] ?? 0, lastStep.heapUsedMiB[t]!)])),
  idleCpuPercentOfCore: idleCpuPercent,
  // Idle CPU at the last size over the first: what runs per account per interval makes it grow.
  idleCpuLastOverFirst: steps[0]!.idleCpuPercent > 0 ? Math.round((lastStep.idleCpuPercent / steps[0]!.idleCpuPercent) * 100) / 100 : null,
  coldStart: { accounts: ids.length, listenMs: Math.round(gw.listenMs), servingMs: Math.round(servingMs), readyzAtServing: readyz, restoredMs: restoredMs === null ? null : Math.round(restoredMs) },
  getQuoteDuringRampUs: q,
  targets: { creationRateLastOverFirstMin: 0.8, rssPerAccountKiBMax: 12, coldStartServingMsMax: 10_000 },
};
console.log(JSON.stringify({ ...summary, machine: machineFacts() }));
