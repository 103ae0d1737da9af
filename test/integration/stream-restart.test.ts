// A shard that dies loses the stream state of its accounts: their sockets are closed with 4011 so
// clients reconnect, resume and resubscribe; after the supervisor restarted the shard, streaming works again.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { until } from '../helpers/until.js';
import { SOCKET_CLOSE } from '../../src/stream/closeCodes.js';
import { mgmt, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { mustOpen, openStream, type StreamClient } from '../helpers/stream-helpers.js';

let t: TestGateway;
let id: string;
let key: string;
const clients: StreamClient[] = [];

beforeAll(async () => {
  t = await startTestGateway();
  const h = mgmt(t.managementKey);
  id = (await t.req('POST', '/ConnectEx', { headers: h, body: { user: 'stream-restart', password: 'pw', server: 'Sim-P5-Demo' } })).body.id;
  key = (await t.req('POST', '/v1/keys', { headers: h, body: { label: 'r' } })).body.key;
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close()));
  await t?.stop();
});

it('closes with 4011 when the account shard restarts; a new socket streams again', async () => {
  const c = await mustOpen(t.url, { id, apiKey: key, heartbeat: '0' });
  clients.push(c);
  c.send({ action: 'subscribe', symbol: 'BTCUSD' });
  await c.next('QUOTE', 0);
  const before = await c.next('ORDERS', 0);
  const shards = t.gw.services.shards;
  await shards.kill(shards.shardFor(id));
  await c.until((x) => x.closed, 10_000, 'the socket to close');
  expect(c.closed!.code).toBe(SOCKET_CLOSE.RUNTIME_RESTARTED.code);
  // The supervisor restarts the shard; reconnecting works once it is back.
  let again: StreamClient | undefined;
  await until(async () => {
    const r = await openStream(t.url, { id, apiKey: key, heartbeat: '0' });
    if (!('refused' in r)) again = r;
    return again !== undefined;
  }, 'a stream to open once the shard is back', 30_000);
  expect(again).toBeDefined();
  clients.push(again!);
  // The account stream goes on in its epoch (numbered by the main thread, stored before sent): a
  // resume recovers, and what the dead shard had in flight comes in the resync inside the stream
  // (stream-shard-death-resume.test.ts). Before, a new epoch: recovered:false.
  const resumed = await mustOpen(t.url, { id, apiKey: key, heartbeat: '0', since: `${before.epoch}:${before.seq}` });
  clients.push(resumed);
  await resumed.until((x) => x.of('ORDERS').length >= 1, 10_000, 'the resync pair');
  expect(resumed.frames[0]).toMatchObject({ type: 'RESUMED', data: { recovered: true } });
  expect(resumed.of('ORDERS')[0]).toMatchObject({ epoch: before.epoch, data: { snapshot: true } });
  expect(resumed.of('ORDERS')[0]!.seq).toBeGreaterThan(before.seq);
  again!.send({ action: 'subscribe', symbol: 'BTCUSD' });
  await again!.next('QUOTE', 0);
});

it('stream gauges are on /metrics; shutting the gateway down closes sockets with 1001', async () => {
  const c = await mustOpen(t.url, { id, apiKey: key, heartbeat: '0' });
  clients.push(c);
  const m = await t.req('GET', '/metrics');
  expect(m.text).toMatch(/tagw_stream_sockets \d+/);
  expect(m.text).toContain('tagw_stream_coalescing_sockets');
  const closing = t.gw.close();
  await c.until((x) => x.closed, 10_000, 'the socket to close');
  expect(c.closed!.code).toBe(SOCKET_CLOSE.GOING_AWAY.code);
  await closing;
});
