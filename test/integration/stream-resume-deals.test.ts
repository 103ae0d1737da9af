// Deals that happened while no event could reach the account stream's history are still TRADEs in it,
// once (docs/stream.md "History", issue 18). A gateway restarted on its DATA_DIR picks up the kept
// stream; a deal made at the broker after the last event it wrote (the gateway down; or killed with
// that deal's event still on its way to the history; or before the restored stream was open again)
// was never an event. Before the fix the resume said recovered:true and the TRADE never came. Real
// simulator server over loopback TCP (bridge mode), so the test can trade at the broker while the
// gateway is away; real gateway restarted on the same data directory; real sockets.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { SimBrokerConnection } from '../../src/broker/sim.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { mustOpen, type Frame, type StreamClient } from '../helpers/stream-helpers.js';
import { startBridgeSim, type BridgeSim } from '../helpers/sim-helpers.js';
import { bindAccount } from '../helpers/trading.js';

const TIMING = { reconnectBaseMs: 50, reconnectCapMs: 200, brokerWaitMs: 1_000, checkWaitMs: 500, resumeWaitMs: 1_000, subscriptionWaitMs: 500 };
const ACCOUNT = new Set(['POSITIONS', 'ORDERS', 'TRADE']);

let bs: BridgeSim;
const dirs: string[] = [];
const gateways: TestGateway[] = [];
const clients: StreamClient[] = [];

beforeAll(async () => {
  bs = await startBridgeSim();
}, 30_000);
afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
  for (const g of gateways.splice(0)) await g.stop();
  await bs.restartBridge();
});
afterAll(async () => {
  await bs?.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

async function gateway(dataDir: string): Promise<TestGateway> {
  const g = await startTestGateway({ brokerMode: 'bridge', bridgeUrl: bs.url, streamHeartbeatMs: 200, ...TIMING }, { dataDir });
  gateways.push(g);
  return g;
}

async function open(g: TestGateway, key: string, id: string, q: Record<string, string> = {}): Promise<StreamClient> {
  const c = await mustOpen(g.url, { id, apiKey: key, heartbeat: '0', ...q });
  clients.push(c);
  return c;
}

/** A deal made at the broker by another terminal of the same login (the gateway sees no request). */
async function dealAtBroker(user: string, volume: number): Promise<number> {
  const conn = new SimBrokerConnection(bs.sim, { server: 'Sim-P5-Demo', login: user, password: 'pw' });
  await conn.connect();
  const r = await conn.orderSend({ symbol: 'BTCUSD', type: 'Buy', volume });
  if (!r.ok) throw new Error(`order refused: ${JSON.stringify(r)}`);
  const deals = await conn.historyDeals(0, Number.MAX_SAFE_INTEGER);
  await conn.disconnect();
  return deals.at(-1)!.ticket;
}

/** A gateway on its own data dir, an account bound on the bridge's simulator, a socket past its snapshot. */
async function boundStream(name: string) {
  const dataDir = mkdtempSync(join(tmpdir(), 'tagw-resume-deals-'));
  dirs.push(dataDir);
  const user = `${name}-${process.pid}`;
  const g = await gateway(dataDir);
  const { key, id } = await bindAccount(g.url, g.managementKey, user);
  const c = await open(g, key, id);
  await c.until((x) => x.of('ORDERS').length >= 1, 10_000, 'the snapshot pair');
  return { dataDir, user, g, key, id, c };
}

const trades = (c: StreamClient) => c.of('TRADE').map((f) => f.data.ticket as number);
const position = (f: Frame) => `${f.epoch}:${f.seq}`;

it('a deal made at the broker while the gateway was down: after the restart the resume carries its TRADE, once', async () => {
  const { dataDir, user, g: a, key, id, c: before } = await boundStream('away');
  const last = before.frames.filter((f) => ACCOUNT.has(f.type)).at(-1)!;
  await a.stop();
  gateways.splice(0);

  const ticket = await dealAtBroker(user, 0.01);
  const b = await gateway(dataDir);
  const after = await open(b, key, id, { since: position(last) });
  const resumed = await after.next('RESUMED', 0, 10_000);
  expect(resumed.data.recovered).toBe(true);
  // The resync after the restart: the missed deal first, then the snapshot pair, in the same epoch.
  await after.until((c) => c.of('ORDERS').some((f) => f.data.snapshot), 10_000, 'the resync pair');
  expect(trades(after)).toEqual([ticket]);
  const frames = after.frames.filter((f) => ACCOUNT.has(f.type));
  expect(frames.every((f) => f.epoch === last.epoch)).toBe(true);
  expect(frames.map((f) => f.seq)).toEqual(frames.map((_, i) => last.seq + 1 + i));
  expect(frames[0]!.type).toBe('TRADE');

  // The same deal never again: a new deal made through the gateway follows it as the next TRADE.
  const r = await fetch(`${b.url}/OrderSend?id=${id}&symbol=BTCUSD&operation=Sell&volume=0.01`, { headers: { 'x-api-key': key } });
  expect(r.status, await r.text()).toBe(200);
  await after.until((c) => c.of('TRADE').length >= 2, 10_000, 'the next TRADE');
  const all = trades(after);
  expect(new Set(all).size).toBe(all.length);
}, 60_000);

it('a deal made at the broker during an upstream outage is one TRADE (the bridge adapter and the resync both find it)', async () => {
  const { user, g, key, id, c } = await boundStream('outage');

  await bs.stopBridge();
  const ticket = await dealAtBroker(user, 0.02);
  await bs.restartBridge();
  await c.until((x) => x.of('ORDERS').filter((f) => f.data.snapshot).length >= 2, 15_000, 'the resync pair after the outage');
  // Anything still on its way after the resync would be a duplicate: a live deal is the fence.
  const r = await fetch(`${g.url}/OrderSend?id=${id}&symbol=BTCUSD&operation=Sell&volume=0.01`, { headers: { 'x-api-key': key } });
  expect(r.status, await r.text()).toBe(200);
  await c.until((x) => x.of('TRADE').length >= 2, 10_000, 'the live TRADE');
  const all = trades(c);
  expect(all[0]).toBe(ticket);
  expect(all).toHaveLength(2);
}, 60_000);
