// Upgrades of /v1/stream happen at once, inside uWS's upgrade handler, whenever the account's
// state is known in the main thread (no res.cork() from async code: the pinned uWS build can close
// such a socket right after `open`). The shard's stream.open then follows; the socket's requests
// wait for it, and the bookkeeping must balance.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mgmt, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { mustOpen } from '../helpers/stream-helpers.js';
import { SOCKET_CLOSE } from '../../src/stream/closeCodes.js';

let t: TestGateway;
let key: string;
let id: string;

beforeAll(async () => {
  t = await startTestGateway({ streamHistoryMaxAgeMs: 300 });
  const h = mgmt(t.managementKey);
  id = (await t.req('POST', '/ConnectEx', { headers: h, body: { user: 'upgrader', password: 'pw', server: 'Sim-P5-Demo' } })).body.id;
  key = (await t.req('POST', '/v1/keys', { headers: h, body: { label: 'k' } })).body.key;
});
afterAll(async () => {
  await t.stop();
});

const quotesAfter = (c: Awaited<ReturnType<typeof mustOpen>>, n: number, what: string) =>
  c.until((x) => x.frames.slice(n).filter((f) => f.type === 'QUOTE').length >= 2, 10_000, what);

describe('upgrading beside an open socket of the same account', () => {
  it('is synchronous, streams like any socket, and leaves no account state behind when all close', async () => {
    const s0 = t.gw.stream.stats();
    const a = await mustOpen(t.url, { apiKey: key, id, heartbeat: '0' });
    expect(t.gw.stream.stats().syncUpgrades).toBe(s0.syncUpgrades); // the first one waits for the shard
    const b = await mustOpen(t.url, { apiKey: key, id, heartbeat: '0' });
    expect(t.gw.stream.stats().syncUpgrades).toBe(s0.syncUpgrades + 1);
    // The second socket gets its P5 snapshots and quotes like the first.
    await b.until((x) => x.of('ORDERS').length >= 1, 8_000, 'snapshots on b');
    expect(b.frames.slice(0, 2).map((f) => f.type)).toEqual(['POSITIONS', 'ORDERS']);
    b.send({ action: 'subscribe', symbol: 'BTCUSD' });
    await b.next('SUBSCRIBED', 0);
    await quotesAfter(b, 0, 'quotes on b');
    // The first socket leaving does not end the account's stream for the second.
    await a.close();
    const n = b.frames.length;
    await quotesAfter(b, n, 'quotes on b after a closed');
    // A third one while b is open: synchronous again.
    const c = await mustOpen(t.url, { apiKey: key, id, heartbeat: '0' });
    expect(t.gw.stream.stats().syncUpgrades).toBe(s0.syncUpgrades + 2);
    await b.close();
    await c.close();
    // Every stream.open was paired with a stream.close (the last one after the history hold,
    // streamHistoryMaxAgeMs): the account's state is gone...
    const deadline = Date.now() + 5_000;
    while (t.gw.stream.stats().accounts > s0.accounts && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(t.gw.stream.stats()).toMatchObject({ sockets: s0.sockets, accounts: s0.accounts });
    // ...and a new socket starts it again. Its seat, binding and server are known here now, so it
    // is upgraded at once too, while the shard sets the account's stream up; what the socket asks
    // meanwhile (snapshot, subscribe sent right after open) waits for that, and then works.
    const d = await mustOpen(t.url, { apiKey: key, id, heartbeat: '0' });
    expect(t.gw.stream.stats().syncUpgrades).toBe(s0.syncUpgrades + 3);
    d.send({ action: 'subscribe', symbol: 'BTCUSD' });
    await d.until((x) => x.of('ORDERS').length >= 1, 8_000, 'snapshots on d');
    expect(d.frames.slice(0, 2).map((f) => f.type)).toEqual(['POSITIONS', 'ORDERS']);
    expect(d.of('ERROR')).toEqual([]);
    await d.next('SUBSCRIBED', 0);
    await quotesAfter(d, 0, 'quotes on d');
    await d.close();
  });
});

describe('a position change while a synchronously upgraded socket waits for its stream.open', () => {
  it('P5: the socket still gets POSITIONS then ORDERS with snapshot:true first, never a change frame before them', async () => {
    const a = await mustOpen(t.url, { apiKey: key, id, heartbeat: '0' });
    await a.until((x) => x.of('ORDERS').length >= 1, 8_000, 'snapshots on a');
    // Hold the next socket's stream.open at the shard for a moment (as a busy shard would).
    const shards = t.gw.services.shards;
    const call = shards.call.bind(shards);
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    shards.call = ((k: string, op: string, args: unknown, o?: unknown) =>
      op === 'stream.open' ? held.then(() => call(k as never, op as never, args as never, o as never)) : call(k as never, op as never, args as never, o as never)) as typeof shards.call;
    let b: Awaited<ReturnType<typeof mustOpen>>;
    try {
      b = await mustOpen(t.url, { apiKey: key, id, heartbeat: '0' });
      const n = a.frames.length;
      const r = await t.req('GET', `/OrderSend?id=${id}&symbol=BTCUSD&operation=Buy&volume=0.01`, { headers: { 'x-api-key': key } });
      expect(r.status, r.text).toBe(200);
      // The change has reached the main thread (a got it) while b's stream.open is still held.
      await a.until((x) => x.frames.slice(n).some((f) => f.type === 'POSITIONS'), 8_000, 'the change on a');
    } finally {
      shards.call = call;
      release();
    }
    await b.until((x) => x.of('ORDERS').length >= 1, 8_000, 'snapshots on b');
    const state = b.frames.filter((f) => f.type === 'POSITIONS' || f.type === 'ORDERS');
    expect(state.slice(0, 2).map((f) => [f.type, f.data.snapshot])).toEqual([['POSITIONS', true], ['ORDERS', true]]);
    expect(state[0]!.data.positions.length).toBeGreaterThan(0); // the snapshot already has the new position
    await a.close();
    await b.close();
  });
});

// Subscribing again to a symbol whose topic sat without subscribers (the shard stopped sending its
// ticks meanwhile): the quote sent after SUBSCRIBED is the current one with its true age, not the
// frame cached when the topic was last live (old tick, ageMs of back then).
describe('subscribing again after a pause', () => {
  it('sends the current quote with its true ageMs', async () => {
    const c = await mustOpen(t.url, { apiKey: key, id, heartbeat: '0' });
    try {
      c.send({ action: 'subscribe', symbol: 'BTCUSD' });
      await c.until((x) => x.of('QUOTE').length >= 2, 10_000, 'quotes');
      c.send({ action: 'unsubscribe', symbol: 'BTCUSD' });
      await c.next('UNSUBSCRIBED');
      const lastSeen = Math.max(...c.of('QUOTE').map((f) => f.data.timeMscUtc as number));
      await new Promise((r) => setTimeout(r, 1_500)); // BTCUSD ticks ~5/s: many ticks nobody here saw
      const resubAt = Date.now();
      const n = c.frames.length;
      c.send({ action: 'subscribe', symbol: 'BTCUSD' });
      const q = await c.next('QUOTE', n);
      expect(c.frames.slice(n).findIndex((f) => f.type === 'SUBSCRIBED')).toBeLessThan(c.frames.slice(n).indexOf(q));
      // A tick from after the pause began, not the one cached before it, and an age measured when
      // the frame was written, after the subscribe (the cached frame's age was measured back then).
      // Stated without a bound on how fast this machine is (an age under 1 s was one).
      expect(q.data.timeMscUtc).toBeGreaterThan(lastSeen);
      expect(q.data.timeMscUtc + q.data.ageMs).toBeGreaterThanOrEqual(resubAt - 1); // ageMs is rounded
    } finally {
      await c.close();
    }
  });
});

// /ConnectEx with id= may bind an account to a login on another broker server (the platform comes
// from the server). Its open sockets were subscribed to the old server's market topics and stamped
// its clock: they must not go on as if nothing happened (quotes stopped while heartbeats said
// `connected`, and a P4 account went on getting P5 ORDERS snapshots).
describe('re-binding an account to a login on another server', () => {
  it('closes its sockets with 4012; a new socket streams the new server, with its platform', async () => {
    const h = mgmt(t.managementKey);
    const acc = (await t.req('POST', '/ConnectEx', { headers: h, body: { user: 'mover', password: 'pw', server: 'Sim-P5-Demo' } })).body.id;
    const a = await mustOpen(t.url, { apiKey: key, id: acc, heartbeat: '0' });
    a.send({ action: 'subscribe', symbol: 'BTCUSD' });
    await a.next('SUBSCRIBED', 0);
    await a.until((x) => x.of('ORDERS').length >= 1, 8_000, 'P5 snapshots');
    const r = await t.req('POST', '/ConnectEx', { headers: h, body: { id: acc, user: 'mover-p4', password: 'pw', server: 'Sim-P4-Demo' } });
    expect(r.status, r.text).toBe(200);
    await a.until((x) => x.closed, 8_000, 'the socket to be closed');
    expect(a.closed!.code).toBe(SOCKET_CLOSE.ACCOUNT_REBOUND.code);
    const b = await mustOpen(t.url, { apiKey: key, id: acc, heartbeat: '0' });
    try {
      // BTCUSD trades around the clock (EURUSD's quotes stop from Friday 21:55 UTC to Sunday 22:00).
      b.send({ action: 'subscribe', symbol: 'BTCUSD' });
      await b.until((x) => x.of('QUOTE').length >= 2, 10_000, 'quotes of the new server');
      const q = await t.req('GET', `/GetQuote?id=${acc}&symbol=BTCUSD&cached=0`, { headers: { 'x-api-key': key } });
      // Two simulated servers, two markets: the socket's quotes are the new server's. Told apart by the
      // spread (config/sim-servers.json: 18.00 on P4, 15.00 on P5, each within a few cents).
      const spread = (x: { bid: number; ask: number }) => x.ask - x.bid;
      expect(spread(q.body)).toBeGreaterThan(17);
      expect(Math.abs(spread(b.of('QUOTE').at(-1)!.data) - spread(q.body))).toBeLessThan(1);
      expect(b.of('ORDERS')).toEqual([]); // P4 now: no ORDERS frames, no initial snapshot
      expect(b.of('POSITIONS')).toEqual([]);
      // The old binding's account stream ended with it: a resume from it is not recovered.
      const snap = a.of('ORDERS')[0]!;
      const c = await mustOpen(t.url, { apiKey: key, id: acc, heartbeat: '0', since: `${snap.epoch}:${snap.seq}` });
      await c.until((x) => x.of('POSITIONS').length >= 1, 8_000, 'the snapshot after recovered:false');
      expect(c.frames[0]).toEqual({ type: 'RESUMED', data: { recovered: false, replayed: 0 } });
      expect(c.of('POSITIONS')[0]!.epoch).not.toBe(snap.epoch);
      await c.close();
    } finally {
      await b.close();
    }
  });

  // The same server, another login: no phase change need come (the account can stay 'connected'
  // throughout) and the server name is the same, so nothing told the stream; its sockets went on in
  // the old epoch with the other login's positions and deals.
  it('to another login on the same server: 4012 too, and the old position does not resume', async () => {
    const h = mgmt(t.managementKey);
    const acc = (await t.req('POST', '/ConnectEx', { headers: h, body: { user: 'mover-same-a', password: 'pw', server: 'Sim-P5-Demo' } })).body.id;
    const a = await mustOpen(t.url, { apiKey: key, id: acc, heartbeat: '0' });
    await a.until((x) => x.of('ORDERS').length >= 1, 8_000, 'P5 snapshots');
    const r = await t.req('POST', '/ConnectEx', { headers: h, body: { id: acc, user: 'mover-same-b', password: 'pw', server: 'Sim-P5-Demo' } });
    expect(r.status, r.text).toBe(200);
    await a.until((x) => x.closed, 8_000, 'the socket to be closed');
    expect(a.closed!.code).toBe(SOCKET_CLOSE.ACCOUNT_REBOUND.code);
    const snap = a.of('ORDERS')[0]!;
    const c = await mustOpen(t.url, { apiKey: key, id: acc, heartbeat: '0', since: `${snap.epoch}:${snap.seq}` });
    try {
      await c.until((x) => x.of('ORDERS').length >= 1, 8_000, 'the snapshot after recovered:false');
      expect(c.frames[0]).toEqual({ type: 'RESUMED', data: { recovered: false, replayed: 0 } });
      expect(c.of('ORDERS')[0]!.epoch).not.toBe(snap.epoch);
    } finally {
      await c.close();
    }
  });
});

describe('a socket whose account stream is not open at the shard (its open lost)', () => {
  it('is told and closed with 4010 when it subscribes (the client reconnects), not left open and silent', async () => {
    const s = await mustOpen(t.url, { apiKey: key, id, heartbeat: '0' });
    await s.until((x) => x.of('ORDERS').length >= 1, 8_000, 'snapshots');
    // The shard lets go of the account's stream under the open socket (what an owner that released
    // a node's opens did in cluster mode, chaos seed 512757386).
    await t.gw.services.shards.call(id, 'stream.close', { accountId: id });
    s.send({ action: 'subscribe', symbol: 'BTCUSD' });
    const err = await s.next('ERROR', 0);
    expect(err.data).toMatchObject({ error: 'NOT_FOUND', message: 'subscribe BTCUSD: no open stream for this account' });
    await s.until((x) => x.closed, 8_000, 'the socket closed');
    expect(s.closed?.code).toBe(SOCKET_CLOSE.ACCOUNT_UNAVAILABLE.code);
  });
});
