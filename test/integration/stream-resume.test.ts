// Resuming /v1/stream (docs/stream.md "Resuming"): a real gateway, real sockets, trades through
// /OrderSend while the client is away. The client reconnects with since=<epoch>:<seq> of the last
// account frame it got and must get RESUMED first, then exactly the frames it missed (the same
// bytes a socket that stayed connected got), then live frames; or recovered:false and snapshots
// when the history no longer holds the gap.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mgmt, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { expectAccountStream, mustOpen, openStream, type Frame, type StreamClient } from '../helpers/stream-helpers.js';

let t: TestGateway;
let key: string;
const clients: StreamClient[] = [];
const ACCOUNT = new Set(['POSITIONS', 'ORDERS', 'TRADE']);

async function open(query: Record<string, string>): Promise<StreamClient> {
  const c = await mustOpen(t.url, { apiKey: key, heartbeat: '0', ...query });
  clients.push(c);
  return c;
}

async function account(user: string): Promise<string> {
  const r = await t.req('POST', '/ConnectEx', { headers: mgmt(t.managementKey), body: { user, password: 'pw', server: 'Sim-P5-Demo' } });
  expect(r.status).toBe(200);
  return r.body.id as string;
}

/** A market buy through the classic route: a TRADE and a POSITIONS change in the account stream. */
async function buy(id: string): Promise<void> {
  const r = await t.req('GET', `/OrderSend?id=${id}&symbol=BTCUSD&operation=Buy&volume=0.01`, { headers: { 'x-api-key': key } });
  expect(r.status, r.text).toBe(200);
}

const accountFrames = (c: StreamClient) => c.frames.filter((f) => ACCOUNT.has(f.type));
const position = (f: Frame) => `${f.epoch}:${f.seq}`;

/** Waits until the socket's account stream has at least `trades` TRADE frames and is quiet at its end. */
async function settled(c: StreamClient, trades: number): Promise<void> {
  await c.until((x) => x.of('TRADE').length >= trades, 10_000, `${trades} TRADE frames`);
  // The POSITIONS change of the last deal follows its TRADE (or precedes it): wait for both kinds after the last buy.
  await c.until((x) => {
    const acc = accountFrames(x);
    const lastTrade = acc.findLastIndex((f) => f.type === 'TRADE');
    return acc.slice(lastTrade - 1).some((f) => f.type === 'POSITIONS');
  }, 10_000, 'the POSITIONS change of the last deal');
}

beforeAll(async () => {
  t = await startTestGateway({ streamHistoryMaxEvents: 8 });
  key = (await t.req('POST', '/v1/keys', { headers: mgmt(t.managementKey), body: { label: 'resume' } })).body.key;
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close()));
  await t?.stop();
});

describe('resume with since=<epoch>:<seq>', () => {
  it('recovered:true: RESUMED first, then exactly the missed frames in order (the bytes a connected socket got), then live', async () => {
    const id = await account('resume-a');
    const witness = await open({ id });
    const a = await open({ id });
    await a.until((x) => x.of('ORDERS').length >= 1, 8_000, 'the snapshot pair');
    const cursor = accountFrames(a).at(-1)!;
    await a.close();
    await buy(id);
    await buy(id);
    await settled(witness, 2);
    const b = await open({ id, since: position(cursor) });
    await b.until((x) => x.frames.length >= 1 && x.frames.length >= 1 + x.frames[0]!.data.replayed, 8_000, 'the replay');
    expect(b.frames[0]).toEqual({ type: 'RESUMED', data: { recovered: true, replayed: expect.any(Number) } });
    const replayed = b.frames.slice(1, 1 + b.frames[0]!.data.replayed);
    const missed = accountFrames(witness).filter((f) => f.seq > cursor.seq && f.seq <= replayed.at(-1)!.seq);
    expect(replayed.length).toBeGreaterThanOrEqual(4); // two TRADEs and two POSITIONS at least
    expect(replayed).toEqual(missed);
    expect(replayed.map((f) => f.seq)).toEqual(replayed.map((_, i) => cursor.seq + 1 + i));
    expect(replayed.filter((f) => f.type === 'TRADE')).toHaveLength(2);
    expect(b.of('POSITIONS').filter((f) => f.data.snapshot)).toEqual([]); // no snapshot: its state plus the replay is current
    // Live from there on, continuing the same numbers.
    const n = b.frames.length;
    await buy(id);
    const live = await b.next('TRADE', n);
    expect(live.epoch).toBe(cursor.epoch);
    expectAccountStream(b.frames);
  });

  it('the stream is kept after the last socket closed: a trade made with no socket open is replayed', async () => {
    const id = await account('resume-b');
    const a = await open({ id });
    await a.until((x) => x.of('ORDERS').length >= 1, 8_000, 'the snapshot pair');
    const cursor = accountFrames(a).at(-1)!;
    await a.close();
    await buy(id);
    // Wait until the history holds the TRADE: a second resume until it does.
    let b: StreamClient | null = null;
    for (let i = 0; i < 50 && !b?.of('TRADE').length; i++) {
      await b?.close();
      b = await open({ id, since: position(cursor) });
      await b.until((x) => x.frames.length >= 1 + (x.frames[0]?.data.replayed ?? 0), 8_000, 'the replay');
      expect(b.frames[0]!.data.recovered).toBe(true);
    }
    const trades = b!.of('TRADE');
    expect(trades).toHaveLength(1);
    expect(trades[0]!.seq).toBeGreaterThan(cursor.seq);
    expectAccountStream(b!.frames);
  });

  it('recovered:false when the gap is no longer held (over streamHistoryMaxEvents): fresh snapshots follow, same epoch', async () => {
    const id = await account('resume-c');
    const witness = await open({ id });
    const a = await open({ id });
    await a.until((x) => x.of('ORDERS').length >= 1, 8_000, 'the snapshot pair');
    const cursor = accountFrames(a).at(-1)!;
    await a.close();
    for (let i = 0; i < 6; i++) await buy(id); // 12+ events, the history holds 8
    await settled(witness, 6);
    const b = await open({ id, since: position(cursor) });
    await b.until((x) => x.of('ORDERS').length >= 1, 8_000, 'the snapshots');
    expect(b.frames[0]).toEqual({ type: 'RESUMED', data: { recovered: false, replayed: 0 } });
    expect(b.frames[1]).toMatchObject({ type: 'POSITIONS', epoch: cursor.epoch, data: { snapshot: true } });
    expect(b.frames[2]).toMatchObject({ type: 'ORDERS', epoch: cursor.epoch, seq: b.frames[1]!.seq, data: { snapshot: true } });
    expect(b.frames[1]!.seq).toBeGreaterThanOrEqual(cursor.seq + 12);
    expect(b.frames[1]!.data.positions.length).toBeGreaterThanOrEqual(6);
    expect(b.of('TRADE')).toEqual([]);
  });

  it('recovered:false for an epoch the gateway does not know; a since that is not <epoch>:<seq> is a 400 before the upgrade', async () => {
    const id = await account('resume-d');
    const b = await open({ id, since: 'nosuchepoch:5' });
    await b.until((x) => x.of('ORDERS').length >= 1, 8_000, 'the snapshots');
    expect(b.frames[0]).toEqual({ type: 'RESUMED', data: { recovered: false, replayed: 0 } });
    for (const since of ['5', 'a:b', 'a:-1', 'a:1:2', '']) {
      const r = await openStream(t.url, { id, apiKey: key, since });
      expect(r, since).toMatchObject({ refused: true, status: 400, body: { error: 'BAD_REQUEST' } });
    }
  });

  it('since=message: nothing of the account stream before the first message; a resume message is answered as the parameter would be', async () => {
    const id = await account('resume-e');
    const a = await open({ id });
    await a.until((x) => x.of('ORDERS').length >= 1, 8_000, 'the snapshot pair');
    const cursor = accountFrames(a).at(-1)!;
    await a.close();
    await buy(id);
    const b = await open({ id, since: 'message' });
    // A subscribe-free wait: the gateway holds the account stream, so no snapshot arrives.
    b.send({ action: 'resume', since: position(cursor) });
    await b.until((x) => x.of('TRADE').length >= 1, 8_000, 'the replayed TRADE');
    expect(b.frames[0]).toMatchObject({ type: 'RESUMED', data: { recovered: true } });
    expect(b.of('POSITIONS').filter((f) => f.data.snapshot)).toEqual([]);
    // Later resume messages are errors and change nothing.
    b.send({ action: 'resume', since: position(cursor) });
    const err = await b.next('ERROR', 0);
    expect(err.data.error).toBe('BAD_REQUEST');
    expectAccountStream(b.frames);
  });
});
