// /v1/stream end to end: a real gateway (shards, embedded simulator), accounts bound through
// /ConnectEx, real `ws` clients. BTCUSD quotes around the clock in the simulator, so it is the
// symbol these tests rely on.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mgmt, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { expectAccountStream, mustOpen, type StreamClient, simServerOffsetMs } from '../helpers/stream-helpers.js';

const HB_MS = 250;
let t: TestGateway;
let p5: string;
let p4: string;
let key: string;
const clients: StreamClient[] = [];

async function open(query: Record<string, string>): Promise<StreamClient> {
  const c = await mustOpen(t.url, query);
  clients.push(c);
  return c;
}

beforeAll(async () => {
  // Reconnect attempts at most 0.5 s apart: the upstream drops below end after 1.5 s, and the default
  // backoff (to 30 s) would try again only at 3.75 s. Two shards: the fan-out across shards.
  t = await startTestGateway({ streamHeartbeatMs: HB_MS, reconnectCapMs: 500, shards: 2 });
  const h = mgmt(t.managementKey);
  const a = await t.req('POST', '/ConnectEx', { headers: h, body: { user: 'stream-p5', password: 'pw', server: 'Sim-P5-Demo' } });
  const b = await t.req('POST', '/ConnectEx', { headers: h, body: { user: 'stream-p4', password: 'pw', server: 'Sim-P4-Demo' } });
  expect(a.status).toBe(200);
  expect(b.status).toBe(200);
  p5 = a.body.id;
  p4 = b.body.id;
  key = (await t.req('POST', '/v1/keys', { headers: h, body: { label: 'stream' } })).body.key;
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close()));
  await t?.stop();
});

const trade = (id: string, q: string) => t.req('GET', `/OrderSend?id=${id}&${q}`, { headers: { 'x-api-key': key } });

describe('snapshots after connecting', () => {
  it('P5: POSITIONS then ORDERS with snapshot:true come first', async () => {
    const c = await open({ id: p5, apiKey: key, heartbeat: '0' });
    await c.until((x) => x.frames.length >= 2, 8_000, 'two snapshot frames');
    // One position in the account stream for the pair: the seq of the last event they contain.
    expect(c.frames[0]).toMatchObject({ type: 'POSITIONS', seq: expect.any(Number), epoch: expect.stringMatching(/^[A-Za-z0-9_-]{1,32}$/), data: { snapshot: true } });
    expect(c.frames[1]).toMatchObject({ type: 'ORDERS', seq: c.frames[0]!.seq, epoch: c.frames[0]!.epoch, data: { snapshot: true } });
    expect(Array.isArray(c.frames[0]!.data.positions)).toBe(true);
    expect(Array.isArray(c.frames[1]!.data.orders)).toBe(true);
  });

  it('P4: no initial snapshot frames (SPEC §6: P5 only)', async () => {
    const c = await open({ id: p4, apiKey: key, heartbeat: '0' });
    c.send({ action: 'subscribe', symbol: 'BTCUSD' });
    await c.next('SUBSCRIBED');
    expect(c.of('POSITIONS')).toHaveLength(0);
    expect(c.of('ORDERS')).toHaveLength(0);
  });
});

describe('quotes and subscriptions', () => {
  for (const which of ['P5', 'P4'] as const) {
    it(`${which}: QUOTE frames carry server and UTC times, an age and a per-topic seq`, async () => {
      const c = await open({ id: which === 'P5' ? p5 : p4, apiKey: key, heartbeat: '0' });
      c.send({ action: 'subscribe', symbol: 'BTCUSD' });
      const ack = await c.next('SUBSCRIBED');
      expect(ack.data).toEqual({ symbol: 'BTCUSD', timeframes: [] });
      await c.until((x) => x.of('QUOTE').length >= 4, 10_000, 'four quotes');
      const qs = c.of('QUOTE');
      for (const q of qs) {
        expect(q.data.symbol).toBe('BTCUSD');
        expect(q.data.ask).toBeGreaterThan(q.data.bid);
        expect(q.data.timeMsc - q.data.timeMscUtc).toBe(simServerOffsetMs(q.data.timeMscUtc));
        expect(new Date(q.data.timeUtc).getTime()).toBe(q.data.timeMscUtc);
        expect(q.data.time).toBe(new Date(q.data.timeMsc).toISOString().slice(0, 23));
        expect(q.data.ageMs).toBeGreaterThanOrEqual(0);
      }
      // A fast reader sees the symbol's quotes without gaps.
      for (let i = 1; i < qs.length; i++) expect(qs[i]!.seq).toBe(qs[i - 1]!.seq + 1);
      // Every QUOTE carries the gateway's market epoch; account frames count separately, control frames not at all.
      expect(new Set(qs.map((q) => q.epoch)).size).toBe(1);
      expect(qs[0]!.epoch).toMatch(/^[A-Za-z0-9_-]{1,32}$/);
      expectAccountStream(c.frames);
    });
  }

  it('unsubscribe stops the quotes; subscribing again resumes them', async () => {
    const c = await open({ id: p5, apiKey: key, heartbeat: '0' });
    c.send({ action: 'subscribe', symbol: 'BTCUSD' });
    await c.until((x) => x.of('QUOTE').length >= 2, 10_000, 'quotes');
    c.send({ action: 'unsubscribe', symbol: 'BTCUSD' });
    const un = await c.next('UNSUBSCRIBED');
    expect(un.data.symbol).toBe('BTCUSD');
    const at = c.frames.indexOf(un);
    await new Promise((r) => setTimeout(r, 1_200)); // BTCUSD ticks about 5 times a second
    expect(c.frames.slice(at).filter((f) => f.type === 'QUOTE')).toHaveLength(0);
    c.send({ action: 'subscribe', symbol: 'BTCUSD' });
    const n = c.frames.length;
    await c.until((x) => x.frames.slice(n).filter((f) => f.type === 'QUOTE').length >= 2, 10_000, 'quotes again');
  });

  it('a burst of messages is answered in the order sent, each one: a subscribe is acked before the unsubscribe sent right after it', async () => {
    const c = await open({ id: p5, apiKey: key, heartbeat: '0' });
    const answers = (n: number) => c.frames.slice(n).filter((f) => ['SUBSCRIBED', 'UNSUBSCRIBED', 'ERROR'].includes(f.type));
    const n = c.frames.length;
    c.send({ action: 'subscribe', symbol: 'XAUUSD' });
    c.send({ action: 'unsubscribe', symbol: 'XAUUSD' });
    c.send({ action: 'subscribe', symbol: 'GBPUSD', timeframe: 'M1' });
    c.send({ action: 'unsubscribe', symbol: 'GBPUSD', timeframes: ['M1'] });
    c.send({ action: 'unsubscribe', symbol: 'EURUSD' });
    await c.until(() => answers(n).length >= 5, 8_000, 'five answers');
    expect(answers(n).map((f) => [f.type, f.data.symbol ?? f.data.message?.match(/EURUSD/)?.[0]])).toEqual([
      ['SUBSCRIBED', 'XAUUSD'], ['UNSUBSCRIBED', 'XAUUSD'], ['SUBSCRIBED', 'GBPUSD'], ['UNSUBSCRIBED', 'GBPUSD'], ['ERROR', 'EURUSD'],
    ]);
  });

  it('symbols arrays, timeframes as names or minutes, and unsubscribing only some timeframes', async () => {
    const c = await open({ id: p5, apiKey: key, heartbeat: '0' });
    c.send({ action: 'subscribe', symbols: ['BTCUSD', 'EURUSD'], timeframes: [1, 'H1'] });
    await c.until((x) => x.of('SUBSCRIBED').length >= 2, 8_000, 'two acks');
    const acks = c.of('SUBSCRIBED').map((f) => f.data);
    expect(acks).toEqual(expect.arrayContaining([{ symbol: 'BTCUSD', timeframes: ['M1', 'H1'] }, { symbol: 'EURUSD', timeframes: ['M1', 'H1'] }]));
    c.send({ action: 'unsubscribe', symbol: 'BTCUSD', timeframes: ['H1'] });
    const un = await c.next('UNSUBSCRIBED');
    expect(un.data).toEqual({ symbol: 'BTCUSD', timeframes: ['H1'], remainingTimeframes: ['M1'] });
    // Quotes and M1 candles of BTCUSD go on; H1 candles stop.
    const n = c.frames.length;
    await c.until((x) => x.frames.slice(n).some((f) => f.type === 'QUOTE' && f.data.symbol === 'BTCUSD'), 8_000, 'BTCUSD quotes');
    await c.until((x) => x.frames.slice(n).some((f) => f.type === 'CANDLE' && f.data.symbol === 'BTCUSD' && f.data.timeframe === 'M1'), 8_000, 'M1 candles');
    expect(c.frames.slice(n).some((f) => f.type === 'CANDLE' && f.data.symbol === 'BTCUSD' && f.data.timeframe === 'H1')).toBe(false);
  });

  it('unsubscribing a timeframe that is not subscribed is an ERROR that echoes the request, and changes nothing', async () => {
    const c = await open({ id: p5, apiKey: key, heartbeat: '0' });
    c.send({ action: 'subscribe', symbol: 'BTCUSD', timeframe: 'M1' });
    await c.next('SUBSCRIBED');
    const n = c.frames.length;
    c.send({ action: 'unsubscribe', symbol: 'BTCUSD', timeframes: ['M1', 'D1'] });
    c.send({ action: 'subscribe', symbol: 'BTCUSD' });
    await c.until((x) => x.frames.slice(n).some((f) => f.type === 'SUBSCRIBED'), 8_000, 'the second ack');
    const answers = c.frames.slice(n).filter((f) => ['SUBSCRIBED', 'UNSUBSCRIBED', 'ERROR'].includes(f.type));
    expect(answers.map((f) => f.type)).toEqual(['ERROR', 'SUBSCRIBED']);
    expect(answers[0]!.data.error).toBe('BAD_REQUEST');
    expect(answers[0]!.data.message).toContain('D1');
    expect(answers[0]!.data.request).toEqual({ action: 'unsubscribe', symbol: 'BTCUSD', timeframes: ['M1', 'D1'] });
    // M1 is still subscribed.
    expect(answers[1]!.data).toEqual({ symbol: 'BTCUSD', timeframes: ['M1'] });
  });

  it('a message with a field the protocol does not know is an ERROR naming it (and the nearest name), and does nothing', async () => {
    // As HTTP bodies and the /v1/proxy and /news queries: `timeFrame` (the spelling of /v1/proxy's
    // PriceHistory) must not become a subscription without candles.
    const c = await open({ id: p5, apiKey: key, heartbeat: '0' });
    const n = c.frames.length;
    c.send({ action: 'subscribe', symbol: 'BTCUSD', timeFrame: 'M1' });
    c.send({ action: 'unsubscribe', symbol: 'BTCUSD' });
    await c.until((x) => x.frames.slice(n).filter((f) => f.type === 'ERROR').length === 2, 8_000, 'two answers');
    const answers = c.frames.slice(n).filter((f) => ['SUBSCRIBED', 'UNSUBSCRIBED', 'ERROR'].includes(f.type));
    expect(answers.map((f) => f.type)).toEqual(['ERROR', 'ERROR']);
    expect(answers[0]!.data).toMatchObject({ error: 'INVALID_PARAMETER', request: { action: 'subscribe', symbol: 'BTCUSD', timeFrame: 'M1' } });
    expect(answers[0]!.data.message).toContain("unknown field 'timeFrame' (did you mean 'timeframe'?)");
    // Nothing was subscribed: the unsubscribe finds nothing.
    expect(answers[1]!.data.message).toContain('not subscribed to BTCUSD');
    expect(c.of('QUOTE')).toHaveLength(0);
  });

  it('bad client messages get ERROR frames and the socket stays open', async () => {
    const c = await open({ id: p5, apiKey: key, heartbeat: '0' });
    const errors = async (msg: unknown) => {
      const n = c.frames.length;
      c.send(msg);
      return c.next('ERROR', n);
    };
    expect((await errors('not json')).data.error).toBe('INVALID_JSON');
    expect((await errors({ action: 'dance', symbol: 'BTCUSD' })).data.error).toBe('BAD_REQUEST');
    expect((await errors({ action: 'subscribe' })).data.error).toBe('BAD_REQUEST');
    expect((await errors({ action: 'subscribe', symbol: 'BTCUSD', timeframe: 'M7' })).data.message).toContain('timeframe');
    const unknown = await errors({ action: 'subscribe', symbol: 'NOPE' });
    expect(unknown.data.error).toBe('BAD_REQUEST');
    expect(unknown.data.message).toContain('NOPE');
    expect((await errors({ action: 'unsubscribe', symbol: 'EURUSD' })).data.error).toBe('BAD_REQUEST');
    // Valid JSON nested too deeply to be echoed back (JSON.stringify runs out of stack): still an
    // ERROR frame, without the echo, and in its turn (it used to get no answer at all).
    const deep = await errors('['.repeat(5000) + ']'.repeat(5000));
    expect(deep.data.error).toBe('BAD_REQUEST');
    expect(deep.data.message).toContain('expected object');
    // 256 symbols of up to 64 characters, as the message may name, pass 16 KiB: answered like any
    // message (as on /ws, up to 64 KiB), not a connection dropped without a close frame (1006).
    const many = { action: 'subscribe', symbols: Array.from({ length: 256 }, (_, i) => `NOPE${String(i).padStart(60, '0')}`) };
    expect(JSON.stringify(many).length).toBeGreaterThan(16 * 1024);
    const n = c.frames.length;
    c.send(many);
    await c.until((x) => x.frames.slice(n).filter((f) => f.type === 'ERROR').length === 256 || x.closed, 15_000, '256 answers');
    expect(c.closed).toBeNull();
    expect((await errors({ action: 'subscribe', symbol: 'BTCUSD', pad: 'x'.repeat(40 * 1024) })).data.error).toBe('INVALID_PARAMETER');
    expect(c.closed).toBeNull();
    // Still usable.
    c.send({ action: 'subscribe', symbol: 'BTCUSD' });
    await c.next('QUOTE');
  });
});

describe('fan-out across shards', () => {
  it('two accounts of one server in different shards: each tick reaches subscribers once, the same frame for both', async () => {
    const h = mgmt(t.managementKey);
    const shards = t.gw.services.shards;
    const ids: string[] = [p5];
    for (let i = 0; i < 20 && ids.length < 2; i++) {
      const r = await t.req('POST', '/ConnectEx', { headers: h, body: { user: `stream-shard-${i}`, password: 'pw', server: 'Sim-P5-Demo' } });
      if (shards.shardFor(r.body.id) !== shards.shardFor(p5)) ids.push(r.body.id);
    }
    expect(ids).toHaveLength(2);
    const dup0 = t.gw.stream.stats().ticksDuplicate;
    const a = await open({ id: ids[0]!, apiKey: key, heartbeat: '0' });
    const b = await open({ id: ids[1]!, apiKey: key, heartbeat: '0' });
    a.send({ action: 'subscribe', symbol: 'BTCUSD' });
    b.send({ action: 'subscribe', symbol: 'BTCUSD' });
    await a.next('SUBSCRIBED', 0);
    await b.next('SUBSCRIBED', 0);
    await a.until((x) => x.of('QUOTE').length >= 8, 10_000, 'quotes on a');
    await b.until((x) => x.of('QUOTE').length >= 8, 10_000, 'quotes on b');
    for (const c of [a, b]) {
      const qs = c.of('QUOTE');
      for (let i = 1; i < qs.length; i++) {
        expect(qs[i]!.seq).toBe(qs[i - 1]!.seq + 1);
        expect(qs[i]!.data.timeMscUtc).toBeGreaterThan(qs[i - 1]!.data.timeMscUtc);
      }
    }
    // Both sockets got the very same frame for a seq both saw (one serialization, published). The
    // first quote after SUBSCRIBED is the current one, written for that socket (its own ageMs).
    const bySeq = new Map(b.of('QUOTE').slice(1).map((f) => [f.seq, JSON.stringify(f)]));
    const common = a.of('QUOTE').slice(1).filter((f) => bySeq.has(f.seq));
    expect(common.length).toBeGreaterThan(3);
    for (const f of common) expect(JSON.stringify(f)).toBe(bySeq.get(f.seq));
    // The second shard forwarded the same ticks and main dropped them.
    expect(t.gw.stream.stats().ticksDuplicate).toBeGreaterThan(dup0);
  });
});

describe('heartbeats', () => {
  it('report connection and per-symbol tick times; heartbeat=0 turns them off (heartbeat=false too, as the boolean parameters of /v1/proxy)', async () => {
    const on = await open({ id: p5, apiKey: key });
    const off = await open({ id: p5, apiKey: key, heartbeat: '0' });
    const offFalse = await open({ id: p5, apiKey: key, heartbeat: 'false' });
    const onTrue = await open({ id: p5, apiKey: key, heartbeat: 'true' });
    on.send({ action: 'subscribe', symbol: 'BTCUSD' });
    off.send({ action: 'subscribe', symbol: 'BTCUSD' });
    await on.next('SUBSCRIBED');
    const hb = await on.until((x) => x.of('HEARTBEAT').find((f) => f.data.symbols.length === 1 && f.data.symbols[0].lastTickTimeMsc !== null), 10_000, 'a heartbeat with tick times');
    expect(hb.data.connection).toBe('connected');
    const s = hb.data.symbols[0];
    expect(s.symbol).toBe('BTCUSD');
    expect(s.lastTickTimeMsc - s.lastTickTimeMscUtc).toBe(simServerOffsetMs(s.lastTickTimeMscUtc));
    expect(s.lastQuoteAgeMs).toBeGreaterThanOrEqual(0);
    expect(s.lastQuoteAgeMs).toBe(hb.data.timeMscUtc - s.lastTickTimeMscUtc);
    // Three heartbeats awaited, not counted in a window of 4 intervals (a loaded machine's timers run
    // late): the socket with heartbeat=0 got none over the same span.
    await on.until((x) => x.of('HEARTBEAT').length >= 3, 10_000, 'three heartbeats');
    await onTrue.until((x) => x.of('HEARTBEAT').length >= 1, 10_000, 'a heartbeat with heartbeat=true');
    expect(off.of('HEARTBEAT')).toHaveLength(0);
    expect(offFalse.of('HEARTBEAT')).toHaveLength(0);
    expect(off.of('QUOTE').length).toBeGreaterThan(0);
  });

  for (const which of ['P4', 'P5'] as const) {
    it(`${which}: an upstream drop shows reconnecting, then connected again${which === 'P5' ? ', then fresh snapshots' : ''}`, async () => {
      const id = which === 'P5' ? p5 : p4;
      const c = await open({ id, apiKey: key });
      await c.next('HEARTBEAT');
      await t.gw.services.shards.call(id, 'account.fault', { accountId: id, fault: { kind: 'drop', durationMs: 1_500 } });
      const rec = await c.until((x) => x.of('HEARTBEAT').find((f) => f.data.connection === 'reconnecting'), 8_000, 'reconnecting');
      const after = c.frames.indexOf(rec);
      await c.until((x) => x.frames.slice(after).find((f) => f.type === 'HEARTBEAT' && f.data.connection === 'connected'), 15_000, 'connected again');
      if (which === 'P5') {
        await c.until((x) => x.frames.slice(after).find((f) => f.type === 'ORDERS' && f.data.snapshot === true), 8_000, 'fresh snapshots');
        const snaps = c.frames.slice(after).filter((f) => (f.type === 'POSITIONS' || f.type === 'ORDERS') && f.data.snapshot);
        expect(snaps.map((f) => f.type)).toEqual(['POSITIONS', 'ORDERS']);
      } else {
        expect(c.of('ORDERS')).toHaveLength(0);
      }
    });
  }
});

describe('state frames', () => {
  it('P5: a market order gives TRADE (agreeing with /OrderHistory) and POSITIONS; a pending order gives ORDERS', async () => {
    const c = await open({ id: p5, apiKey: key, heartbeat: '0' });
    await c.until((x) => x.of('ORDERS').length >= 1, 8_000, 'snapshots');
    const n0 = c.frames.length;
    const r = await trade(p5, 'symbol=BTCUSD&operation=Buy&volume=0.01&magic=77&comment=s1');
    expect(r.status).toBe(200);
    const tr = await c.next('TRADE', n0);
    const pos = await c.until((x) => x.of('POSITIONS').find((f) => !f.data.snapshot && f.data.positions.some((p: { ticket: number }) => p.ticket === tr.data.position)), 8_000, 'POSITIONS change');
    expect(pos.data.snapshot).toBe(false);
    expect(tr.data).toMatchObject({ symbol: 'BTCUSD', type: 'Buy', entry: 'in', magic: 77, expertId: 77, comment: 's1' });
    expect(tr.data.timeMsc - tr.data.timeMscUtc).toBe(simServerOffsetMs(tr.data.timeMscUtc));
    let hist = await t.req('GET', `/OrderHistory?id=${p5}`, { headers: { 'x-api-key': key } });
    if (!hist.body?.deals?.some((d: { ticket: number }) => d.ticket === tr.data.ticket)) {
      await new Promise((r2) => setTimeout(r2, 300));
      hist = await t.req('GET', `/OrderHistory?id=${p5}`, { headers: { 'x-api-key': key } });
    }
    const deal = hist.body.deals.find((d: { ticket: number }) => d.ticket === tr.data.ticket);
    expect(deal).toBeDefined();
    for (const f of ['ticket', 'order', 'position', 'symbol', 'type', 'entry', 'volume', 'price', 'magic', 'comment', 'commission', 'swap', 'profit']) {
      expect(tr.data[f], f).toEqual(deal[f]);
    }
    expect(tr.data.timeMscUtc).toBe(deal.timeMsc);
    expect(tr.data.timeUtc).toBe(deal.time);

    const q = c.of('QUOTE').at(-1);
    const bid = q ? q.data.bid : tr.data.price;
    const n = c.frames.length;
    const lim = await trade(p5, `symbol=BTCUSD&operation=BuyLimit&volume=0.01&price=${Math.round(bid * 0.8)}`);
    expect(lim.status).toBe(200);
    const ord = await c.next('ORDERS', n);
    expect(ord.data.snapshot).toBe(false);
    const o = ord.data.orders.find((x: { type: string }) => x.type === 'BuyLimit');
    expect(o).toBeDefined();
    expect(new Date(o.timeSetupUtc).getTime()).toBeGreaterThan(0);
    // Every account frame on the account's counter, no gaps.
    expectAccountStream(c.frames);
  });

  it('P4: POSITIONS and TRADE, never ORDERS', async () => {
    const c = await open({ id: p4, apiKey: key, heartbeat: '0' });
    const r = await trade(p4, 'symbol=BTCUSD&operation=Buy&volume=0.01');
    expect(r.status).toBe(200);
    await c.next('TRADE', 0);
    const pos = await c.next('POSITIONS', 0);
    expect(pos.data.snapshot).toBe(false);
    expect(pos.data.positions.length).toBeGreaterThan(0);
    const lim = await trade(p4, 'symbol=BTCUSD&operation=BuyLimit&volume=0.01&price=1000');
    expect(lim.status).toBe(200);
    await new Promise((r2) => setTimeout(r2, 500));
    expect(c.of('ORDERS')).toHaveLength(0);
  });
});
