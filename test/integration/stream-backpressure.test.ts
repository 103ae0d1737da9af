// A deliberately slow reader on /v1/stream: the others still get every frame; the slow one gets
// coalesced quotes (latest wins) and, when a state frame no longer fits under the hard limit, a
// clean close with 4008. Ticks and deals enter where the shards' events enter the fan-out
// (StreamHub.onShardEvent), at a rate the simulator alone would need hours for.
import type { Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Deal } from '../../src/market/orders.js';
import { SOCKET_CLOSE } from '../../src/stream/closeCodes.js';
import { STREAM_EVENT } from '../../src/runtime/hosts/streamCommands.js';
import { mgmt, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { expectAccountStream, mustOpen, type StreamClient } from '../helpers/stream-helpers.js';

const SERVER = 'Sim-P5-Demo';
let t: TestGateway;
let id: string;
let key: string;
const clients: StreamClient[] = [];
// Injected ticks are far in the future, so the simulator's own BTCUSD ticks are older and dropped.
let tickTime = Date.now() + 86_400_000;

beforeAll(async () => {
  t = await startTestGateway({ streamSoftLimitBytes: 16 * 1024, streamHardLimitBytes: 256 * 1024, streamSweepMs: 5 });
  const h = mgmt(t.managementKey);
  id = (await t.req('POST', '/ConnectEx', { headers: h, body: { user: 'stream-bp', password: 'pw', server: SERVER } })).body.id;
  key = (await t.req('POST', '/v1/keys', { headers: h, body: { label: 'bp' } })).body.key;
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close()));
  await t?.stop();
});

async function subscribed(): Promise<StreamClient> {
  const c = await mustOpen(t.url, { id, apiKey: key, heartbeat: '0' });
  clients.push(c);
  c.send({ action: 'subscribe', symbol: 'BTCUSD' });
  await c.next('SUBSCRIBED', 0);
  return c;
}

const socketOf = (c: StreamClient) => (c.ws as unknown as { _socket: Socket })._socket;
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

function injectTicks(n: number): void {
  for (let i = 0; i < n; i++) {
    const bid = 60_000 + (tickTime % 1000);
    const tick = { symbol: 'BTCUSD', bid, ask: bid + 15, timeMsc: ++tickTime };
    t.gw.stream.onShardEvent({ kind: STREAM_EVENT.tick, key: SERVER, data: { server: SERVER, tick, source: 's0' } });
  }
}

/** Small bursts with pauses so a reader that keeps up never builds backpressure, until the slow one is coalescing. */
async function fillUntilCoalescing(maxTicks = 400_000): Promise<number> {
  let sent = 0;
  while (t.gw.stream.stats().coalescingSockets === 0 && sent < maxTicks) {
    injectTicks(250);
    sent += 250;
    await pause(1);
  }
  expect(t.gw.stream.stats().coalescingSockets).toBeGreaterThan(0);
  return sent;
}

const quoteSeqs = (c: StreamClient) => c.of('QUOTE').map((f) => f.seq);

describe('slow reader', () => {
  it('gets coalesced quotes (latest wins) while a fast reader gets every frame', async () => {
    const fast = await subscribed();
    const slow = await subscribed();
    const start = fast.of('QUOTE').length;
    socketOf(slow).pause();
    let sent = await fillUntilCoalescing();
    // Keep publishing while the slow socket is out of the topic.
    for (let i = 0; i < 40; i++) {
      injectTicks(250);
      sent += 250;
      await pause(1);
    }
    const lastSeq = await fast.until((c) => {
      const q = c.of('QUOTE');
      return q.length - start >= sent ? q.at(-1)!.seq : undefined;
    }, 30_000, 'the fast reader to get every injected quote');
    // Every frame, in order, no gaps.
    const fs = quoteSeqs(fast);
    for (let i = 1; i < fs.length; i++) expect(fs[i]).toBe(fs[i - 1]! + 1);
    expect(fast.closed).toBeNull();

    socketOf(slow).resume();
    await slow.until((c) => c.of('QUOTE').some((f) => f.seq === lastSeq), 30_000, 'the slow reader to get the latest quote');
    const ss = quoteSeqs(slow);
    for (let i = 1; i < ss.length; i++) expect(ss[i]).toBeGreaterThanOrEqual(ss[i - 1]!);
    // Coalesced: it skipped quotes (a gap in seq), and got far fewer frames than were published.
    expect(ss.length).toBeLessThan(fs.length);
    expect(ss.some((s, i) => i > 0 && s > ss[i - 1]! + 1)).toBe(true);
    expect(slow.closed).toBeNull();
    // Once drained it rejoins the topic and gets live quotes again.
    const n = slow.frames.length;
    injectTicks(3);
    await slow.until((c) => c.frames.slice(n).filter((f) => f.type === 'QUOTE').length >= 3, 10_000, 'live quotes after catching up');
    expect(t.gw.stream.stats().coalescingSockets).toBe(0);
  });

  it('a bar that closed while the socket was coalescing still reaches it with closed:true, once, before the next bar', async () => {
    const c = await mustOpen(t.url, { id, apiKey: key, heartbeat: '0' });
    clients.push(c);
    c.send({ action: 'subscribe', symbol: 'BTCUSD', timeframe: 'M1' });
    await c.next('SUBSCRIBED', 0);
    // Bars far in the future, so the simulator's own BTCUSD M1 updates are older and dropped.
    const bar = Math.floor(tickTime / 60_000) * 60 + 3_600;
    const candle = (time: number, ticks: number, closed: boolean) => ({
      symbol: 'BTCUSD', timeframe: 'M1' as const, closed,
      candle: { time, serverTime: time + 7_200, open: 60_000, high: 60_010, low: 59_990, close: 60_005, ticks, volume: ticks },
    });
    const inject = (ev: ReturnType<typeof candle>) => t.gw.stream.onShardEvent({ kind: STREAM_EVENT.candle, key: SERVER, data: { server: SERVER, candle: ev } });
    inject(candle(bar, 1, false));
    await c.until((x) => x.of('CANDLE').some((f) => f.data.time - 7_200 === bar), 8_000, 'the first bar');
    socketOf(c).pause();
    await fillUntilCoalescing();
    inject(candle(bar, 2, false));
    inject(candle(bar, 3, true)); // the bar closes while the socket is behind...
    inject(candle(bar + 60, 1, false)); // ...and the next one has started
    socketOf(c).resume();
    await c.until((x) => x.of('CANDLE').some((f) => f.data.time - 7_200 === bar + 60), 30_000, 'the next bar');
    const ofBar = c.of('CANDLE').filter((f) => f.data.time - 7_200 === bar);
    expect(ofBar.filter((f) => f.data.closed).map((f) => f.data.ticks)).toEqual([3]);
    const closedAt = c.frames.findIndex((f) => f.type === 'CANDLE' && f.data.closed && f.data.time - 7_200 === bar);
    const nextAt = c.frames.findIndex((f) => f.type === 'CANDLE' && f.data.time - 7_200 === bar + 60);
    expect(closedAt).toBeLessThan(nextAt);
    await c.until(() => t.gw.stream.stats().coalescingSockets === 0, 10_000, 'the socket to catch up');
  });

  it('is closed with 4008 when state frames no longer fit under the hard limit; the others get every TRADE', async () => {
    const fast = await subscribed();
    const slow = await subscribed();
    socketOf(slow).pause();
    await fillUntilCoalescing();
    const deal = (ticket: number): Deal => ({
      ticket, order: ticket, position: ticket, symbol: 'BTCUSD', type: 'Buy', entry: 'in', volume: 0.01, price: 60_000,
      timeMsc: Date.now(), magic: 1, comment: 'x'.repeat(200), commission: -0.1, swap: 0, profit: 0,
    });
    const deals = 2_000; // ~500 bytes each: about 1 MB, well over the 256 KiB hard limit
    for (let i = 0; i < deals; i += 50) {
      for (let j = i; j < i + 50; j++) t.gw.stream.onShardEvent({ kind: STREAM_EVENT.deal, key: id, data: { deal: deal(900_000 + j) } });
      await pause(1);
    }
    await fast.until((c) => c.of('TRADE').length >= deals, 30_000, 'every TRADE on the fast reader');
    expectAccountStream(fast.frames);
    socketOf(slow).resume();
    await slow.until((c) => c.closed, 30_000, 'the slow reader to be closed');
    expect(slow.closed!.code).toBe(SOCKET_CLOSE.BACKPRESSURE.code);
    expect(slow.closed!.reason).toContain('too slow');
    // What it did get of its account stream has no gap: frames are dropped only by closing.
    const got = expectAccountStream(slow.frames);
    expect(got.length).toBeLessThan(deals + 1);
    expect(fast.closed).toBeNull();
    expect(t.gw.stream.stats().backpressureCloses).toBeGreaterThanOrEqual(1);
  });
});
