// BROKER_MODE=bridge: a bridge connection learns its server (time zone, build) only when it logs in.
// A /v1/stream socket opened while the account was still connecting must not make the gateway take
// the connection's placeholder (UTC) for the server's clock: QUOTE time/timeMsc, HEARTBEAT
// lastTickTimeMsc, POSITIONS openTime and ORDERS timeSetup stay on the broker server clock, for
// that socket, later sockets and other accounts of the server. Real simulator server (loopback
// TCP), real gateway restarted on the same data directory while the simulator is down.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { toServerTime } from '../../src/market/serverClock.js';
import { loadSimConfig } from '../../src/sim/config.js';
import { mgmt, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { startBridgeSim, type BridgeSim } from '../helpers/sim-helpers.js';
import { mustOpen, type Frame, type StreamClient } from '../helpers/stream-helpers.js';

const config = loadSimConfig();
const P5 = config.servers.find((s) => s.name === 'Sim-P5-Demo')!;
/** Server-clock minus UTC at a UTC instant, ms (2 or 3 hours on Sim-P5-Demo). */
const offsetAt = (utcMs: number) => toServerTime(utcMs, P5.timeZone) - utcMs;
/** A `time` string without zone (server clock) as ms. */
const serverMs = (iso: string) => Date.parse(`${iso}Z`);

let bs: BridgeSim;
let gw: TestGateway | undefined;
const dataDir = mkdtempSync(join(tmpdir(), 'tagw-bridge-clock-'));
const sockets: StreamClient[] = [];

const startGateway = () => startTestGateway(
  { brokerMode: 'bridge', bridgeUrl: bs.url, streamHeartbeatMs: 300 },
  { dataDir },
);

beforeAll(async () => {
  bs = await startBridgeSim({ config });
}, 30_000);
afterAll(async () => {
  for (const s of sockets) await s.close();
  await gw?.stop();
  await bs?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

async function open(key: string, id: string): Promise<StreamClient> {
  const s = await mustOpen(gw!.url, { apiKey: key, id });
  sockets.push(s);
  return s;
}

function expectServerClockPositions(f: Frame): void {
  expect(f.data.positions.length).toBeGreaterThan(0);
  for (const p of f.data.positions) {
    const utc = Date.parse(p.openTimeUtc);
    expect(serverMs(p.openTime) - utc, `openTime ${p.openTime} vs ${p.openTimeUtc}`).toBe(offsetAt(utc));
  }
}
function expectServerClockOrders(f: Frame): void {
  expect(f.data.orders.length).toBeGreaterThan(0);
  for (const o of f.data.orders) {
    const utc = Date.parse(o.timeSetupUtc);
    expect(serverMs(o.timeSetup) - utc, `timeSetup ${o.timeSetup} vs ${o.timeSetupUtc}`).toBe(offsetAt(utc));
  }
}

it('keeps /v1/stream on the broker server clock when a socket was opened before the bridge connection logged in', async () => {
  gw = await startGateway();
  const key = (await gw.req('POST', '/v1/keys', { headers: mgmt(gw.managementKey), body: { label: 'clock' } })).body.key as string;
  const h = { 'x-api-key': key };
  const bind = async (user: string) => {
    const r = await gw!.req('POST', '/ConnectEx', { headers: h, body: { user, password: 'pw', server: 'Sim-P5-Demo' } });
    expect(r.status, r.text).toBe(200);
    return r.body.id as string;
  };
  const id = await bind('clock-1');
  // A position and a pending order, so POSITIONS and ORDERS carry times.
  const buy = await gw.req('GET', `/OrderSend?id=${id}&symbol=BTCUSD&operation=Buy&volume=0.01&clientOrderId=clk-1`, { headers: h });
  expect(buy.status, buy.text).toBe(200);
  const q = await gw.req('GET', `/GetQuote?id=${id}&symbol=BTCUSD`, { headers: h });
  const limit = Math.round(q.body.bid * 0.8);
  const pending = await gw.req('GET', `/OrderSend?id=${id}&symbol=BTCUSD&operation=BuyLimit&volume=0.01&price=${limit}&clientOrderId=clk-2`, { headers: h });
  expect(pending.status, pending.text).toBe(200);

  // Restart the gateway while the simulator is down: the account's connection keeps retrying.
  await gw.stop();
  await bs.stopBridge();
  gw = await startGateway();
  const early = await open(key, id);
  const hb = await early.next('HEARTBEAT');
  expect(hb.data.connection).toBe('connecting');

  await bs.restartBridge();
  for (let i = 0; i < 40; i++) {
    // CheckConnect cuts the reconnect backoff short.
    if ((await gw.req('GET', `/CheckConnect?id=${id}`, { headers: h })).body?.connected) break;
  }
  expect((await gw.req('GET', `/CheckConnect?id=${id}`, { headers: h })).body.connected).toBe(true);

  // The socket opened while connecting gets its snapshot once connected: server clock.
  expectServerClockPositions(await early.until((c) => c.of('POSITIONS').find((f) => f.data.snapshot), 10_000, 'POSITIONS snapshot'));
  expectServerClockOrders(await early.until((c) => c.of('ORDERS').find((f) => f.data.snapshot), 10_000, 'ORDERS snapshot'));

  // A socket opened afterwards: snapshot, quotes and heartbeats on the server clock.
  const late = await open(key, id);
  expectServerClockPositions(await late.next('POSITIONS', 0));
  expectServerClockOrders(await late.next('ORDERS', 0));
  late.send({ action: 'subscribe', symbol: 'BTCUSD' });
  const quote = await late.next('QUOTE', 0, 10_000);
  expect(quote.data.timeMsc - quote.data.timeMscUtc).toBe(offsetAt(quote.data.timeMscUtc));
  expect(serverMs(quote.data.time)).toBe(quote.data.timeMsc);
  const beat = await late.until((c) => c.of('HEARTBEAT').find((f) => f.data.symbols[0]?.lastTickTimeMsc), 10_000, 'a heartbeat with a tick');
  const sym = beat.data.symbols[0];
  expect(sym.lastTickTimeMsc - sym.lastTickTimeMscUtc).toBe(offsetAt(sym.lastTickTimeMscUtc));

  // Another account of the same server, bound now: the same clock.
  const other = await bind('clock-2');
  const third = await open(key, other);
  third.send({ action: 'subscribe', symbol: 'BTCUSD' });
  const q3 = await third.next('QUOTE', 0, 10_000);
  expect(q3.data.timeMsc - q3.data.timeMscUtc).toBe(offsetAt(q3.data.timeMscUtc));
}, 90_000);
