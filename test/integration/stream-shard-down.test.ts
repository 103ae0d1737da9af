// A shard that dies and does not come back (every new start of it crashes, as one crashing while it
// rehydrates; the supervisor keeps restarting it with backoff): the sockets of its accounts, on
// /v1/stream and on /ws, are closed with 4011 when it dies, not left open and silent until a new
// thread is ready (which may never be). Sockets of accounts on the other shard stay open and keep
// streaming. Once the shard may start again, its account streams again.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { SOCKET_CLOSE } from '../../src/stream/closeCodes.js';
import { account, op, openWs, type Acct, type WsClient } from '../helpers/gateway-helpers.js';
import { allowShardUp, keepShardDown, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { mustOpen, type StreamClient } from '../helpers/stream-helpers.js';
import { until } from '../helpers/until.js';

let t: TestGateway;
/** One account on each shard: `down`'s shard is killed and kept down, `up`'s runs on. */
let down: Acct;
let up: Acct;
const streams: StreamClient[] = [];
const sockets: WsClient[] = [];

beforeAll(async () => {
  t = await startTestGateway({ shards: 2 }, { downableShards: true });
  const shards = t.gw.services.shards;
  const byShard = new Map<number, Acct>();
  while (byShard.size < 2) {
    const a = await account(t, 'P5');
    if (!byShard.has(shards.shardFor(a.id))) byShard.set(shards.shardFor(a.id), a);
  }
  [down, up] = [byShard.get(0)!, byShard.get(1)!];
});
afterAll(async () => {
  await Promise.all(streams.map((c) => c.close()));
  for (const s of sockets) s.ws.terminate();
  await t?.stop();
});

/** A /v1/stream socket of the account past its snapshot (its shard's) and subscribed to BTCUSD, and
 *  its /ws socket with BTCUSD quotes (its session's, on its shard), both streaming. */
async function streaming(a: Acct): Promise<{ stream: StreamClient; ws: WsClient }> {
  const stream = await mustOpen(t.url, { id: a.id, apiKey: a.key, heartbeat: '0' });
  streams.push(stream);
  await stream.next('ORDERS', 0, 15_000);
  stream.send({ action: 'subscribe', symbol: 'BTCUSD' });
  await stream.next('QUOTE', 0, 15_000);
  const ws = await openWs(t, a.handle, a.key);
  sockets.push(ws);
  expect((await op(t, a, 'Subscribe', { symbol: 'BTCUSD', interval: 0 })).status).toBe(200);
  await ws.waitFor((f) => f.type === 'QUOTE', 15_000);
  return { stream, ws };
}

it('a shard that dies and stays down: its accounts\' sockets close with 4011 at once, the other shard\'s keep streaming', async () => {
  const shards = t.gw.services.shards;
  const shard = shards.shardFor(down.id);
  const a = await streaming(down);
  const b = await streaming(up);
  const restarts = shards.restarts();

  let wsClosed: { code: number; reason: string } | undefined;
  void a.ws.closed.then((c) => (wsClosed = c));

  keepShardDown(t, shard);
  await shards.kill(shard);
  await a.stream.until((c) => c.closed, 15_000, 'the down shard\'s stream socket to close');
  await until(() => wsClosed !== undefined, 'the down shard\'s /ws socket to close');
  for (const closed of [a.stream.closed!, wsClosed!]) {
    expect(closed).toEqual({ code: SOCKET_CLOSE.RUNTIME_RESTARTED.code, reason: SOCKET_CLOSE.RUNTIME_RESTARTED.reason });
  }
  // It did not come back: its new starts crash too (the closes did not wait for one to be ready).
  await until(() => shards.restarts() >= restarts + 2, 'a start of the shard to crash too', 15_000);
  expect(shards.health()[shard]!.ready).toBe(false);

  // The other shard's sockets are open and still get frames.
  const [streamed, pushed] = [b.stream.frames.length, b.ws.frames.length];
  await b.stream.until((c) => c.frames.slice(streamed).filter((f) => f.type === 'QUOTE').length >= 3, 15_000, 'three more quotes on the other shard\'s stream');
  await until(() => b.ws.frames.slice(pushed).filter((f) => f.type === 'QUOTE').length >= 3, 'three more quotes on the other shard\'s /ws', 15_000);
  expect(b.stream.closed).toBeNull();
  expect(b.ws.ws.readyState).toBe(b.ws.ws.OPEN);

  // Allowed to start again, the shard comes back and its account streams again, on both sockets.
  allowShardUp(t, shard);
  await until(() => shards.health()[shard]!.ready, 'the shard to be up again', 30_000);
  await streaming(down);
  expect(b.stream.closed).toBeNull();
}, 90_000);
