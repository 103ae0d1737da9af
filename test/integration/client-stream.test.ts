// The SDK's stream and gateway socket against a real gateway over real sockets (`ws` as the
// WebSocket, as a Node 20 bot would pass it): quotes through `for await`, every TRADE of the account
// once and in the order /OrderHistory lists the deals, a refused stream ending with the HTTP reason.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { TagwClient, TagwError, type TradeDeal } from '../../src/client/index.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { startTcpProxy } from '../helpers/tcpProxy.js';
import { until } from '../helpers/until.js';

let g: TestGateway;
let client: TagwClient;
let key: string;
let id: string;

beforeAll(async () => {
  // Subscribes wait for a dropped account 500 ms, not 10 s (the passing refusal below).
  g = await startTestGateway({ streamHeartbeatMs: 200, streamSubscribeTimeoutMs: 500 });
  key = (await new TagwClient({ baseUrl: g.url, managementKey: g.managementKey }).keys.create({ label: 'sdk-stream' })).key;
  client = new TagwClient({ baseUrl: g.url, apiKey: key, WebSocket });
  id = (await client.connectEx({ user: 'sdk-stream', password: 'pw', server: 'Sim-P5-Demo' })).id;
});
afterAll(async () => {
  await g?.stop();
});

describe('stream', () => {
  it('for await delivers the snapshots, then quotes of the subscribed symbol', async () => {
    const types: string[] = [];
    for await (const f of client.stream(id, { symbols: ['BTCUSD'] })) {
      types.push(f.type);
      if (f.type === 'QUOTE') {
        expect(f.data.symbol).toBe('BTCUSD');
        expect(f.data.ask).toBeGreaterThan(f.data.bid);
        break; // ends the stream
      }
    }
    expect(types).toContain('POSITIONS'); // the initial snapshot (P5)
    expect(types).toContain('SUBSCRIBED');
  });

  it('timeframes in minutes, as the subscribe message takes them: the subscription names them, candles come', async () => {
    let subscribed: string[] | undefined;
    let candle: string | undefined;
    for await (const f of client.stream(id, { symbols: ['BTCUSD'], timeframes: [1, 'h1'] })) {
      if (f.type === 'SUBSCRIBED') subscribed = f.data.timeframes;
      if (f.type === 'CANDLE') {
        candle = f.data.timeframe;
        break;
      }
    }
    expect(subscribed?.slice().sort()).toEqual(['H1', 'M1']);
    expect(['M1', 'H1']).toContain(candle);
  });

  it('TRADE frames: each deal once, in the order of /OrderHistory', async () => {
    const s = client.stream(id);
    const trades: TradeDeal[] = [];
    let snapshot = false;
    s.on('TRADE', (f) => trades.push(f.data));
    s.on('POSITIONS', () => (snapshot = true));
    await until(() => snapshot, 'the initial snapshot');
    const acct = client.account(id);
    for (let i = 0; i < 3; i++) await acct.OrderSend({ symbol: 'BTCUSD', operation: i % 2 ? 'Sell' : 'Buy', volume: 0.01 });
    const history = await acct.OrderHistory({ from: 0, to: Date.now() + 60_000 });
    const deals = history.deals.filter((d) => d.type !== 'Balance').map((d) => d.ticket);
    await until(() => trades.length >= 3, 'three TRADE frames');
    s.close();
    expect(trades.map((t) => t.ticket)).toEqual(deals.slice(-trades.length));
    expect(trades).toHaveLength(3);
  });

  it('a for await that stalls reads the newest quote when it comes back, not a backlog; the TRADE made meanwhile arrives', async () => {
    // Found driving a bot: reading 10 frames/s of a stream that sent ~40, the quote it acted on was 20 s
    // old after 24 s and getting older (the SDK read every frame into its own buffer, so the gateway's
    // coalescing of slow sockets never began). Now a buffered QUOTE is replaced by a newer one of its symbol.
    const slow = (await client.connectEx({ user: 'sdk-stream-slow', password: 'pw', server: 'Sim-P5-Demo' })).id;
    const s = client.stream(slow, { symbols: ['BTCUSD'] });
    let newest: unknown;
    let quotes = 0;
    s.on('QUOTE', (f) => {
      newest = f;
      quotes++;
    });
    const it = s[Symbol.asyncIterator]();
    try {
      while ((await it.next()).value?.type !== 'QUOTE');
      // The bot is busy: it reads nothing while an order fills and quotes keep coming.
      await client.account(slow).OrderSend({ symbol: 'BTCUSD', operation: 'Buy', volume: 0.01 });
      const before = quotes;
      await until(() => quotes >= before + 4, 'quotes coming while the reader is stalled');
      const read: string[] = [];
      while (!(read.includes('QUOTE') && read.includes('TRADE'))) {
        const f = (await it.next()).value!;
        read.push(f.type);
        // The newest the stream received: no frame can arrive between that push and this read.
        if (f.type === 'QUOTE') expect(f).toBe(newest);
      }
      expect(s.coalesced).toBeGreaterThanOrEqual(3);
    } finally {
      s.close();
    }
  });

  it('a subscribe refused for a passing reason (the account\'s connection down) is asked again until it holds: quotes come once the account is back', async () => {
    // Found by the cluster chaos run: a subscribe refused while its account changed owner left the
    // stream without quotes for good (the SDK sent it again only at a reconnect).
    const dropped = (await client.connectEx({ user: 'sdk-stream-drop', password: 'pw', server: 'Sim-P5-Demo' })).id;
    await client.account(dropped).AccountSummary();
    await g.gw.services.shards.call(dropped, 'account.fault', { accountId: dropped, fault: { kind: 'drop', durationMs: 1_200 } });
    const s = client.stream(dropped, { symbols: ['BTCUSD'] });
    const errors: string[] = [];
    let quotes = 0;
    s.on('ERROR', (f) => errors.push(f.data.error));
    s.on('QUOTE', () => quotes++);
    try {
      await until(() => errors.length > 0, 'the subscribe refused while the account is away', 10_000);
      await until(() => quotes > 0, 'a quote once the account is back', 15_000);
    } finally {
      s.close();
    }
    expect(errors[0]).toBe('NOT_CONNECTED');
  }, 40_000);

  it('a key revoked under an open stream and /ws socket ends both with KEY_REVOKED (4001); a new stream with it ends with INVALID_API_KEY', async () => {
    const mgmt = new TagwClient({ baseUrl: g.url, managementKey: g.managementKey });
    const doomed = await mgmt.keys.create({ label: 'sdk-revoked' });
    const c = new TagwClient({ baseUrl: g.url, apiKey: doomed.key, WebSocket });
    const s = c.stream(id);
    let snapshot = false;
    s.on('POSITIONS', () => void (snapshot = true));
    const ws = (await c.connect(id)).socket();
    let wsOpen = false;
    ws.onEvent('state', (st) => void (st === 'open' && (wsOpen = true)));
    const ended = (it: AsyncIterable<unknown>) => (async () => {
      for await (const _ of it) void _;
    })().catch((e: unknown) => e);
    const streamEnd = ended(s);
    const wsEnd = ended(ws);
    await until(() => snapshot && wsOpen, 'the snapshot, and /ws open');
    await mgmt.keys.revoke(doomed.id);
    expect(await streamEnd).toMatchObject({ code: 'KEY_REVOKED', status: 401 });
    expect(await wsEnd).toMatchObject({ code: 'KEY_REVOKED', status: 401 });
    const again = await ended(c.stream(id));
    expect(again).toBeInstanceOf(TagwError);
    expect(again).toMatchObject({ code: 'INVALID_API_KEY', status: 401 });
  });

  it("an upgrade refused 429 AUTH_THROTTLED (this IP's failed-auth block) is tried again only once the block's retry-after has passed", async () => {
    const h = await startTestGateway({ authFailLimit: 3 });
    try {
      const k = (await new TagwClient({ baseUrl: h.url, managementKey: h.managementKey }).keys.create({ label: 'throttled' })).key;
      const c = new TagwClient({ baseUrl: h.url, apiKey: k, WebSocket });
      const acctId = (await c.connectEx({ user: 'sdk-throttled', password: 'pw', server: 'Sim-P5-Demo' })).id;
      // Three bad keys from this address: it is blocked (SPEC §8), for every key.
      for (let i = 0; i < 3; i++) expect((await fetch(`${h.url}/AccountSummary?id=${acctId}`, { headers: { 'x-api-key': 'tagw_k_0000000000000000_bogus' } })).status).toBe(401);
      const blocked = await fetch(`${h.url}/AccountSummary?id=${acctId}`, { headers: { 'x-api-key': k } });
      expect(blocked.status).toBe(429);
      const retryAfterMs = Number(blocked.headers.get('retry-after')) * 1000;
      expect(retryAfterMs).toBeGreaterThan(60_000);
      const s = c.stream(acctId);
      const waits: number[] = [];
      s.onEvent('state', (st, d) => void (st === 'reconnecting' && waits.push(d?.delayMs ?? -1)));
      try {
        await until(() => waits.length > 0, 'the stream to plan its next try');
      } finally {
        s.close();
      }
      // Not the backoff's 200 ms-5 s, 120 refused upgrades and probes in the block's 10 minutes.
      expect(waits[0]).toBeGreaterThanOrEqual(retryAfterMs - 2_000);
    } finally {
      await h.stop();
    }
  });

  it('a P4 stream whose first connection drops before any account event: the reconnect cannot resume, and says so (resync)', async () => {
    // Found by the cluster chaos run: a P4 stream (no initial snapshot, so no position to resume
    // from) reconnected after its node went away, and the TRADEs sent meanwhile were lost without a
    // word (no RESUMED recovered:false).
    const p4 = (await client.connectEx({ user: 'sdk-stream-p4-early', password: 'pw', server: 'Sim-P4-Demo' })).id;
    const proxy = await startTcpProxy(Number(new URL(g.url).port));
    const s = new TagwClient({ baseUrl: proxy.url, apiKey: key, WebSocket }).stream(p4, { symbols: ['BTCUSD'] });
    const resyncs: string[] = [];
    const trades: string[] = [];
    let subscribed = 0;
    s.onEvent('resync', (r) => resyncs.push(r.reason ?? ''));
    s.on('TRADE', (f) => trades.push(f.data.comment));
    s.on('SUBSCRIBED', () => subscribed++);
    try {
      await until(() => subscribed > 0, 'the first connection subscribed');
      proxy.watch((dir) => (dir === 'down' ? 'drop' : undefined)); // the TRADE below is sent on it and never arrives
      await client.account(p4).OrderSend({ symbol: 'BTCUSD', operation: 'Buy', volume: 0.01, comment: 'p4-missed' });
      proxy.cut();
      proxy.watch(undefined);
      await until(() => subscribed > 1, 'the second connection subscribed', 15_000);
      await client.account(p4).OrderSend({ symbol: 'BTCUSD', operation: 'Buy', volume: 0.01, comment: 'p4-after' });
      await until(() => trades.includes('p4-after'), 'the TRADE sent after the reconnect');
    } finally {
      s.close();
      await proxy.close();
    }
    expect(trades).toStrictEqual(['p4-after']);
    expect(resyncs).toHaveLength(1);
  });

  it('a refused stream (unknown account) ends with the HTTP reason instead of retrying', async () => {
    const s = client.stream('00000000-0000-4000-8000-000000000000');
    const err = await (async () => {
      for await (const _ of s) void _;
    })().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TagwError);
    expect(err).toMatchObject({ status: 404 });
  });
});

describe('gateway session socket', () => {
  it('Subscribe through the session, quotes on /ws', async () => {
    const session = await client.connect(id);
    const ws = session.socket();
    await session.op.Subscribe({ symbol: 'BTCUSD' });
    for await (const f of ws) {
      if (f.type === 'QUOTE') {
        expect(f.data.symbol).toBe('BTCUSD');
        break;
      }
    }
  });
});
