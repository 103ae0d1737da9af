// npm run bench -- http [--seconds N] [--orders N] [--shards N | --shards 1,2,4 | --shards curve]
//                       [--sequential [--pairs N]]
// Throughput of cached /GetQuote and /AccountSummary against a bare uWS route returning a
// constant (same process, same run), and /OrderSend round-trip latency (through the shard, the
// simulator and the durable idempotency record) beside the bare route's and beside a floor (a bare
// route with one worker round trip and two SQLite commits, bench/lib/orderFloor.ts). The same two
// routes through the opt-in pipelining port (HTTP_PIPELINING_PORT, src/http/pipeliningRelay.ts)
// against the main port: what answering pipelined requests costs its users. Load comes from
// separate client processes (raw keep-alive sockets, TCP_NODELAY, µs histograms).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import uws from 'uWebSockets.js';
import { parseConfig } from '../src/config.js';
import { startGateway } from '../src/gateway.js';
import { createLogger } from '../src/log.js';
import { availableParallelism, loadavg } from 'node:os';
import { mountOrderFloor } from './lib/orderFloor.js';
import { threadCpuWindow } from './lib/threadCpu.js';
import { machineIdleWindow } from './lib/machineIdle.js';
import { spawnLoad, type MergedLoad } from './lib/spawnLoad.js';
import { pairedRatios, runPair } from './lib/pairedBlocks.js';
import { watchHost } from './lib/hostFacts.js';
import { argNumber as arg } from './lib/args.js';

const machineFacts = watchHost();

const seconds = arg('seconds', 3);
const orders = arg('orders', 3000);
// --shards N: one full run with N shards (0: the default, cores - 1). --shards 1,2,4 or
// --shards curve (1 to the cores): concurrent orders against the floor only, one gateway per count.
const shardsArg = (() => {
  const i = process.argv.indexOf('--shards');
  return i > 0 ? process.argv[i + 1]! : '0';
})();
const curve = shardsArg === 'curve'
  ? Array.from({ length: availableParallelism() }, (_, i) => i + 1)
  : shardsArg.includes(',') ? shardsArg.split(',').map(Number) : null;
const shards = curve ? 0 : Number(shardsArg);
// --sequential: only the sequential idempotent orders and the floor, in --pairs alternating blocks of
// --orders each (after the same warm-up as the full run): a fast A/B of the p99 goal (issue 19 item 4).
const sequentialOnly = process.argv.includes('--sequential');
const pairCount = arg('pairs', 4);
const MK = 'bench-management-key-0123456789';

const dataDir = mkdtempSync(join(tmpdir(), 'tagw-bench-http-'));

// The baseline: a bare uWS route on its own port in this same process and event loop.
const QUOTE_LIKE = JSON.stringify({ symbol: 'EURUSD', bid: 1.08123, ask: 1.08131, time: '2026-11-22T10:00:00.000Z', timeMsc: 1763805600000 });
const bareApp = uws.App().get('/bare', (res) => {
  res.cork(() => res.writeHeader('content-type', 'application/json').end(QUOTE_LIKE));
});
// The floor under an idempotent order: a bare route making one worker round trip with two SQLite
// commits (bench/lib/orderFloor.ts), so the order's figures can be read against what this machine allows.
const floor = mountOrderFloor(bareApp, dataDir);
const barePort = await new Promise<number>((resolve) => bareApp.listen('127.0.0.1', 0, (s) => resolve(uws.us_socket_local_port(s as never))));

/** A gateway with `n` shards (0: the default) in this process, a key, and a way to bind accounts. */
async function benchGateway(n: number, dir: string) {
  const gw = await startGateway(parseConfig({ host: '127.0.0.1', port: 0, dataDir: dir, logLevel: 'error', managementKey: MK,
    // The per-key limiter runs on every request (its cost is in the figures) but never refuses: one key carries all the load here.
    keyRequestsPerSec: 10_000_000, keyOrdersPerSec: 10_000_000, pipeliningPort: 0, ...(n ? { shards: n } : {}) }), {
    log: createLogger('error'),
  });
  const api = async (method: string, path: string, headers: Record<string, string>, body?: unknown) => {
    const r = await fetch(`${gw.url}${path}`, { method, headers: { 'content-type': 'application/json', ...headers }, ...(body ? { body: JSON.stringify(body) } : {}) });
    const json = (await r.json()) as Record<string, unknown>;
    if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(json)}`);
    return json;
  };
  const key = (await api('POST', '/v1/keys', { authorization: `Bearer ${MK}` }, { label: 'bench' })).key as string;
  let logins = 0;
  const connect = async () => (await api('POST', '/ConnectEx', { 'x-api-key': key }, { user: `bench-${++logins}`, password: 'bench-pass', server: 'Sim-P5-Demo' })).id as string;
  /** `count` fresh accounts, each with a full demo balance. */
  const accounts = async (count: number) => {
    const ids: string[] = [];
    while (ids.length < count) ids.push(await connect());
    return ids;
  };
  return { gw, api, key, h: { 'x-api-key': key }, accounts };
}

// A demo account's margin holds about 280 open 0.01-lot BTCUSD positions (a rejection would skip
// the booking work, flatter the figures and count as an error): every phase that trades gets
// accounts of its own, at most PER_ACCOUNT orders each, warm-up included.
const PER_ACCOUNT = 100;
const SEQ_WARMUP_ORDERS = 2_000;
const throughput = (port: number, path: string, headers: Record<string, string> = {}, paths?: string[], maxSent?: number) =>
  spawnLoad({ port, path: paths?.[0] ?? path, ...(paths ? { paths } : {}), headers, connections: 32, durationMs: seconds * 1000, warmupMs: 500, ...(maxSent ? { maxSent } : {}) }, 2);
const sequential = (port: number, paths: string[], headers: Record<string, string>, n: number) =>
  spawnLoad({ port, path: paths[0]!, paths, headers, connections: 1, durationMs: 120_000, warmupMs: 300, maxRequests: n }, 1);

/**
 * Idempotent orders from 32 connections over 100 fresh accounts (issue 19 item 5), beside the
 * floor at the same concurrency, with each thread's CPU share over the orders' window: which
 * thread saturates. The 100 accounts take at most 2 x PER_ACCOUNT orders each: each of the two
 * load processes sends half of that, its warm-up included (a fixed allowance for the warm-up was
 * outrun by the build, whose warm-up sent more orders than a demo account's margin holds).
 */
async function concurrentOrders(g: Awaited<ReturnType<typeof benchGateway>>) {
  const accounts = await g.accounts(100);
  const floorIdle = machineIdleWindow();
  const floorRun = await throughput(barePort, '/floor');
  const idleDuringFloor = floorIdle();
  const window = threadCpuWindow();
  const ordersIdle = machineIdleWindow();
  const run = await throughput(g.gw.port, '', g.h, accounts.map((id) => `/OrderSend?id=${id}&symbol=BTCUSD&operation=Buy&volume=0.01&clientOrderId=c{seq}`),
    (accounts.length * 2 * PER_ACCOUNT) / 2);
  const idleDuringOrders = ordersIdle();
  const cpu = window();
  const status = (await g.api('GET', '/v1/status', { authorization: `Bearer ${MK}` })) as { shards?: { accounts: number }[] };
  // The machine's idle CPU share over each run (load processes' start and warm-up included): near 0,
  // the rate is bound by CPU; well above, by hand-offs between threads and processes.
  const machineIdle = { floor: idleDuringFloor, orders: idleDuringOrders };
  return { floorRun, run, cpu, machineIdle, accountsPerShard: status.shards?.map((s) => s.accounts) };
}

function cpuPerOrder(c: Awaited<ReturnType<typeof concurrentOrders>>) {
  const us = (s: number | undefined) => (s === undefined ? null : Math.round((s / c.run.sent) * 1e7) / 10);
  return { main: us(c.cpu.cpuSeconds.main), busiestOther: us(c.cpu.cpuSeconds.others[0]) };
}

if (curve) {
  const points = [];
  for (const n of curve) {
    const dir = mkdtempSync(join(tmpdir(), 'tagw-bench-http-'));
    const g = await benchGateway(n, dir);
    const c = await concurrentOrders(g);
    points.push({ shards: n, orderSendRps: c.run.rps, floorRps: c.floorRun.rps, overFloor: Math.round((c.run.rps / c.floorRun.rps) * 1000) / 1000,
      errors: c.run.errors + c.floorRun.errors, statuses: c.run.statuses, threadCpu: c.cpu, machineIdle: c.machineIdle, cpuUsPerOrder: cpuPerOrder(c), accountsPerShard: c.accountsPerShard });
    console.error(JSON.stringify(points.at(-1)));
    await g.gw.close();
    rmSync(dir, { recursive: true, force: true });
  }
  await floor.close();
  rmSync(dataDir, { recursive: true, force: true });
  console.log(JSON.stringify({ machine: machineFacts(), bench: 'http-shards', cores: availableParallelism(), points }));
  process.exit(0);
}

const g = await benchGateway(shards, dataDir);
const gw = g.gw;
const h = g.h;
// Each sequential phase's accounts also take its warm-up's orders (300 ms, up to ~2,000 at the
// build's pace): a small --orders gets enough accounts that they stay within 2 x PER_ACCOUNT.
const seqAccounts = Math.max(Math.ceil(orders / PER_ACCOUNT), Math.ceil((orders + SEQ_WARMUP_ORDERS) / (2 * PER_ACCOUNT)));
const coldAccounts = await g.accounts(seqAccounts);
// The warm-up after the cold orders (see orderSendWarm below): WARM_ROUNDS x orders more, not reported.
const WARM_ROUNDS = 2;
const warmAccounts = await g.accounts(Math.ceil((WARM_ROUNDS * orders + SEQ_WARMUP_ORDERS) / (2 * PER_ACCOUNT)));
const orderAccounts = await g.accounts(seqAccounts);
const plainAccounts = await g.accounts(seqAccounts);
const account = orderAccounts[0]!;
// Warm the quote cache path and the account connection.
await g.api('GET', `/GetQuote?id=${account}&symbol=BTCUSD`, h);
const orderPaths = (ids: string[], tag: string) => ids.map((id) => `/OrderSend?id=${id}&symbol=BTCUSD&operation=Buy&volume=0.01&clientOrderId=${tag}{seq}`);

if (sequentialOnly) {
  const loadBefore = loadavg();
  // Every block's accounts made first: no account is created between measured blocks.
  const blockAccounts = [orderAccounts];
  while (blockAccounts.length < pairCount) blockAccounts.push(await g.accounts(seqAccounts));
  const floorBlock = () => sequential(barePort, ['/floor'], {}, orders);
  await floorBlock(); // the floor's warm-up, not reported
  // The same warm-up as the full run (see orderSendCold and orderSendWarm below), not reported.
  const cold = await sequential(gw.port, orderPaths(coldAccounts, 'w'), h, orders);
  const warm = await sequential(gw.port, orderPaths(warmAccounts, 'v'), h, WARM_ROUNDS * orders);
  const pairs: { floor: MergedLoad; orders: MergedLoad }[] = [];
  for (let i = 0; i < pairCount; i++) {
    const orderBlock = () => sequential(gw.port, orderPaths(blockAccounts[i]!, `b${i}-`), h, orders);
    const { base, other } = await runPair(i, floorBlock, orderBlock);
    pairs.push({ floor: base, orders: other });
    console.error(JSON.stringify({ pair: i, floorUs: pairs[i]!.floor.latencyUs, orderSendUs: pairs[i]!.orders.latencyUs }));
  }
  const runs = [cold, warm, ...pairs.flatMap((p) => [p.floor, p.orders])];
  await gw.close();
  await floor.close();
  rmSync(dataDir, { recursive: true, force: true });
  console.log(JSON.stringify({ machine: machineFacts(), bench: 'http-sequential', ordersPerBlock: orders, ...pairedRatios(pairs),
    errors: runs.reduce((n, r) => n + r.errors, 0), loadavg: { before: loadBefore, after: loadavg() } }));
  process.exit(0);
}


const results: Record<string, MergedLoad> = {};
results.bare = await throughput(barePort, '/bare');
/** This process's CPU time (main thread and shards; the load clients are other processes) per request of `run`, in µs: steadier than req/s on a loaded machine. */
const cpuPerRequest: Record<string, number> = {};
async function withCpu(name: string, run: () => Promise<MergedLoad>): Promise<MergedLoad> {
  const start = process.cpuUsage();
  const r = await run();
  const used = process.cpuUsage(start);
  cpuPerRequest[name] = Math.round(((used.user + used.system) / Math.max(1, r.requests)) * 10) / 10;
  return r;
}
results.getQuote = await withCpu('getQuote', () => throughput(gw.port, `/GetQuote?id=${account}&symbol=BTCUSD`, h));
results.accountSummary = await withCpu('accountSummary', () => throughput(gw.port, `/AccountSummary?id=${account}`, h));
results.getQuotePipeliningPort = await withCpu('getQuotePipeliningPort', () => throughput(gw.pipeliningPort!, `/GetQuote?id=${account}&symbol=BTCUSD`, h));
results.accountSummaryPipeliningPort = await withCpu('accountSummaryPipeliningPort', () => throughput(gw.pipeliningPort!, `/AccountSummary?id=${account}`, h));
results.bareSeq = await sequential(barePort, ['/bare'], {}, orders);
results.floorSeq = await sequential(barePort, ['/floor'], {}, orders);
// The first orders after the start run while V8 still compiles the order path: its TurboFan jobs
// hold a core for 2-5 ms at a time on background threads, and a woken gateway thread queued behind
// one waits that long (traced: half the slowest 1% of these orders). Measured apart (orderSendCold);
// the order's figures against the floor are those of later orders, the path compiled, as the
// floor's tiny path is from its first requests. 3,000 orders were not enough for that: V8 tiers a
// small function up to TurboFan after thousands of calls, so code run once an order (and code run per
// tick or per checkpoint) was still being compiled in the 3,000 after them: 22-30 jobs, V8's compiler
// threads 5.4-6.5% of a CPU, the main cause of 4-13 of the slowest 30 orders (perf sched, four runs);
// after 9,000: 1.1-3.4%, 0-1 of the 30 (three runs). So WARM_ROUNDS x orders more go first, unreported.
results.orderSendCold = await sequential(gw.port, orderPaths(coldAccounts, 'w'), h, orders);
results.orderSendWarm = await sequential(gw.port, orderPaths(warmAccounts, 'v'), h, WARM_ROUNDS * orders);
results.orderSend = await sequential(gw.port, orderPaths(orderAccounts, 'b'), h, orders);
// The same round trip taken apart: the HTTP edge alone (cached quote, no shard), one shard hop
// (account summary), and an order without an idempotency record.
results.getQuoteSeq = await sequential(gw.port, [`/GetQuote?id=${account}&symbol=BTCUSD`], h, orders);
results.accountSummarySeq = await sequential(gw.port, [`/AccountSummary?id=${account}`], h, orders);
// Throughput at the same concurrency: idempotent orders from 32 connections against the floor's.
const conc = await concurrentOrders(g);
results.floorConcurrent = conc.floorRun;
results.orderSendConcurrent = conc.run;
results.orderSendPlain = await sequential(gw.port, plainAccounts.map((id) => `/OrderSend?id=${id}&symbol=BTCUSD&operation=Sell&volume=0.01`), h, orders);

for (const [name, r] of Object.entries(results)) {
  console.error(`${name.padEnd(15)} ${String(r.rps).padStart(7)} req/s  p50 ${r.latencyUs.p50}µs p99 ${r.latencyUs.p99}µs p99.9 ${r.latencyUs.p999}µs  statuses ${JSON.stringify(r.statuses)}`);
}
const ratio = (a: number, b: number) => Math.round((a / b) * 1000) / 1000;
const summary = {
  bench: 'http',
  bareRps: results.bare.rps,
  getQuoteRps: results.getQuote.rps,
  accountSummaryRps: results.accountSummary.rps,
  getQuoteRatio: ratio(results.getQuote.rps, results.bare.rps),
  accountSummaryRatio: ratio(results.accountSummary.rps, results.bare.rps),
  // The pipelining port's throughput over the main port's, same routes, same 32 connections.
  pipeliningPort: {
    getQuoteRps: results.getQuotePipeliningPort.rps, accountSummaryRps: results.accountSummaryPipeliningPort.rps,
    getQuoteVsMain: ratio(results.getQuotePipeliningPort.rps, results.getQuote.rps),
    accountSummaryVsMain: ratio(results.accountSummaryPipeliningPort.rps, results.accountSummary.rps),
    // The gateway's CPU per request (µs, warm-up included) on each port, and their ratio.
    cpuUsPerRequest: cpuPerRequest,
    getQuoteCpuVsMain: ratio(cpuPerRequest.getQuotePipeliningPort!, cpuPerRequest.getQuote!),
  },
  orderSendUs: results.orderSend.latencyUs,
  // The same orders, the first after the start (V8 compiling the order path meanwhile, see above).
  orderSendColdUs: results.orderSendCold.latencyUs,
  // Orders sent between the cold ones and the measured ones (V8's warm-up, above; its errors count below).
  orderSendWarmupOrders: results.orderSendWarm.sent,
  bareSeqUs: results.bareSeq.latencyUs,
  orderSendP50Ratio: ratio(results.orderSend.latencyUs.p50, results.bareSeq.latencyUs.p50),
  // Bare route + worker round trip + two SQLite commits: no gateway logic at all.
  orderFloorUs: results.floorSeq.latencyUs,
  orderSendOverFloor: { p50: ratio(results.orderSend.latencyUs.p50, results.floorSeq.latencyUs.p50), p99: ratio(results.orderSend.latencyUs.p99, results.floorSeq.latencyUs.p99) },
  // p50 round trips, one request at a time: where an order's time goes.
  sequentialP50Us: {
    bare: results.bareSeq.latencyUs.p50, orderFloor: results.floorSeq.latencyUs.p50, getQuoteCached: results.getQuoteSeq.latencyUs.p50,
    accountSummaryShardHop: results.accountSummarySeq.latencyUs.p50,
    orderSendNoIdempotency: results.orderSendPlain.latencyUs.p50, orderSendIdempotent: results.orderSend.latencyUs.p50,
  },
  // Idempotent orders from 32 connections over 100 accounts against the floor at the same concurrency
  // (the floor is one worker thread; the gateway has SHARDS of them: set --shards to draw the curve).
  concurrentOrders: {
    shards: shards || 'default', orderSendRps: results.orderSendConcurrent.rps, floorRps: results.floorConcurrent.rps,
    overFloor: ratio(results.orderSendConcurrent.rps, results.floorConcurrent.rps), orderSendUs: results.orderSendConcurrent.latencyUs,
    threadCpu: conc.cpu, machineIdle: conc.machineIdle, accountsPerShard: conc.accountsPerShard,
    // CPU per order of the main thread and of the busiest other (the shard with one shard), over
    // every order of the window (warm-up included): the figure a loaded machine changes least.
    cpuUsPerOrder: cpuPerOrder(conc),
  },
  // Any error (a refused or failed request, a rejected order) invalidates the run's figures.
  errors: Object.values(results).reduce((n, r) => n + r.errors, 0),
  errorsBy: Object.fromEntries(Object.entries(results).filter(([, r]) => r.errors > 0).map(([k, r]) => [k, r.statuses])),
  targets: {
    getQuoteRatioMin: 0.6, orderSendP50MaxUs: 300, orderSendP99MaxUs: 1500,
    met: results.getQuote.rps / results.bare.rps >= 0.6 && results.orderSend.latencyUs.p50 <= 300 && results.orderSend.latencyUs.p99 <= 1500,
  },
  // Issue 19: idempotent orders within 2x the floor at p50 and p99, concurrent orders at least half
  // the floor's throughput; only a run without errors counts.
  targetsOverFloor: (() => {
    const p50 = results.orderSend.latencyUs.p50 / results.floorSeq.latencyUs.p50;
    const p99 = results.orderSend.latencyUs.p99 / results.floorSeq.latencyUs.p99;
    const conc = results.orderSendConcurrent.rps / results.floorConcurrent.rps;
    const errors = Object.values(results).reduce((n, r) => n + r.errors, 0);
    return { p50Max: 2, p99Max: 2, concurrentMin: 0.5, met: errors === 0 && p50 <= 2 && p99 <= 2 && conc >= 0.5 };
  })(),
};
await gw.close();
await floor.close();
rmSync(dataDir, { recursive: true, force: true });
console.log(JSON.stringify({ ...summary, machine: machineFacts() }));
process.exit(0);
