// A client that stops reading while a burst of quotes arrives faster than the backpressure sweep
// runs, then gets account events: it must be told why it was dropped (close 4008), not see a
// connection lost without a close frame (1006). The close frame needs room in uWS's buffer, so the
// gateway closes (or coalesces) a socket before uWS's own limit, even inside a burst.
import type { Socket } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Deal } from '../../src/market/orders.js';
import { handleHash } from '../../src/http/routes/gateway.js';
import { GATEWAY_EVENT } from '../../src/runtime/hosts/gatewayCommands.js';
import { STREAM_EVENT } from '../../src/runtime/hosts/streamCommands.js';
import { SOCKET_CLOSE } from '../../src/stream/closeCodes.js';
import { mgmt, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { account, openWs } from '../helpers/gateway-helpers.js';
import { mustOpen, type StreamClient } from '../helpers/stream-helpers.js';

const SERVER = 'Sim-P5-Demo';
let t: TestGateway;
let id: string;
let key: string;
const clients: StreamClient[] = [];
let tickTime = Date.now() + 86_400_000; // newer than the simulator's own ticks

beforeAll(async () => {
  t = await startTestGateway({ streamSoftLimitBytes: 16 * 1024, streamHardLimitBytes: 256 * 1024, streamSweepMs: 20 });
  const h = mgmt(t.managementKey);
  id = (await t.req('POST', '/ConnectEx', { headers: h, body: { user: 'stream-slow', password: 'pw', server: SERVER } })).body.id;
  key = (await t.req('POST', '/v1/keys', { headers: h, body: { label: 'slow' } })).body.key;
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close()));
  await t?.stop();
});

const socketOf = (c: StreamClient) => (c.ws as unknown as { _socket: Socket })._socket;
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
const deal = (ticket: number): Deal => ({
  ticket, order: ticket, position: ticket, symbol: 'BTCUSD', type: 'Buy', entry: 'in', volume: 0.01, price: 60_000,
  timeMsc: Date.now(), magic: 1, comment: 'x'.repeat(200), commission: -0.1, swap: 0, profit: 0,
});

it('a reader that stopped during a burst of quotes is closed with 4008 (a close frame it reads when it resumes)', async () => {
  const slow = await mustOpen(t.url, { id, apiKey: key, heartbeat: '0' });
  clients.push(slow);
  slow.send({ action: 'subscribe', symbol: 'BTCUSD' });
  await slow.next('SUBSCRIBED', 0);
  socketOf(slow).pause();
  // One synchronous burst (no sweep can run inside it): ~12 MB of quotes, far more than the kernel's
  // socket buffers and the 256 KiB hard limit together.
  for (let i = 0; i < 50_000; i++) {
    const bid = 60_000 + (i % 1000);
    t.gw.stream.onShardEvent({ kind: STREAM_EVENT.tick, key: SERVER, data: { server: SERVER, tick: { symbol: 'BTCUSD', bid, ask: bid + 15, timeMsc: ++tickTime }, source: 's0' } });
  }
  const closes = t.gw.stream.stats().backpressureCloses;
  for (let n = 0; n < 5_000 && t.gw.stream.stats().backpressureCloses === closes; n++) {
    t.gw.stream.onShardEvent({ kind: STREAM_EVENT.deal, key: id, data: { deal: deal(700_000 + n) } });
    if (n % 50 === 49) await pause(1);
  }
  expect(t.gw.stream.stats().backpressureCloses).toBe(closes + 1);
  socketOf(slow).resume();
  await slow.until((c) => c.closed, 30_000, 'the close');
  expect(slow.closed!.code).toBe(SOCKET_CLOSE.BACKPRESSURE.code);
});

it('/ws: a reader that stopped is closed with 4008 once its backlog passes the limit, instead of silently losing frames', async () => {
  const a = await account(t, 'P5');
  const c = await openWs(t, a.handle, a.key);
  const sock = (c.ws as unknown as { _socket: Socket })._socket;
  sock.pause();
  const json = JSON.stringify({ symbol: 'BTCUSD', bid: 60_000, ask: 60_015, pad: 'x'.repeat(400) });
  for (let i = 0; i < 60_000; i++) {
    t.gw.gatewaySocket.onShardEvent({ kind: GATEWAY_EVENT.frame, key: handleHash(a.handle), data: { type: 'QUOTE', json } });
    if (i % 1000 === 999) await pause(1);
  }
  sock.resume();
  const closed = await c.closed;
  expect(closed.code).toBe(SOCKET_CLOSE.BACKPRESSURE.code);
  expect(c.frames.length).toBeLessThan(60_000);
});

it('a replay larger than the socket buffer arrives whole and in order (sent as the socket drains), then live', async () => {
  const a = await mustOpen(t.url, { id, apiKey: key, heartbeat: '0' });
  clients.push(a);
  await a.until((x) => x.of('ORDERS').length >= 1, 8_000, 'the snapshot pair');
  const cursor = a.of('ORDERS')[0]!;
  await a.close();
  // ~4 MB of TRADEs while away (the hard limit is 256 KiB); the account's stream is kept meanwhile.
  const n = 8_000;
  for (let i = 0; i < n; i++) t.gw.stream.onShardEvent({ kind: STREAM_EVENT.deal, key: id, data: { deal: deal(800_000 + i) } });
  await pause(10);
  const closes = t.gw.stream.stats().backpressureCloses;
  const b = await mustOpen(t.url, { id, apiKey: key, heartbeat: '0', since: `${cursor.epoch}:${cursor.seq}` });
  clients.push(b);
  // A client busy elsewhere for a moment: the replay must wait for it, not overflow its buffer.
  socketOf(b).pause();
  await pause(300);
  socketOf(b).resume();
  await b.until((x) => x.of('TRADE').length >= n, 30_000, 'every missed TRADE');
  expect(b.frames[0]).toMatchObject({ type: 'RESUMED', data: { recovered: true, replayed: n } });
  expect(b.of('TRADE').map((f) => f.data.ticket)).toEqual(Array.from({ length: n }, (_, i) => 800_000 + i));
  expect(b.of('TRADE').map((f) => f.seq)).toEqual(Array.from({ length: n }, (_, i) => cursor.seq + 1 + i));
  t.gw.stream.onShardEvent({ kind: STREAM_EVENT.deal, key: id, data: { deal: deal(900_000) } });
  await b.until((x) => x.of('TRADE').length > n, 8_000, 'the live TRADE');
  expect(b.of('TRADE').at(-1)!.seq).toBe(cursor.seq + n + 1);
  expect(b.closed).toBeNull();
  expect(t.gw.stream.stats().backpressureCloses).toBe(closes);
});
