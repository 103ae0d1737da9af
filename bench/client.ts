// tagw/client against raw `ws` in the same run (issue 18):
//  1. quote latency, tick emission -> the consumer's callback, through the SDK's stream and through
//     a plain ws socket that JSON-parses each frame; the two take turns (same gateway, same tick
//     schedule, one consumer at a time in one child process) so machine noise hits both;
//  2. resume: 1,000 account events missed while disconnected, from the reconnect to the last one
//     delivered, through the SDK and through a raw socket given the same `since`.
// `npm run bench -- client [--rounds N] [--turn-ms N] [--rate N]`; the last line is one JSON object.
import { fork } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket from 'ws';
import { TagwClient } from '../src/client/index.js';
import { parseConfig } from '../src/config.js';
import { startGateway } from '../src/gateway.js';
import { createLogger } from '../src/log.js';
import type { Deal } from '../src/market/orders.js';
import { STREAM_EVENT } from '../src/runtime/hosts/streamCommands.js';
import { nowMs, TurnHist } from './streamHist.js';

const arg = (name: string, d: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : d;
};
const ROUNDS = arg('rounds', 6);
const TURN_MS = arg('turn-ms', 1_000);
const RATE = arg('rate', 1_000); // ticks/s over all symbols
const MISSED = 1_000;
const MGMT = 'bench-management-key-0123456789';

async function main() {
  const dataDir = mkdtempSync(join(tmpdir(), 'tagw-bench-client-'));
  const gw = await startGateway(parseConfig({ host: '127.0.0.1', port: 0, dataDir, shards: 1, logLevel: 'silent', managementKey: MGMT }), { log: createLogger('silent') });
  const base = `http://127.0.0.1:${gw.port}`;
  const admin = new TagwClient({ baseUrl: base, managementKey: MGMT });
  const key = (await admin.keys.create({ label: 'bench' })).key;
  const client = new TagwClient({ baseUrl: base, apiKey: key, WebSocket });
  const id = (await client.connectEx({ user: 'bench-client', password: 'pw', server: 'Sim-P5-Demo' })).id;
  const server = 'Sim-P5-Demo';
  const symbols = ['EURUSD', 'GBPUSD', 'USDJPY', 'XAUUSD', 'US500', 'BTCUSD'];

  // ---- 1. quote latency, interleaved turns ----------------------------------------------------
  const child = fork(join(import.meta.dirname, 'clientLoad.ts'), [], { execArgv: ['--import', 'tsx'] });
  const next = (t: string) => new Promise<any>((resolve) => {
    const on = (m: { t: string }) => {
      if (m.t === t) {
        child.off('message', on);
        resolve(m);
      }
    };
    child.on('message', on);
  });
  await next('up');
  const emitFor = async (ms: number) => {
    const t0 = nowMs();
    let i = 0;
    while (nowMs() - t0 < ms) {
      const due = Math.floor(((nowMs() - t0) / 1000) * RATE);
      for (; i <= due; i++) {
        const symbol = symbols[i % symbols.length]!;
        const px = 1 + (i % 1000) / 100_000;
        gw.stream.onShardEvent({ kind: STREAM_EVENT.tick, key: server, data: { server, tick: { symbol, bid: px, ask: px + 0.0001, timeMsc: nowMs(), volume: -1 } } });
      }
      await new Promise((r) => setTimeout(r, 1));
    }
  };
  const sides = { sdk: new TurnHist(), raw: new TurnHist() };
  const paired: Array<{ p50: number; p99: number }> = [];
  for (let r = 0; r < ROUNDS; r++) {
    const turn: Partial<Record<'sdk' | 'raw', TurnHist>> = {};
    for (const side of (r % 2 ? ['raw', 'sdk'] : ['sdk', 'raw']) as Array<'sdk' | 'raw'>) {
      child.send({ t: 'turn', side, base, key, id, symbols });
      await next('ready');
      await emitFor(100); // warm-up, not kept
      child.send({ t: 'stop' });
      await next('hist');
      child.send({ t: 'turn', side, base, key, id, symbols });
      await next('ready');
      await emitFor(TURN_MS);
      await new Promise((res) => setTimeout(res, 20));
      child.send({ t: 'stop' });
      const h = new TurnHist();
      h.merge((await next('hist')).data);
      sides[side].merge(h.toData());
      turn[side] = h;
    }
    paired.push({ p50: turn.sdk!.percentile(50) / turn.raw!.percentile(50), p99: turn.sdk!.percentile(99) / turn.raw!.percentile(99) });
  }
  child.send({ t: 'exit' });
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const latency = {
    sdk: { p50Us: sides.sdk.percentile(50), p99Us: sides.sdk.percentile(99), n: sides.sdk.count },
    raw: { p50Us: sides.raw.percentile(50), p99Us: sides.raw.percentile(99), n: sides.raw.count },
    ratio: {
      p50: sides.sdk.percentile(50) / sides.raw.percentile(50),
      p99: sides.sdk.percentile(99) / sides.raw.percentile(99),
      p50PairedMedian: median(paired.map((p) => p.p50)),
      p99PairedMedian: median(paired.map((p) => p.p99)),
    },
  };
  console.error(JSON.stringify({ latency }));

  // ---- 2. resume after 1,000 missed account events --------------------------------------------
  // The account's stream position, then 1,000 deals made while no socket listens (the gateway keeps
  // the account's stream for streamHistoryMaxAgeMs after its last socket), injected where the
  // shard's deal events enter the hub, so they are written to the history as real ones are.
  const resume = async (side: 'sdk' | 'raw') => {
    const first = client.stream(id);
    await new Promise<void>((r) => first.on('POSITIONS', () => r()));
    const since = first.since!;
    first.close();
    const t = Date.now();
    for (let i = 0; i < MISSED; i++) {
      const deal: Deal = { ticket: 900_000 + i + (side === 'raw' ? MISSED : 0), order: 1, position: 1, symbol: 'EURUSD', type: 'Buy', entry: 'in', volume: 0.01, price: 1.1, timeMsc: t + i, magic: 0, comment: '', commission: 0, swap: 0, profit: 0 } as Deal;
      gw.stream.onShardEvent({ kind: STREAM_EVENT.deal, key: id, data: { deal } });
    }
    await new Promise((r) => setTimeout(r, 200)); // the history write (a batch per turn) lands
    const t0 = nowMs();
    let got = 0;
    let replayed = -1;
    if (side === 'sdk') {
      const s = client.stream(id, { since });
      await new Promise<void>((resolve) => {
        s.on('RESUMED', (f) => (replayed = f.data.replayed));
        s.on('TRADE', () => ++got === MISSED && resolve());
      });
      const ms = nowMs() - t0;
      s.close();
      return { ms, replayed };
    }
    const ws = new WebSocket(`${base.replace('http', 'ws')}/v1/stream?id=${id}&apiKey=${encodeURIComponent(key)}&since=${encodeURIComponent(since)}`);
    await new Promise<void>((resolve) => ws.on('message', (buf) => {
      const f = JSON.parse(String(buf)) as { type: string; data: { replayed?: number } };
      if (f.type === 'RESUMED') replayed = f.data.replayed!;
      if (f.type === 'TRADE' && ++got === MISSED) resolve();
    }));
    const ms = nowMs() - t0;
    ws.terminate();
    return { ms, replayed };
  };
  const resumeRuns = { sdk: [] as number[], raw: [] as number[] };
  let replayed = 0;
  for (let r = 0; r < 3; r++) {
    for (const side of ['sdk', 'raw'] as const) {
      const x = await resume(side);
      resumeRuns[side].push(x.ms);
      replayed = x.replayed;
    }
  }
  const resumeOut = {
    missedEvents: MISSED, replayed,
    sdkMs: Number(median(resumeRuns.sdk).toFixed(1)), rawMs: Number(median(resumeRuns.raw).toFixed(1)),
    ratio: Number((median(resumeRuns.sdk) / median(resumeRuns.raw)).toFixed(2)),
  };
  await gw.close();
  rmSync(dataDir, { recursive: true, force: true });
  const round = (x: number) => Number(x.toFixed(2));
  console.log(JSON.stringify({
    bench: 'client', ticksPerSec: RATE, rounds: ROUNDS, turnMs: TURN_MS,
    latency: { ...latency, ratio: Object.fromEntries(Object.entries(latency.ratio).map(([k, v]) => [k, round(v)])) },
    goal: { p50: 1.1, p99: 1.1 },
    resume: resumeOut,
  }));
}

await main();
