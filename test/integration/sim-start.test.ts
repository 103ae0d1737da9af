// SIM_START end to end (docs/simulator.md, "Starting the market at a fixed instant"): a real gateway
// (shard workers, the embedded simulator, a temp DATA_DIR) whose market starts at a fixed instant
// 73 days before this file was written, so the answers are the same whatever day it runs: quotes,
// bars, deals and the market's "now" follow SIM_START, the gateway's own clock (Ping) stays the
// wall clock, a restart goes on from where the market was (never back to SIM_START), another
// SIM_START on that DATA_DIR is refused and none keeps its clock; then `npm run sim -- --start`.
import { spawn } from 'node:child_process';
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BridgeBrokerConnection } from '../../src/broker/bridge.js';
import { ConfigError } from '../../src/config.js';
import { dbPath } from '../../src/store/db.js';
import { mgmt, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { builtEntry } from '../helpers/build.js';
import { closedSinceConnect, keyAndAccount, orderInDefaultHistory, quoteAndServerTime, streamOnMarketClock, type MarketClockCase } from '../helpers/simStart.js';

const START = '2026-09-16T12:00:00.000Z'; // a Wednesday: forex open
const START_MS = Date.parse(START);
const DAY = 86_400_000;

describe('a gateway with SIM_START', () => {
  let dataDir: string;
  let t: TestGateway | undefined;
  let key: string;
  let id: string;
  /** Wall time before the first start: the market's now is at most START + (now - wall0). */
  let wall0: number;
  const api = (path: string) => t!.req('GET', path, { headers: { 'x-api-key': key } });
  const simNowAtMost = () => START_MS + (Date.now() - wall0);
  const start = (simStart?: string) => startTestGateway({ ...(simStart ? { simStart } : {}), shards: 2 }, { dataDir });
  /** The latest market time seen before the restart. */
  let seen = 0;
  let positionOpen = 0;

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'tagw-simstart-'));
    wall0 = Date.now();
    t = await start(START);
    ({ key, id } = await keyAndAccount(t, 'simstart'));
  }, 60_000);
  afterAll(async () => {
    await t?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const market = (): MarketClockCase => ({ t: t!, key, id, startMs: START_MS, atMost: simNowAtMost });

  it('quotes, deals, history defaults and the server time follow SIM_START; Ping keeps the wall clock', async () => {
    const { quote, server, dstInEffect } = await quoteAndServerTime(market(), 'EURUSD');
    expect(dstInEffect).toBe(true); // September: US DST, whatever month it is now
    // The operator sees the simulated clock in /v1/status.
    const st = await t!.req('GET', '/v1/status', { headers: mgmt(t!.managementKey) });
    expect(st.body.simClock.start).toBe(START);
    expect(Date.parse(st.body.simClock.now)).toBeGreaterThanOrEqual(START_MS);
    expect(Date.parse(st.body.simClock.now)).toBeLessThanOrEqual(simNowAtMost());
    expect(st.body.config.simStart).toBe(START);
    const ping = await api(`/Ping?id=${id}`);
    expect(Math.abs(Date.parse(ping.body.time) - Date.now())).toBeLessThan(60_000);

    // The default range is the last 30 days of the market's clock (of the wall clock, the deal 73 days back was left out).
    await orderInDefaultHistory(market());
    const open = (await api(`/OpenedOrders?id=${id}`)).body as Array<{ ticket: number; openTimeMsc: number }>;
    expect(open).toHaveLength(1);
    positionOpen = open[0]!.openTimeMsc;
    expect(positionOpen).toBeGreaterThanOrEqual(START_MS);
    expect(positionOpen).toBeLessThanOrEqual(simNowAtMost());
    seen = Math.max(quote, positionOpen, server);
  });

  it('a gateway session: bars around SIM_START, and ClosedOrders since its connect on the market clock', async () => {
    const handle = await closedSinceConnect(market());
    const from = new Date(START_MS - 3_600_000).toISOString();
    const to = new Date(START_MS + 3_600_000).toISOString();
    const ph = await t!.req('GET', `/v1/proxy/PriceHistoryV2?handle=${handle}&symbol=BTCUSD&timeFrame=1&from=${from}&to=${to}`, { headers: { 'x-api-key': key } });
    expect(ph.status, ph.text).toBe(200);
    const bars = ph.body as Array<{ timeSec: number }>;
    // timeSec: the bar open on the server clock (Sim-P5-Demo in September: GMT+3). The last bar is
    // the one in progress: SIM_START's minute or one just after.
    const lastOpen = bars[bars.length - 1]!.timeSec * 1000 - 3 * 3_600_000;
    expect(lastOpen).toBeGreaterThanOrEqual(START_MS);
    expect(lastOpen).toBeLessThanOrEqual(simNowAtMost());
    expect(bars.length).toBeGreaterThanOrEqual(60); // the hour before SIM_START is history
  });

  it('/v1/stream: quotes and candles on the market clock, their age true (not the 73 days to the wall clock)', async () => {
    seen = Math.max(seen, await streamOnMarketClock(market()));
  });

  it('a restart goes on from where the market was, the downtime included: never back to SIM_START', async () => {
    await t!.stop();
    t = undefined;
    const down = 1_500;
    await new Promise((r) => setTimeout(r, down));
    t = await start(START);
    const q = await api(`/GetQuote?id=${id}&symbol=BTCUSD`);
    expect(q.status, q.text).toBe(200);
    // BTCUSD ticks 5 times a second (jittered, at most ~360 ms apart): its quote is well within 500 ms of the market's now.
    expect(q.body.timeMsc).toBeGreaterThan(seen + down - 500);
    expect(q.body.timeMsc).toBeLessThanOrEqual(simNowAtMost());
    const open = (await api(`/OpenedOrders?id=${id}`)).body as Array<{ openTimeMsc: number }>;
    expect(open.map((p) => p.openTimeMsc)).toEqual([positionOpen]);
    expect(q.body.timeMsc).toBeGreaterThan(positionOpen);
    seen = q.body.timeMsc;
  });

  it('another SIM_START on this DATA_DIR is refused (exit 2 in main); none keeps its simulated clock', async () => {
    await t!.stop();
    t = undefined;
    const other = '2026-09-17T00:00:00Z';
    await expect(start(other)).rejects.toThrow(ConfigError);
    await expect(start(other)).rejects.toThrow(/^SIM_START: DATA_DIR .*: its simulated clock started at 2026-09-16T12:00:00.000Z and holds accounts and deals on it; it cannot start again at 2026-09-17T00:00:00.000Z/);
    t = await start();
    const q = await api(`/GetQuote?id=${id}&symbol=BTCUSD`);
    expect(q.status, q.text).toBe(200);
    expect(q.body.timeMsc).toBeGreaterThan(seen);
    expect(q.body.timeMsc).toBeLessThanOrEqual(simNowAtMost());
    expect(q.body.timeMsc).toBeLessThan(START_MS + DAY);
    // Unset, yet not the wall clock: /v1/status says which.
    const st = await t!.req('GET', '/v1/status', { headers: mgmt(t!.managementKey) });
    expect(st.body.config.simStart).toBeNull();
    expect(st.body.simClock.start).toBe(START);
    expect(Date.parse(st.body.simClock.now)).toBeLessThanOrEqual(simNowAtMost());
  });

  it('the gateway\'s own records keep the wall clock: an idempotency record is made now and kept 24 hours', async () => {
    const before = Date.now();
    const o = await api(`/OrderSend?id=${id}&symbol=BTCUSD&operation=Buy&volume=0.01&clientOrderId=simstart-wall`);
    expect(o.status, o.text).toBe(200);
    const after = Date.now();
    const db = new Database(dbPath(dataDir), { readonly: true });
    try {
      const row = db.prepare('SELECT created_at, expires_at FROM idempotency WHERE client_order_id = ?').get('simstart-wall') as { created_at: number; expires_at: number };
      expect(row.created_at).toBeGreaterThanOrEqual(before);
      expect(row.created_at).toBeLessThanOrEqual(after);
      expect(row.expires_at).toBeGreaterThanOrEqual(before + 24 * 3_600_000);
      expect(row.expires_at).toBeLessThanOrEqual(after + 24 * 3_600_000);
    } finally {
      db.close();
    }
  });
});

/** The first stdout line of a process, or its exit code and stderr when it ends first. */
function firstLine(args: string[], env: NodeJS.ProcessEnv = {}) {
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<{ code: number | null; stderr: string }>((resolve) => child.once('exit', (code) => resolve({ code, stderr })));
  const line = new Promise<string>((resolve) => createInterface({ input: child.stdout! }).once('line', resolve));
  return { child, exited, line };
}

describe('SIM_START and --start refused in one line, exit 2', () => {
  it.each([['2026-11-18'], ['next monday']])('the gateway: SIM_START=%s', async (value) => {
    const dir = mkdtempSync(join(tmpdir(), 'tagw-simstart-bad-'));
    try {
      const { exited } = firstLine([builtEntry('src/main.ts')], { SIM_START: value, DATA_DIR: dir, PORT: '0' });
      const { code, stderr } = await exited;
      expect(code).toBe(2);
      expect(stderr.trim().split('\n')).toEqual([expect.stringMatching(/^invalid configuration: simStart: '.*' is not an ISO 8601 instant with its zone, e\.g\. 2026-11-20T10:00:00Z \(from SIM_START\)$/)]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('npm run sim -- --start (the compiled build)', () => {
  const sim = builtEntry('src/simServer.ts');
  it('starts the market at --start, keeps the clock in --data, refuses another instant over its state', async () => {
    const data = mkdtempSync(join(tmpdir(), 'tagw-simstart-sim-'));
    try {
      const wall0 = Date.now();
      const a = firstLine([sim, '--port', '0', '--data', data, '--start', '2026-09-16T14:00+02:00']);
      let first: { listening: number; simStart: string; simNow: string };
      try {
        first = JSON.parse(await a.line) as typeof first;
        expect(first.simStart).toBe(START);
        expect(Date.parse(first.simNow)).toBeGreaterThanOrEqual(START_MS);
        const c = new BridgeBrokerConnection({ host: '127.0.0.1', port: first.listening, server: 'Sim-P5-Demo', login: '951', password: 'x' });
        await c.connect();
        const q = (await c.quote('EURUSD'))!;
        expect(q.timeMsc).toBeGreaterThanOrEqual(START_MS);
        expect(q.timeMsc).toBeLessThanOrEqual(START_MS + (Date.now() - wall0));
        expect(await c.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 0.01 })).toMatchObject({ ok: true });
        await c.disconnect();
      } finally {
        a.child.kill('SIGTERM');
        await a.exited;
      }
      const b = firstLine([sim, '--port', '0', '--data', data, '--start', '2026-09-17T00:00:00Z']);
      const refused = await b.exited;
      expect(refused.code).toBe(2);
      expect(refused.stderr.trim().split('\n')).toEqual([expect.stringMatching(/^simulator: --start: --data .*: its simulated clock started at 2026-09-16T12:00:00.000Z .* cannot start again at 2026-09-17T00:00:00.000Z/)]);
      // A Saturday: forex closed, said on stderr; BTCUSD quotes.
      const sat = firstLine([sim, '--port', '0', '--start', '2026-11-21T12:00:00Z']);
      expect(JSON.parse(await sat.line)).toMatchObject({ simStart: '2026-11-21T12:00:00.000Z' });
      sat.child.kill('SIGTERM');
      const satEnd = await sat.exited;
      expect(satEnd.stderr).toMatch(/^simulator: the simulated clock is where .*Sim-P5-Demo:EURUSD.* do not quote or trade \(a --start on a weekend opens into a closed forex market\)/);
      expect(satEnd.stderr).not.toMatch(/BTCUSD/);
      const bad = await firstLine([sim, '--port', '0', '--start', 'soon']).exited;
      expect(bad.code).toBe(2);
      expect(bad.stderr.trim()).toBe("simulator: --start: 'soon' is not an ISO 8601 instant with its zone, e.g. 2026-11-20T10:00:00Z");
    } finally {
      rmSync(data, { recursive: true, force: true });
    }
  }, 60_000);
});
