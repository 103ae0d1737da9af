// BROKER_MODE=bridge: gateway session subscriptions saved with the handle are re-placed at the broker
// when the account's connection comes up, however long the broker was away. Here the gateway
// restarts while the simulator is down and stays down longer than any single wait for the
// connection (the session host used to wait once, 30 s, log "broker subscribe failed" and never try
// again, so /ws got no frame although SubscribedSymbols listed the subscriptions). The waits and the
// reconnect backoff are settings: short here, so the outage outlasts them all in seconds. Real
// simulator server over loopback TCP, real gateway restarted on the same data directory.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startBridgeSim, type BridgeSim } from '../helpers/sim-helpers.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { account, op, openWs, type WsClient } from '../helpers/gateway-helpers.js';

/** Every wait for the connection, and the reconnect backoff, well under the outage. */
const TIMING = { reconnectBaseMs: 50, reconnectCapMs: 500, brokerWaitMs: 1_000, checkWaitMs: 500, resumeWaitMs: 1_000, subscriptionWaitMs: 500 };
const OUTAGE_MS = 3 * TIMING.resumeWaitMs;

let bs: BridgeSim;
let gw: TestGateway | undefined;
const dataDir = mkdtempSync(join(tmpdir(), 'tagw-bridge-resub-'));
const sockets: WsClient[] = [];

const startGateway = () => startTestGateway({ brokerMode: 'bridge', bridgeUrl: bs.url, ...TIMING }, { dataDir });

beforeAll(async () => {
  bs = await startBridgeSim();
}, 30_000);
afterAll(async () => {
  for (const s of sockets) s.ws.terminate();
  await gw?.stop();
  await bs?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

it('re-places saved Subscribe/SubscribeOhlc at the broker when the connection returns after a long outage', async () => {
  gw = await startGateway();
  const a = await account(gw, 'P5');
  expect((await op(gw, a, 'Subscribe', { symbol: 'BTCUSD', interval: 1000 })).status).toBe(200);
  expect((await op(gw, a, 'SubscribeOhlc', { symbol: 'BTCUSD', timeframe: 1, interval: 1 })).status).toBe(200);

  await gw.stop();
  await bs.stopBridge();
  gw = await startGateway();
  const during = await openWs(gw, a.handle, a.key);
  sockets.push(during);
  await new Promise((r) => setTimeout(r, OUTAGE_MS));

  await bs.restartBridge();
  for (let i = 0; i < 40; i++) {
    // CheckConnect cuts the reconnect backoff short.
    if ((await op(gw, a, 'CheckConnect')).body?.connected) break;
  }
  expect((await op(gw, a, 'CheckConnect')).body.connected).toBe(true);
  const listed = (await op(gw, a, 'SubscribedSymbols')).body;
  expect(listed.quotes).toEqual([{ symbol: 'BTCUSD', interval: 1000 }]);
  expect(listed.ohlc).toEqual([{ symbol: 'BTCUSD', timeframe: 'M1', interval: 1 }]);

  const after = await openWs(gw, a.handle, a.key);
  sockets.push(after);
  for (const c of [during, after]) {
    await c.waitFor((f) => f.type === 'QUOTE' && f.data.symbol === 'BTCUSD', 10_000);
    await c.waitFor((f) => f.type === 'CANDLE' && f.data.symbol === 'BTCUSD' && f.data.timeframe === 'M1', 10_000);
  }
}, OUTAGE_MS + 60_000);
