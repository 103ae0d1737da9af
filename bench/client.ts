// tagw/client against raw `ws` in the same run (issue 18):
//  1. quote latency, tick emission -> the consumer's callback, through the SDK's stream and through
//     a plain ws socket that JSON-parses each frame; the two take turns (same gateway, same tick
//     schedule, one consumer at a time in one child process) so machine noise hits both;
//  2. resume: 1,000 account events missed while disconnected, from the reconnect to the last one
//     delivered, through the SDK and through a raw socket given the same `since`.
// `npm run bench -- client [--rounds N] [--turn-ms N] [--rate N] [--resume-rounds N]`; the last line is one JSON object.
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
import { loaderArgs, moduleBeside } from './lib/launch.js';
import { watchHost } from './lib/hostFacts.js';
import { argNumber as arg } from './lib/args.js';

const machineFacts = watchHost();

const ROUNDS = arg('rounds', 6);
const TURN_MS = arg('turn-ms', 1_000);
const RATE = arg('rate', 1_000); // ticks/s over all symbols
const MISSED = 1_000;
const RESUME_ROUNDS = arg('resume-rounds', 9);
const MGMT = 'bench-management-key-0123456789';

async function main() {
  const dataDir = mkdtempSync(join(tmpdir(), 'tagw-bench-client-'));
  // Market hours always: the simulator's own ticks of the forex symbols (not measured, volume >= 0)
  // reach the sockets beside the bench's on any day, as they do while forex is open.
  const gw = await startGateway(parseConfig({ host: '127.0.0.1', port: 0, dataDir, shards: 1, logLevel: 'silent', managementKey: MGMT, simMarketHours: 'always' }), { log: createLogger('silent') });
  const base = `http://127.0.0.1:${gw.port}`;
  const admin = new TagwClient({ baseUrl: base, managementKey: MGMT });
  const key = (await admin.keys.create({ label: 'bench' })).key;
  const client = new TagwClient({ baseUrl: base, apiKey: key, WebSocket });
  const id = (await client.connectEx({ user: 'bench-client', password: 'pw', server: 'Sim-P5-Demo' })).id;
  const server = 'Sim-P5-Demo';
  const symbols = ['EURUSD', 'GBPUSD', 'USDJPY', 'XAUUSD', 'US500', 'BTCUSD'];

  // ---- 1. quote latency, interleaved turns ----------------------------------------------------
  const load = moduleBeside('./clientLoad.ts', import.meta.url);
  const child = fork(load, [], { execArgv: loaderArgs(load) });
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
        gw.stream.onShardEvent({ kind: STREAM_EVENT.tick, key: server, data: { server, tick: { symbol, bid: px, ask: px + 0.0001, timeMsc: nowMs(), volume: -1 }, source: 's0' } });
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
    let resumedAt = 0; // RESUMED: the connection and the upgrade are done, the replay follows
    if (side === 'sdk') {
      const s = client.stream(id, { since });
      await new Promise<void>((resolve) => {
        s.on('RESUMED', (f) => {
          replayed = f.data.replayed;
          resumedAt = nowMs();
        });
        s.on('TRADE', () => ++got === MISSED && resolve());
      });
      const end = nowMs();
      s.close();
      return { ms: end - t0, replayMs: end - resumedAt, replayed };
    }
    const ws = new WebSocket(`${base.replace('http', 'ws')}/v1/stream?id=${id}&apiKey=${encodeURIComponent(key)}&since=${encodeURIComponent(since)}`);
    await new Promise<void>((resolve) => ws.on('message', (buf) => {
      const f = JSON.parse(String(buf)) as { type: string; data: { replayed?: number } };
      if (f.type === 'RESUMED') {
        replayed = f.data.replayed!;
        resumedAt = nowMs();
      }
      if (f.type === 'TRADE' && ++got === MISSED) resolve();
    }));
    const end = nowMs();
    ws.terminate();
    return { ms: end - t0, replayMs: end - resumedAt, replayed };
  };
  // One untimed resume per side first (the SDK's first one compiled its code: 100+ ms, which a
  // median of three took in at times), then rounds taking turns as to who goes first.
  await resume('sdk');
  await resume('raw');
  const resumeRuns = { sdk: [] as number[], raw: [] as number[] };
  const replayRuns = { sdk: [] as number[], raw: [] as number[] };
  let replayed = 0;
  for (let r = 0; r < RESUME_ROUNDS; r++) {
    for (const side of (r % 2 ? ['raw', 'sdk'] : ['sdk', 'raw']) as Array<'sdk' | 'raw'>) {
      const x = await resume(side);
      resumeRuns[side].push(x.ms);
      replayRuns[side].push(x.replayMs);
      replayed = x.replayed;
    }
  }
  const ms = (x: number) => Number(x.toFixed(1));
  const resumeOut = {
    missedEvents: MISSED, replayed, rounds: RESUME_ROUNDS,
    sdkMs: ms(median(resumeRuns.sdk)), rawMs: ms(median(resumeRuns.raw)),
    ratio: Number((median(resumeRuns.sdk) / median(resumeRuns.raw)).toFixed(2)),
    // From RESUMED to the last event: the frames alone, without the connection and upgrade.
    replay: { sdkMs: ms(median(replayRuns.sdk)), rawMs: ms(median(replayRuns.raw)), ratio: Number((median(replayRuns.sdk) / median(replayRuns.raw)).toFixed(2)) },
  };
  await gw.close();
  rmSync(dataDir, { recursive: true, force: true });
  const frameCost = await sdkFrameCost();
  const round = (x: number) => Number(x.toFixed(2));
  console.log(JSON.stringify({
    machine: machineFacts(),
    bench: 'client', ticksPerSec: RATE, rounds: ROUNDS, turnMs: TURN_MS,
    latency: { ...latency, ratio: Object.fromEntries(Object.entries(latency.ratio).map(([k, v]) => [k, round(v)])) },
    goal: { p50: 1.1, p99: 1.1 },
    resume: { ...resumeOut, frameCost },
  }));
}

/**
 * 3. The SDK's own work per replayed event, without sockets or the gateway (on this loaded machine
 * the end-to-end resume times above swing 0.5x-3x from run to run): the same RESUMED + 1,000 TRADE
 * frames handed to the SDK's stream by a WebSocket stand-in (the SDK takes the constructor as an
 * option), against JSON.parse alone over them; the least of many runs, CPU only.
 */
async function sdkFrameCost() {
  const epoch = 'm3x9q2k7a1abc';
  const frames = [JSON.stringify({ type: 'RESUMED', data: { recovered: true, replayed: MISSED } })];
  for (let i = 1; i <= MISSED; i++) {
    const deal = { ticket: 900_000 + i, order: 1, position: 1, symbol: 'EURUSD', type: 'Buy', entry: 'in', volume: 0.01, price: 1.1, magic: 0, expertId: 0, comment: '', commission: 0, swap: 0, profit: 0, time: '2026-11-26T03:00:00.000', timeMsc: 1_790_000_000_000, timeUtc: '2026-11-26T01:00:00.000Z', timeMscUtc: 1_790_000_000_000 };
    frames.push(JSON.stringify({ type: 'TRADE', seq: 100 + i, epoch, data: deal }));
  }
  class ReplayingSocket {
    onopen: (() => void) | null = null;
    onmessage: ((ev: { data: string }) => void) | null = null;
    onclose: ((ev: { code?: number }) => void) | null = null;
    onerror: (() => void) | null = null;
    readyState = 1;
    constructor() {
      setImmediate(() => {
        this.onopen?.();
        for (const f of frames) this.onmessage?.({ data: f });
      });
    }
    send(): void {}
    close(): void {
      this.readyState = 3;
    }
  }
  const sdkClient = new TagwClient({ baseUrl: 'http://127.0.0.1:1', apiKey: 'k', WebSocket: ReplayingSocket as never });
  const sdkOnce = async () => {
    let got = 0;
    let t0 = 0;
    const s = sdkClient.stream('bench', { since: `${epoch}:100` });
    await new Promise<void>((resolve) => {
      s.on('RESUMED', () => (t0 = nowMs()));
      s.on('TRADE', () => ++got === MISSED && resolve());
    });
    const ms = nowMs() - t0;
    s.close();
    return ms;
  };
  const parseOnce = () => {
    let got = 0;
    const t0 = nowMs();
    for (const f of frames) if ((JSON.parse(f) as { type: string }).type === 'TRADE') got++;
    if (got !== MISSED) throw new Error('frames lost');
    return nowMs() - t0;
  };
  let sdk = Infinity;
  let parse = Infinity;
  for (let i = 0; i < 200; i++) {
    sdk = Math.min(sdk, await sdkOnce());
    parse = Math.min(parse, parseOnce());
  }
  return { sdkMs: Number(sdk.toFixed(3)), jsonParseMs: Number(parse.toFixed(3)), ratio: Number((sdk / parse).toFixed(2)) };
}

await main();
