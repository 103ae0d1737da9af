// npm run bench -- soak [--minutes 10] [--warmup-minutes 2] [--accounts 20] [--shards 2] [--no-snapshots] [--keep-snapshots] [--source]
// What an operator's gateway does after days: does its memory stay flat under a bot's churn? The
// gateway runs as its own process (as `npm start` runs it); for the run's minutes, loops as bots and
// people use it: idempotent orders opened and closed (every tenth sent again: a replay), /v1/stream
// sockets opened, read and closed, then resumed from their position; /ws gateway sessions joined,
// read and left; API keys created, used once and revoked; accounts (seats) bound, traded once,
// streamed and deleted, as customers come and go; /GetQuote polled. Every minute each
// thread's V8 heap after a full collection (forced through the inspector: a heap read without one
// holds garbage of unknown age and moves by tens of MiB) and the process's RSS; the slope of the
// heaps after the warm-up is the growth per hour, and per 10,000 operations. The operations' own records (idempotency
// records, journal, audit) are in SQLite, not the heaps; anything that grows there with the
// operations is held for each of them: a leak, unless bounded (say what bounds it).
import { mkdtempSync, rmSync } from 'node:fs';
import { diff, summarize } from './lib/heapDiff.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket from 'ws';
import { TagwClient } from '../src/client/index.js';
import { watchHost } from './lib/hostFacts.js';
import { gatewayEntry, rssBytes, spawnGateway } from './lib/gatewayProcess.js';
import { InspectorHeaps, inspectorUrl } from './lib/inspectorHeaps.js';
import { argText as arg } from './lib/args.js';

const machineFacts = watchHost();
const minutes = Number(arg('minutes', '10'));
const warmupMinutes = Number(arg('warmup-minutes', '2'));
const accountCount = Number(arg('accounts', '20'));
const shards = arg('shards', '2');
const MK = 'bench-soak-management-key-0123456789';
const SAMPLE_MS = 60_000;
const snapshots = !process.argv.includes('--no-snapshots');
const SNAPSHOT_THREADS = ['main', 'worker.js#1'];

const dataDir = mkdtempSync(join(tmpdir(), 'tagw-bench-soak-'));
const at = gatewayEntry(import.meta.url);
const gw = await spawnGateway(at, {
  PORT: '0', HOST: '127.0.0.1', DATA_DIR: dataDir, GATEWAY_MANAGEMENT_KEY: MK, SHARDS: shards,
  KEY_REQUESTS_PER_SEC: '10000000', KEY_ORDERS_PER_SEC: '10000000', SIM_MARKET_HOURS: 'always',
}, ['--inspect=127.0.0.1:0']);
const inspector = await InspectorHeaps.connect(inspectorUrl(gw.head) ?? (() => { throw new Error(`no inspector address in: ${gw.head}`); })());
const pid = gw.child.pid!;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function call(method: string, path: string, headers: Record<string, string>, body?: unknown): Promise<Record<string, any>> {
  const r = await fetch(`${gw.url}${path}`, { method, headers: { 'content-type': 'application/json', ...headers }, ...(body ? { body: JSON.stringify(body) } : {}) });
  const text = await r.text();
  if (r.status >= 300) throw new Error(`${method} ${path.replace(/apiKey=[^&]+/, 'apiKey=…')}: ${r.status} ${text.slice(0, 300)}`);
  return text ? JSON.parse(text) : {};
}
const mgmt = { authorization: `Bearer ${MK}` };
const progress = (...a: unknown[]) => { if (process.env.SOAK_PROGRESS) console.error(...a); };
progress('soak: gateway at', gw.url);
const apiKey = (await call('POST', '/v1/keys', mgmt, { label: 'bench-soak' })).key as string;
const h = { 'x-api-key': apiKey };
const client = new TagwClient({ baseUrl: gw.url, apiKey, WebSocket: WebSocket as never });

// Accounts: classic ones (/ConnectEx) for orders and streams, gateway ones for /ws sessions.
const accounts: string[] = [];
for (let i = 0; i < accountCount; i++) accounts.push((await call('POST', '/ConnectEx', h, { user: `soak-${i}`, password: 'pw', server: 'Sim-P5-Demo' })).id as string);
const brokerAccounts: string[] = [];
for (let i = 0; i < 4; i++) brokerAccounts.push((await call('POST', '/v1/broker-accounts', mgmt, { platform: 'P4', user: `soakgw-${i}`, password: 'pw', server: 'Sim-P4-Demo' })).id as string);
for (const id of accounts) while ((await fetch(`${gw.url}/GetQuote?id=${id}&symbol=BTCUSD`, { headers: h })).status !== 200) await sleep(100);

progress('soak: accounts connected; running');
const ops = { orders: 0, replays: 0, closes: 0, streams: 0, resumes: 0, sessions: 0, keys: 0, seats: 0, quotes: 0, errors: 0 };
const errorSamples: string[] = [];
const endAt = performance.now() + minutes * 60_000;
const running = () => performance.now() < endAt;
const pick = <T>(xs: T[]) => xs[Math.floor(Math.random() * xs.length)]!;
const fail = (what: string, e: unknown) => {
  ops.errors++;
  if (errorSamples.length < 10) errorSamples.push(`${what}: ${(e as Error).message}`);
};

/** Reads `n` frames of `it`, or gives up after `ms` (then `close` ends the iteration). */
async function read(it: AsyncIterable<unknown>, n: number, ms: number, close: () => void): Promise<number> {
  const timer = setTimeout(close, ms);
  let got = 0;
  try {
    for await (const f of it) {
      void f;
      if (++got >= n) break;
    }
  } finally {
    clearTimeout(timer);
  }
  return got;
}

/** Runs `step` over and over until the run ends, `pauseMs` apart; a failure is counted and sampled
 *  (`fail`), then waited out for `failPauseMs` instead. */
async function repeat(what: string, pauseMs: number, failPauseMs: number, step: () => Promise<void>): Promise<void> {
  while (running()) {
    try {
      await step();
    } catch (e) {
      fail(what, e);
      await sleep(failPauseMs);
      continue;
    }
    if (pauseMs > 0) await sleep(pauseMs);
  }
}

let seq = 0;
const orders = () => repeat('order', 0, 100, async () => {
  const id = pick(accounts);
  const coid = `soak-${++seq}`;
  const path = `/OrderSend?id=${id}&symbol=BTCUSD&operation=Buy&volume=0.01&clientOrderId=${coid}`;
  const sent = await call('GET', path, h);
  ops.orders++;
  if (seq % 10 === 0) {
    await call('GET', path, h);
    ops.replays++;
  }
  await call('GET', `/OrderClose?id=${id}&ticket=${sent.ticket}&clientOrderId=${coid}-c`, h);
  ops.closes++;
});

/** A socket read until 5 frames came, then closed; resumed from where it stopped. */
const streams = () => repeat('stream', 0, 200, async () => {
  const id = pick(accounts);
  let since: string | undefined;
  for (const resume of [false, true]) {
    const s = client.stream(id, { symbols: ['BTCUSD'], ...(resume && since ? { since } : {}) });
    if ((await read(s, 5, 10_000, () => s.close())) < 5) throw new Error('a stream gave fewer than 5 frames in 10 s');
    since = s.since;
    s.close();
    if (resume) ops.resumes++;
    else ops.streams++;
  }
});

const sessions = () => repeat('session', 50, 50, async () => {
  const session = await client.connect(pick(brokerAccounts));
  const sock = session.socket();
  await session.call('Subscribe', { symbol: 'BTCUSD' });
  const got = await read(sock, 1, 10_000, () => sock.close());
  sock.close();
  if (got < 1) throw new Error('a /ws socket got no frame in 10 s');
  ops.sessions++;
});

const keys = () => repeat('key', 100, 100, async () => {
  const k = await call('POST', '/v1/keys', mgmt, { label: `soak-${ops.keys}` });
  await call('GET', '/v1/whoami', { 'x-api-key': k.key as string });
  await call('DELETE', `/v1/keys/${k.id}`, mgmt);
  ops.keys++;
});

/** An account bound, traded, streamed, its position closed and the seat deleted: what it held must go with it. */
let seatSeq = 0;
const seats = () => repeat('seat', 200, 200, async () => {
  const n = ++seatSeq;
  const id = (await call('POST', '/ConnectEx', h, { user: `soak-seat-${n}`, password: 'pw', server: 'Sim-P5-Demo' })).id as string;
  const sent = await call('GET', `/OrderSend?id=${id}&symbol=BTCUSD&operation=Buy&volume=0.01&clientOrderId=seat-${n}`, h);
  const s = client.stream(id, { symbols: ['BTCUSD'] });
  await read(s, 3, 10_000, () => s.close());
  s.close();
  // Closed before the seat goes: a simulated account with a position open stays in its shard's
  // memory, its stops and stop-out evaluated on ticks with nobody logged in, as a broker's are
  // (docs/simulator.md); one with nothing open is let go.
  await call('GET', `/OrderClose?id=${id}&ticket=${sent.ticket}&clientOrderId=seat-${n}-c`, h);
  await call('DELETE', `/v1/seats/${id}`, mgmt);
  ops.seats++;
});

const quotes = () => repeat('quote', 5, 5, async () => {
  await call('GET', `/GetQuote?id=${pick(accounts)}&symbol=BTCUSD`, h);
  ops.quotes++;
});

interface Sample { atMin: number; heaps: Record<string, number>; rss: number; ops: number }
const samples: Sample[] = [];
const t0 = performance.now();
const total = () => ops.orders + ops.replays + ops.closes + ops.streams + ops.resumes + ops.sessions + ops.keys + ops.seats + ops.quotes;
async function sample(): Promise<void> {
  const heaps = Object.fromEntries((await inspector.heaps()).map((h) => [h.thread, h.usedBytes]));
  samples.push({ atMin: (performance.now() - t0) / 60_000, heaps, rss: rssBytes(pid), ops: total() });
  progress(JSON.stringify({ ...samples.at(-1), ops }));
}
const snapDir = mkdtempSync(join(tmpdir(), 'tagw-bench-soak-heaps-'));
/** Snapshot files by label and thread, with the operations done when they were taken. */
const snaps: { label: string; ops: number; files: Record<string, string> }[] = [];
async function snapshotAll(label: string): Promise<void> {
  const files: Record<string, string> = {};
  for (const t of SNAPSHOT_THREADS) {
    files[t] = join(snapDir, `${label}-${t}.heapsnapshot`);
    await inspector.snapshot(t, files[t]);
  }
  snaps.push({ label, ops: total(), files });
  progress(`soak: ${label} heap snapshots taken`);
}
async function sampler(): Promise<void> {
  await sample();
  while (running()) {
    await sleep(Math.min(SAMPLE_MS, endAt - performance.now()));
    try {
      await sample();
      if (snapshots && snaps.length === 0 && samples.at(-1)!.atMin >= warmupMinutes - 0.01 && running()) await snapshotAll('warm');
    } catch (e) {
      fail('heaps', e);
    }
  }
  if (snapshots && snaps.length === 1) await snapshotAll('end');
}

await Promise.all([orders(), orders(), streams(), sessions(), keys(), seats(), quotes(), sampler()]);
client.close();
inspector.close();

// After the warm-up: each thread's collected heap, its least-squares slope per minute.
const measured = samples.filter((x) => x.atMin >= warmupMinutes - 0.01);
const slope = (pts: [number, number][]) => {
  const n = pts.length;
  const mx = pts.reduce((a, p) => a + p[0], 0) / n, my = pts.reduce((a, p) => a + p[1], 0) / n;
  const sxx = pts.reduce((a, p) => a + (p[0] - mx) ** 2, 0);
  return sxx === 0 ? 0 : pts.reduce((a, p) => a + (p[0] - mx) * (p[1] - my), 0) / sxx;
};
const MiB = 1048576;
const r1 = (x: number) => Math.round(x * 10) / 10;
const first = measured[0]!, last = measured.at(-1)!;
const opsPerMin = last.atMin > first.atMin ? (last.ops - first.ops) / (last.atMin - first.atMin) : 0;
const growth = (pts: [number, number][]) => {
  const perMin = slope(pts);
  return { firstMiB: r1(pts[0]![1] / MiB), lastMiB: r1(pts.at(-1)![1] / MiB), perHourMiB: r1((perMin * 60) / MiB), per10kOpsKiB: r1(opsPerMin > 0 ? (perMin / opsPerMin) * 10_000 / 1024 : 0) };
};
const heapsAfterGc = Object.fromEntries(Object.keys(last.heaps).map((t) => [t, growth(measured.map((x) => [x.atMin, x.heaps[t] ?? 0]))]));
// What grew between the two snapshots, per 10,000 operations (read after the gateway's last sample).
const grew: Record<string, { what: string; bytes: number; count: number }[]> = {};
if (snaps.length === 2) {
  const per10k = (snaps[1]!.ops - snaps[0]!.ops) / 10_000;
  for (const t of SNAPSHOT_THREADS) {
    const rows = diff(summarize(snaps[0]!.files[t]!).byWhat, summarize(snaps[1]!.files[t]!).byWhat, per10k, 1024);
    grew[t] = rows.slice(0, 8).map((r) => ({ ...r, what: r.what.slice(0, 160), count: Math.round(r.count * 10) / 10 }));
    progress(`\n${t}: grew per 10k operations`);
    for (const r of rows.slice(0, 25)) progress(`${String(r.bytes).padStart(9)} B ${r.count.toFixed(1).padStart(8)}x  ${r.what.slice(0, 200)}`);
  }
}
if (process.argv.includes('--keep-snapshots')) console.error(`soak: heap snapshots kept in ${snapDir}`);
else rmSync(snapDir, { recursive: true, force: true });

const result = {
  bench: 'soak', minutes, warmupMinutes, accounts: accountCount, shards: Number(shards), build: at.build,
  ops, opsPerMin: Math.round(opsPerMin),
  heapsAfterGc,
  rss: growth(measured.map((x) => [x.atMin, x.rss])),
  grewPer10kOps: grew,
  errorSamples,
  machine: machineFacts(),
};
gw.child.kill('SIGTERM');
await gw.exited;
rmSync(dataDir, { recursive: true, force: true });
console.log(JSON.stringify(result));
