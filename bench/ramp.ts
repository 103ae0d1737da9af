// npm run bench -- ramp [--accounts 3000] [--concurrency 16] [--rounds 2] [--idle-ms 3000]
//   [--cached 1] [--every-ms 5] [--b 'NAME=value,...'] [--a 'NAME=value,...'] [--shards N] [--bare 0]
//   [--creator-nice 19] [--perf DIR [--perf-stat EVENTS]] [--cpu-prof DIR]
// A noisy neighbour (docs/scale.md, "The main thread during a creation ramp"): one customer creates
// accounts through /ConnectEx, `--concurrency` at a time (a refusal with retry-after is waited out
// and sent again, as a well-behaved bulk creator does); another customer's /GetQuote, one at a time
// every 5 ms from a process of its own, is measured idle (before the ramp) and during it. Two
// gateway configurations, A (`--a`, default: none) and B (`--b`), each on a fresh DATA_DIR, run in
// alternating order (A B, B A, ...), `--rounds` pairs; per run: the quote's p50/p90/p99 idle and
// during the ramp, the creation rate, refusals, and where the CPU went over the ramp: each of the
// gateway's busy threads' CPU time and run-queue wait (/proc/PID/task/*/schedstat), the probe's and
// the bench's (the creator) own; and a bare uWS server's latency beside the quote's (the machine's share).
import { fork, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { setPriority, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Histogram, type HistogramData } from './lib/histogram.js';
import { gatewayEntry, spawnGateway } from './lib/gatewayProcess.js';
import { watchHost } from './lib/hostFacts.js';
import { argNumber, argText } from './lib/args.js';
import { loaderArgs, moduleBeside } from './lib/launch.js';
import type { ProbeJob, ProbeMessage, ProbeResult } from './lib/quoteProbe.js';

const machineFacts = watchHost();
const accountsPerRun = argNumber('accounts', 3000);
const concurrency = argNumber('concurrency', 16);
const rounds = argNumber('rounds', 2);
const idleMs = argNumber('idle-ms', 3000);
const everyMs = argNumber('every-ms', 5);
const cached = argText('cached', '1') === '0' ? '0' : '1';
const shards = argText('shards', '');
const envOf = (s: string): Record<string, string> => Object.fromEntries(s.split(',').filter(Boolean).map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]));
const configs = { A: envOf(argText('a', '')), B: envOf(argText('b', '')) };
const MK = 'bench-ramp-management-key-0123456789';
const at = gatewayEntry(import.meta.url);
const PROBE = moduleBeside('./lib/quoteProbe.ts', import.meta.url);
const BARE = moduleBeside('./lib/bareServer.ts', import.meta.url);
// The control: a bare server of its own, asked by the probe in turn with the gateway (--bare 0: not).
const withBare = argText('bare', '1') !== '0';
// --creator-nice 19: the bench's creator (its main thread) yields the CPU to everything else, as a
// creator on another machine would take none of this one's (the probe and bare server are forked
// before, at the priority the bench started with).
const creatorNice = argNumber('creator-nice', 0);
// --perf DIR: `perf sched record` of the whole machine over each ramp, to DIR/<config>-<round>.data
// (read with `perf sched timehist -i FILE -t <gatewayPid>`: each wake-up's scheduling delay).
const perfDir = argText('perf', '');
// --perf-stat EVENTS (with --perf DIR): `perf stat -e EVENTS` of the gateway's main thread over each ramp instead.
const perfStat = argText('perf-stat', '');
// --cpu-prof DIR: each gateway writes V8 CPU profiles to DIR/<config>-<round>/ (its main thread's, and
// the WAL checkpointer thread's; the shard's is not written: its thread is ended, not exited).
const cpuProfDir = argText('cpu-prof', '');

interface ThreadTimes { comm: string; runNs: number; waitNs: number }
function threads(pid: number): Map<string, ThreadTimes> {
  const out = new Map<string, ThreadTimes>();
  for (const t of readdirSync(`/proc/${pid}/task`)) {
    try {
      const [run, wait] = readFileSync(`/proc/${pid}/task/${t}/schedstat`, 'utf8').split(' ').map(Number);
      out.set(t, { comm: readFileSync(`/proc/${pid}/task/${t}/comm`, 'utf8').trim(), runNs: run!, waitNs: wait! });
    } catch {
      // gone meanwhile
    }
  }
  return out;
}
/** Per thread busier than 2 % over the window: CPU and run-queue wait as % of the window's wall time. */
function window(pid: number, name: string) {
  const before = threads(pid);
  const t0 = performance.now();
  return () => {
    const wallNs = (performance.now() - t0) * 1e6;
    const pct = (ns: number) => Math.round((ns / wallNs) * 1000) / 10;
    return [...threads(pid)].map(([tid, a]) => {
      const b = before.get(tid) ?? { runNs: 0, waitNs: 0 };
      return { thread: `${name}${tid === String(pid) ? ':main' : `:${a.comm}:${tid}`}`, cpuPct: pct(a.runNs - b.runNs), runQueuePct: pct(a.waitNs - b.waitNs) };
    }).filter((x) => x.cpuPct >= 2).sort((x, y) => y.cpuPct - x.cpuPct);
  };
}

const pcts = (x: Histogram) => ({ n: x.count, p50: x.percentile(50), p90: x.percentile(90), p99: x.percentile(99), p999: x.percentile(99.9), max: x.max });

async function call(base: string, method: string, path: string, headers: Record<string, string>, body?: unknown) {
  const r = await fetch(`${base}${path}`, { method, headers: { 'content-type': 'application/json', ...headers }, ...(body ? { body: JSON.stringify(body) } : {}) });
  return { status: r.status, retryAfter: r.headers.get('retry-after'), json: (await r.json()) as Record<string, unknown> };
}

async function runOnce(label: 'A' | 'B', round: number, accounts = accountsPerRun) {
  const dataDir = mkdtempSync(join(tmpdir(), 'tagw-bench-ramp-'));
  const gw = await spawnGateway(at, {
    PORT: '0', HOST: '127.0.0.1', DATA_DIR: dataDir, GATEWAY_MANAGEMENT_KEY: MK,
    KEY_REQUESTS_PER_SEC: '10000000', KEY_ORDERS_PER_SEC: '10000000', ...(shards ? { SHARDS: shards } : {}), ...configs[label],
  }, cpuProfDir ? ['--cpu-prof', `--cpu-prof-dir=${join(cpuProfDir, `${label}-${round}`)}`] : []).catch((err: unknown) => {
    rmSync(dataDir, { recursive: true, force: true }); // a gateway that never listened leaves no directory behind
    throw err;
  });
  try {
    const mk = { authorization: `Bearer ${MK}` };
    const keyOf = async (label: string) => (await call(gw.url, 'POST', '/v1/keys', mk, { label })).json.key as string;
    // Two customers: the trader (its own key, its own account) and the bulk creator.
    const traderKey = await keyOf('trader');
    const creatorKey = await keyOf('creator');
    const trader = await call(gw.url, 'POST', '/ConnectEx', { 'x-api-key': traderKey }, { user: 'trader-0', password: 'pw', server: 'Sim-P5-Demo' });
    const probe = fork(PROBE, [], { execArgv: loaderArgs(PROBE), stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    const result = new Promise<ProbeResult>((res, rej) => {
      probe.once('message', (m) => res(m as ProbeResult));
      probe.once('exit', (code) => code !== 0 && rej(new Error(`probe exited ${code}`)));
    });
    const bare = withBare ? fork(BARE, [], { execArgv: loaderArgs(BARE), stdio: ['ignore', 'inherit', 'inherit', 'ipc'] }) : undefined;
    const barePort = bare ? await new Promise<number>((res) => bare.once('message', (m) => res((m as { port: number }).port))) : undefined;
    const job: ProbeJob = { url: gw.url, key: traderKey, id: trader.json.id as string, symbol: 'BTCUSD', cached, everyMs, ...(barePort ? { bare: `http://127.0.0.1:${barePort}` } : {}) };
    probe.send(job);
    const say = (m: ProbeMessage) => probe.send(m);
    await new Promise((r) => setTimeout(r, 500));
    say({ phase: 'idle' });
    await new Promise((r) => setTimeout(r, idleMs));

    const h = { 'x-api-key': creatorKey };
    const refused: Record<string, number> = {};
    const waits = new Histogram(600_000);
    let next = 0;
    const t0 = performance.now();
    const cpu = [window(gw.child.pid!, 'gateway'), window(probe.pid!, 'probe'), window(process.pid, 'creator'), ...(bare ? [window(bare.pid!, 'bare')] : [])];
    if (creatorNice) setPriority(creatorNice);
    const perf = perfDir ? spawn('perf', perfStat
      // the gateway's main thread only (its tid is its pid): e.g. SQLite's busy-handler sleeps
      ? ['stat', '-e', perfStat, '-t', String(gw.child.pid), '-o', join(perfDir, `${label}-${round}.stat`)]
      : ['sched', 'record', '-a', '-o', join(perfDir, `${label}-${round}.data`)], { stdio: 'ignore' }) : undefined;
    if (perf) await new Promise((r) => setTimeout(r, 300));
    say({ phase: 'ramp' });
    await Promise.all(Array.from({ length: concurrency }, async () => {
      while (next < accounts) {
        const n = next++;
        for (;;) {
          const ts = performance.now();
          const r = await call(gw.url, 'POST', '/ConnectEx', h, { user: `ramp-${n}`, password: 'pw', server: 'Sim-P5-Demo' });
          waits.record((performance.now() - ts) * 1000);
          if (r.status === 200) break;
          const code = `${r.status} ${String(r.json.error)}`;
          refused[code] = (refused[code] ?? 0) + 1;
          if (!r.retryAfter) throw new Error(`/ConnectEx: ${code} ${JSON.stringify(r.json)}`);
          await new Promise((res) => setTimeout(res, Number(r.retryAfter) * 1000));
        }
      }
    }));
    const rampMs = performance.now() - t0;
    if (perf) {
      perf.kill('SIGINT');
      await new Promise((r) => perf.once('exit', r));
    }
    if (creatorNice) setPriority(0);
    const threadsOut = cpu.flatMap((f) => f());
    say({ phase: 'after' });
    say({ stop: true });
    const hists = await result;
    bare?.disconnect();
    const sum = (d: HistogramData | undefined) => {
      if (!d) return null;
      const x = new Histogram();
      x.merge(d);
      return pcts(x);
    };
    const ms = (us: number) => Math.round(us / 100) / 10;
    return {
      config: label, round, env: configs[label], gatewayPid: gw.child.pid, probePid: probe.pid,
      creationsPerSec: Math.round(accounts / (rampMs / 1000)), rampMs: Math.round(rampMs), refused,
      // A creation's round trip as the creator sees it (ms), refusals and their waits apart.
      creationMs: { p50: ms(waits.percentile(50)), p99: ms(waits.percentile(99)), max: ms(waits.max) },
      quoteIdleUs: sum(hists.idle), quoteRampUs: sum(hists.ramp), bareIdleUs: sum(hists['bare:idle']), bareRampUs: sum(hists['bare:ramp']),
      hist: { idle: hists.idle, ramp: hists.ramp, bareIdle: hists['bare:idle'], bareRamp: hists['bare:ramp'] },
      threads: threadsOut,
    };
  } finally {
    gw.child.kill('SIGTERM');
    await gw.exited;
    rmSync(dataDir, { recursive: true, force: true });
  }
}

// A first gateway start reads the build from disk and warms the machine's caches: not counted.
await runOnce('A', -1, Math.min(accountsPerRun, 500));
const runs: Awaited<ReturnType<typeof runOnce>>[] = [];
for (let i = 0; i < rounds; i++) {
  const order: ('A' | 'B')[] = i % 2 === 0 ? ['A', 'B'] : ['B', 'A'];
  for (const c of order) {
    const r = await runOnce(c, i);
    const { hist: _h, ...shown } = r;
    console.error(JSON.stringify(shown));
    runs.push(r);
  }
}
const pooled = (c: 'A' | 'B', phase: 'idle' | 'ramp' | 'bareIdle' | 'bareRamp') => {
  const x = new Histogram();
  for (const r of runs) if (r.config === c && r.hist[phase]) x.merge(r.hist[phase]!);
  return pcts(x);
};
const side = (c: 'A' | 'B') => ({
  env: configs[c],
  creationsPerSec: runs.filter((r) => r.config === c).map((r) => r.creationsPerSec),
  quoteIdleUs: pooled(c, 'idle'), quoteRampUs: pooled(c, 'ramp'),
  ...(withBare ? { bareIdleUs: pooled(c, 'bareIdle'), bareRampUs: pooled(c, 'bareRamp') } : {}),
  quoteRampP90Us: runs.filter((r) => r.config === c).map((r) => r.quoteRampUs?.p90),
  quoteRampP99Us: runs.filter((r) => r.config === c).map((r) => r.quoteRampUs?.p99),
  refused: runs.filter((r) => r.config === c).map((r) => r.refused),
});
console.log(JSON.stringify({ bench: 'ramp', build: at.build, concurrency, creatorNice, accounts: accountsPerRun, rounds, cached, everyMs, A: side('A'), B: side('B'), machine: machineFacts() }));
