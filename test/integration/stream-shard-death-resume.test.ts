// One node: the thread of an account's shard dies (docs/stream.md, close 4011). The account stream is
// numbered by the main thread, and every frame is stored before it is sent, so its epoch goes on, as
// across a gateway SIGKILL: the sockets close 4011, a resume answers recovered:true with what the
// client missed, then the resync inside the stream (a TRADE for each deal the gateway did not see,
// then a POSITIONS/ORDERS snapshot:true pair), then live frames, in the same epoch, each seq once.
// Before, the stream began a new epoch at every shard death: every resume answered recovered:false.
// Real simulator behind a bridge (a deal can be made at the broker while the shard is down), real
// gateway whose shard the test kills and keeps down.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { SOCKET_CLOSE } from '../../src/stream/closeCodes.js';
import { allowShardUp, keepShardDown, mgmt, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { connect, startBridgeSim, type BridgeSim } from '../helpers/sim-helpers.js';
import { expectAccountStream, mustOpen, type Frame, type StreamClient } from '../helpers/stream-helpers.js';
import { until } from '../helpers/until.js';

let bs: BridgeSim;
let t: TestGateway;
let key: string;
const clients: StreamClient[] = [];
const ACCOUNT = new Set(['POSITIONS', 'ORDERS', 'TRADE']);
const accountFrames = (c: StreamClient) => c.frames.filter((f) => ACCOUNT.has(f.type));

beforeAll(async () => {
  bs = await startBridgeSim();
  t = await startTestGateway({ brokerMode: 'bridge', bridgeUrl: bs.url }, { downableShards: true });
  key = (await t.req('POST', '/v1/keys', { headers: mgmt(t.managementKey), body: { label: 'bot' } })).body.key;
}, 60_000);
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close()));
  await t?.stop();
  await bs?.close();
});

async function bind(user: string): Promise<string> {
  const r = await t.req('POST', '/ConnectEx', { headers: mgmt(t.managementKey), body: { user, password: 'pw', server: 'Sim-P5-Demo' } });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body.id as string;
}

async function open(id: string, q: Record<string, string> = {}): Promise<StreamClient> {
  const c = await mustOpen(t.url, { id, apiKey: key, heartbeat: '0', ...q });
  clients.push(c);
  return c;
}

async function buy(id: string): Promise<void> {
  const r = await t.req('GET', `/OrderSend?id=${id}&symbol=BTCUSD&operation=Buy&volume=0.01`, { headers: { 'x-api-key': key } });
  expect(r.status, r.text).toBe(200);
}

/**
 * A client's resume while the account's shard is down: its socket waits for the new thread. Each start
 * of the thread that crashes is a death too, and closes it 4011 again (docs/stream.md): it reconnects
 * with the same position, as a client does, until it is answered. `meanwhile` runs once the first
 * socket is open (the test lets the shard start then).
 */
async function resume(id: string, since: string, meanwhile: () => void): Promise<StreamClient> {
  let first = true;
  for (;;) {
    const c = await open(id, { since });
    if (first) meanwhile();
    first = false;
    await c.until((x) => x.frames.length > 0 || x.closed, 30_000, 'RESUMED, or a close');
    if (c.frames.length > 0) return c;
    expect(c.closed).toEqual({ code: SOCKET_CLOSE.RUNTIME_RESTARTED.code, reason: SOCKET_CLOSE.RUNTIME_RESTARTED.reason });
  }
}

/** The resync pair inside the stream: POSITIONS then ORDERS, snapshot:true, consecutive seqs. */
function resyncPair(c: StreamClient): Frame | undefined {
  const acc = accountFrames(c);
  const i = acc.findIndex((f) => f.type === 'POSITIONS' && f.data.snapshot === true);
  return i >= 0 && acc[i + 1]?.type === 'ORDERS' ? acc[i] : undefined;
}

/** Every TRADE ticket once. */
function expectTradesOnce(c: StreamClient): number[] {
  const tickets = c.of('TRADE').map((f) => f.data.ticket as number);
  expect(new Set(tickets).size, JSON.stringify(tickets)).toBe(tickets.length);
  return tickets;
}

it('a client resumes across its shard\'s death (kept down a while, a deal made at the broker meanwhile): recovered:true, the missed frames, the deal as a TRADE, a resync pair, then live, one epoch', async () => {
  const user = `shard-death-${Date.now()}`;
  const id = await bind(user);
  const shards = t.gw.services.shards;
  const shard = shards.shardFor(id);
  const c = await open(id);
  const snapshot = await c.next('ORDERS', 0, 15_000);
  // What the client has when it goes away: the snapshot; what it misses: a deal and its lists.
  await buy(id);
  await c.until((x) => x.of('TRADE').length >= 1 && accountFrames(x).at(-1)!.type !== 'TRADE', 10_000, 'the first deal and its lists');
  const missed = accountFrames(c).filter((f) => f.seq > snapshot.seq);

  keepShardDown(t, shard);
  await shards.kill(shard);
  await c.until((x) => x.closed, 10_000, 'the socket to close');
  expect(c.closed).toEqual({ code: SOCKET_CLOSE.RUNTIME_RESTARTED.code, reason: SOCKET_CLOSE.RUNTIME_RESTARTED.reason });

  // While no thread runs the account: a deal at the broker, which no event brings to the gateway.
  const direct = await connect(bs.sim, 'Sim-P5-Demo', user, 'pw');
  const placed = await direct.orderSend({ symbol: 'BTCUSD', type: 'Buy', volume: 0.01 });
  expect(placed.ok).toBe(true);
  const brokerDeal = placed.ok ? placed.deals[0]!.ticket : 0;
  await direct.disconnect();

  // The client reconnects at once: its socket waits for the new thread, then is answered.
  const back = await resume(id, `${snapshot.epoch}:${snapshot.seq}`, () => allowShardUp(t, shard));
  await back.until((x) => x.frames.length >= 1 + (x.frames[0]?.data.replayed ?? 0), 20_000, 'the replay');
  expect(back.frames[0]).toEqual({ type: 'RESUMED', data: { recovered: true, replayed: missed.length } });
  expect(back.frames.slice(1, 1 + missed.length)).toEqual(missed);
  const pair = await back.until(resyncPair, 20_000, 'the resync pair');
  expect(pair.epoch).toBe(snapshot.epoch);
  expect(pair.data.positions).toHaveLength(2);
  // The deal made while the shard was down is a TRADE before the pair; every deal once.
  expect(expectTradesOnce(back)).toContain(brokerDeal);
  expect(back.of('TRADE').find((f) => f.data.ticket === brokerDeal)!.seq).toBeLessThan(pair.seq);

  // Live on the new thread, same epoch, consecutive.
  const n = back.frames.length;
  await buy(id);
  const live = await back.next('TRADE', n, 15_000);
  expect(live.epoch).toBe(snapshot.epoch);
  expect(expectTradesOnce(back)).toHaveLength(3);
  expectAccountStream(back.frames);
  // Subscriptions are the socket's: made again, they stream.
  back.send({ action: 'subscribe', symbol: 'BTCUSD' });
  await back.next('QUOTE', n, 15_000);
}, 90_000);

it('a stream held with no socket when its shard dies goes on on the new thread: a later resume gets what happened there, in the same epoch', async () => {
  const id = await bind(`shard-death-held-${Date.now()}`);
  const shards = t.gw.services.shards;
  const c = await open(id);
  const snapshot = await c.next('ORDERS', 0, 15_000);
  await c.close(); // the stream is held for streamHistoryMaxAgeMs
  const deaths = shards.restarts();
  await shards.kill(shards.shardFor(id));
  await until(() => shards.restarts() > deaths && shards.allReady(), 'the shard up again', 20_000);
  await buy(id);
  await buy(id);

  const back = await open(id, { since: `${snapshot.epoch}:${snapshot.seq}` });
  await back.until((x) => x.frames[0] !== undefined && x.of('TRADE').length >= 2 && resyncPair(x), 20_000, 'both deals and the resync pair');
  expect(back.frames[0]).toMatchObject({ type: 'RESUMED', data: { recovered: true } });
  expect(expectTradesOnce(back)).toHaveLength(2);
  for (const f of accountFrames(back)) expect(f.epoch).toBe(snapshot.epoch);
  expect(accountFrames(back)[0]!.seq).toBe(snapshot.seq + 1);
  expectAccountStream(back.frames);
}, 60_000);
