// Candle fan-out rules with events entering where the shards' events enter (StreamHub.onShardEvent):
// duplicates forwarded by two shards are dropped, `closed:true` goes out exactly once per bar, late
// updates of a finished bar are dropped, and a socket that joined a bar mid-way gets partial:true
// for that bar only. Injected bars lie in the future so the simulator's own (older) bars are ignored.
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { CandleEvent } from '../../src/market/timeframes.js';
import { STREAM_EVENT } from '../../src/runtime/hosts/streamCommands.js';
import { mgmt, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { mustOpen, type StreamClient } from '../helpers/stream-helpers.js';

const SERVER = 'Sim-P5-Demo';
let t: TestGateway;
let id: string;
let key: string;
const clients: StreamClient[] = [];

beforeAll(async () => {
  t = await startTestGateway();
  const h = mgmt(t.managementKey);
  id = (await t.req('POST', '/ConnectEx', { headers: h, body: { user: 'stream-candles', password: 'pw', server: SERVER } })).body.id;
  key = (await t.req('POST', '/v1/keys', { headers: h, body: { label: 'c' } })).body.key;
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close()));
  await t?.stop();
});

function candle(bar: number, ticks: number, closed: boolean): CandleEvent {
  return {
    symbol: 'BTCUSD', timeframe: 'M1', closed,
    candle: { time: bar, serverTime: bar + 7_200, open: 1, high: 1 + ticks, low: 1, close: 1 + ticks / 2, ticks, volume: ticks },
  };
}
const inject = (ev: CandleEvent) => t.gw.stream.onShardEvent({ kind: STREAM_EVENT.candle, key: SERVER, data: { server: SERVER, candle: ev } });

it('dedupes across shards, closes each bar once, drops late updates; partial only for the bar joined mid-way', async () => {
  const a = await mustOpen(t.url, { id, apiKey: key, heartbeat: '0' });
  clients.push(a);
  a.send({ action: 'subscribe', symbol: 'BTCUSD', timeframe: 'M1' });
  await a.next('SUBSCRIBED', 0);
  const real = await a.next('CANDLE', 0);
  expect(real.data.partial).toBe(true); // the simulator's current bar, joined mid-way

  const f = Math.ceil(Date.now() / 60_000) * 60 + 3_600; // a bar an hour ahead: opens after `a` joined
  const n = a.frames.length;
  for (const ev of [
    candle(f, 1, false), candle(f, 1, false), // the second shard forwards the same update
    candle(f, 2, false), candle(f, 2, true), candle(f, 2, true), // two closes of the same bar
    candle(f, 3, false), // a late update of the finished bar
    candle(f + 60, 1, false),
  ]) inject(ev);
  await a.until((x) => x.frames.slice(n).some((fr) => fr.type === 'CANDLE' && fr.data.timeUtc === f + 60), 10_000, 'the next bar');
  const got = a.frames.slice(n).filter((fr) => fr.type === 'CANDLE' && fr.data.timeUtc >= f);
  expect(got.map((fr) => [fr.data.timeUtc - f, fr.data.ticks, fr.data.closed])).toEqual([
    [0, 1, false], [0, 2, false], [0, 2, true], [60, 1, false],
  ]);
  // `a` joined before these bars opened: it sees them whole.
  expect(got.every((fr) => fr.data.partial === false)).toBe(true);
  // One topic counter, no gaps.
  got.forEach((fr, i) => i > 0 && expect(fr.seq).toBe(got[i - 1]!.seq + 1));

  // `b` subscribes while bar f+60 is the bar in progress: it gets its latest update at once and every
  // frame of that bar flagged partial, then the next bar whole.
  const b = await mustOpen(t.url, { id, apiKey: key, heartbeat: '0' });
  clients.push(b);
  b.send({ action: 'subscribe', symbol: 'BTCUSD', timeframes: ['M1'] });
  const first = await b.next('CANDLE', 0);
  expect(first.data).toMatchObject({ timeUtc: f + 60, ticks: 1, partial: true });
  inject(candle(f + 60, 2, false));
  inject(candle(f + 60, 2, true));
  inject(candle(f + 120, 1, false));
  await b.until((x) => x.of('CANDLE').some((fr) => fr.data.timeUtc === f + 120), 10_000, 'the bar after');
  const bs = b.of('CANDLE').filter((fr) => fr.data.timeUtc >= f + 60).map((fr) => [fr.data.timeUtc - f, fr.data.closed, fr.data.partial]);
  expect(bs).toEqual([[60, false, true], [60, false, true], [60, true, true], [120, false, false]]);
  // Meanwhile `a` saw the same bar without the flag.
  await a.until((x) => x.of('CANDLE').some((fr) => fr.data.timeUtc === f + 120), 10_000, 'a: the bar after');
  expect(a.of('CANDLE').filter((fr) => fr.data.timeUtc >= f + 60).every((fr) => fr.data.partial === false)).toBe(true);
});

it('counts this node\'s sockets on a symbol\'s quotes and on a timeframe\'s candles (how the owner orders its relay: ownerOrder)', async () => {
  const tick = (symbol: string) => ({ kind: STREAM_EVENT.tick, key: SERVER, data: { server: SERVER, tick: { symbol, bid: 1, ask: 1.1, timeMsc: 1 }, source: 's0' } }) as const;
  const bar = (timeframe: CandleEvent['timeframe']) => ({ kind: STREAM_EVENT.candle, key: SERVER, data: { server: SERVER, candle: { ...candle(60, 1, false), symbol: 'GBPUSD', timeframe } } }) as const;
  const sockets = (ev: Parameters<TestGateway['gw']['stream']['localSockets']>[0]) => t.gw.stream.localSockets(ev);
  expect(sockets(tick('GBPUSD'))).toBe(0);
  const b = await mustOpen(t.url, { id, apiKey: key, heartbeat: '0' });
  const c = await mustOpen(t.url, { id, apiKey: key, heartbeat: '0' });
  clients.push(b, c);
  b.send({ action: 'subscribe', symbol: 'GBPUSD', timeframes: ['M5'] });
  c.send({ action: 'subscribe', symbol: 'GBPUSD' });
  await Promise.all([b.next('SUBSCRIBED', 0), c.next('SUBSCRIBED', 0)]);
  expect(sockets(tick('GBPUSD'))).toBe(2);
  expect(sockets(bar('M5'))).toBe(1);
  expect(sockets(bar('H1'))).toBe(0);
  expect(sockets(tick('USDJPY'))).toBe(0);
  expect(sockets({ kind: 'stream.positions', key: id, data: { src: 1, v: 1, positions: [] } })).toBe(0);
  c.send({ action: 'unsubscribe', symbol: 'GBPUSD' });
  await c.next('UNSUBSCRIBED', 0);
  expect(sockets(tick('GBPUSD'))).toBe(1);
});

it('quotes: copies from two shards and the relay merged by source: each tick of a millisecond once and in order (A, B, A again); the relay\'s counted as relayed', async () => {
  const a = await mustOpen(t.url, { id, apiKey: key, heartbeat: '0' });
  clients.push(a);
  a.send({ action: 'subscribe', symbol: 'XAUUSD' });
  await a.next('SUBSCRIBED', 0);
  const relayedBefore = t.gw.stream.stats().quotesInRelay;
  const ms = Date.now() + 3_600_000; // ahead of the simulator's own ticks, which are dropped from then on
  const n = a.frames.length;
  const copy = (at: number, bid: number, source: string) => t.gw.stream.onShardEvent({
    kind: STREAM_EVENT.tick, key: SERVER, data: { server: SERVER, tick: { symbol: 'XAUUSD', bid, ask: bid + 1, timeMsc: at }, source, ...(source.startsWith('n:') ? { relayed: true as const } : {}) },
  });
  // Shard s0 delivers A B within the millisecond, s1 its copies later, the relay A B A (a return to
  // A that neither shard delivered yet), then the shards their A, and the next millisecond.
  for (const [bid, source] of [[2000, 's0'], [2001, 's0'], [2000, 's1'], [2001, 's1'], [2000, 'n:B'], [2001, 'n:B'], [2000, 'n:B'], [2000, 's0'], [2000, 's1']] as const) copy(ms, bid, source);
  copy(ms + 1, 2002, 's1');
  copy(ms + 1, 2002, 'n:B');
  await a.until((x) => x.frames.slice(n).some((fr) => fr.type === 'QUOTE' && fr.data.bid === 2002), 10_000, 'the next millisecond\'s quote');
  // A tick of the running simulator already on its way may land after `n`: only the scripted hour counts.
  const got = a.frames.slice(n).filter((fr) => fr.type === 'QUOTE' && fr.data.timeMscUtc >= ms);
  expect(got.map((fr) => fr.data.bid)).toEqual([2000, 2001, 2000, 2002]);
  got.forEach((fr, i) => i > 0 && expect(fr.seq).toBe(got[i - 1]!.seq + 1));
  expect(t.gw.stream.stats().quotesInRelay - relayedBefore).toBe(1);
});
