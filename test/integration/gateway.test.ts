// Gateway session routes over real HTTP and WebSocket: broker accounts, handle lifecycle, rights,
// restart survival, and pushes on /ws that start and stop with the Subscribe* operations.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { createCustomer } from '../../src/auth/bootstrap.js';
import { mgmt, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { SOCKET_CLOSE } from '../../src/stream/closeCodes.js';
import { account, apiKey, brokerAccount, connect, op, openWs, wsRefusal, type Acct } from '../helpers/gateway-helpers.js';

let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway();
});
afterAll(async () => {
  await t?.stop();
});

describe('POST /v1/broker-accounts', () => {
  it('creates an account of the caller that works with seats, keys and classic routes; never returns the login or password', async () => {
    const r = await t.req('POST', '/v1/broker-accounts', { headers: mgmt(t.managementKey), body: { platform: 'P5', user: '880001', password: 'pw-880001', server: 'Sim-P5-Demo' } });
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({ platform: 'P5', server: 'Sim-P5-Demo' });
    expect(r.text).not.toContain('pw-880001');
    expect(r.text).not.toContain('880001"');
    const seat = await t.req('GET', `/v1/seats/${r.body.id}`, { headers: mgmt(t.managementKey) });
    expect(seat.status).toBe(200);
    const key = await apiKey(t, r.body.id);
    const classic = await t.req('GET', `/AccountSummary?id=${r.body.id}`, { headers: { 'x-api-key': key } });
    expect(classic.status).toBe(200);
  });

  it('refuses bad bodies, a wrong broker password, a scoped key and no key', async () => {
    expect((await t.req('POST', '/v1/broker-accounts', { headers: mgmt(t.managementKey), body: { platform: 'P6', user: 'a', password: 'b', server: 'Sim-P5-Demo' } })).status).toBe(400);
    expect((await t.req('POST', '/v1/broker-accounts', { headers: mgmt(t.managementKey), body: { platform: 'P5', user: 'a', server: 'Sim-P5-Demo' } })).status).toBe(400);
    await t.req('POST', '/v1/broker-accounts', { headers: mgmt(t.managementKey), body: { platform: 'P5', user: '880002', password: 'right', server: 'Sim-P5-Demo' } });
    const wrong = await t.req('POST', '/v1/broker-accounts', { headers: mgmt(t.managementKey), body: { platform: 'P5', user: '880002', password: 'wrong', server: 'Sim-P5-Demo' } });
    expect(wrong.status).toBe(400);
    expect(wrong.text).not.toContain('wrong"');
    const id = await brokerAccount(t, 'P4');
    const scoped = await apiKey(t, id, { accountScoped: true });
    expect((await t.req('POST', '/v1/broker-accounts', { headers: { 'x-api-key': scoped }, body: { platform: 'P5', user: '1', password: 'x', server: 'Sim-P5-Demo' } })).status).toBe(403);
    expect((await t.req('POST', '/v1/broker-accounts', { body: { platform: 'P5', user: '1', password: 'x', server: 'Sim-P5-Demo' } })).status).toBe(401);
    // An unscoped API key as Bearer is accepted on connection routes (§5.8).
    const full = await apiKey(t, id);
    const ok = await t.req('POST', '/v1/broker-accounts', { headers: { authorization: `Bearer ${full}` }, body: { platform: 'P4', user: '880003', password: 'x', server: 'Sim-P4-Demo' } });
    expect(ok.status).toBe(201);
  });
});

describe('session handle lifecycle', () => {
  it('same handle while live; Disconnect invalidates it; a new connect gives a new handle; the stale one is rejected', async () => {
    const id = await brokerAccount(t, 'P5');
    const key = await apiKey(t, id);
    const h1 = await connect(t, id);
    expect(h1).toMatch(/^gwh_[A-Za-z0-9_-]{40,}$/);
    expect(await connect(t, id, key)).toBe(h1);
    const a: Acct = { id, key, handle: h1 };
    expect((await op(t, a, 'AccountSummary')).status).toBe(200);
    const d = await op(t, a, 'Disconnect');
    expect(d.status).toBe(200);
    const stale = await op(t, a, 'AccountSummary');
    expect(stale.status).toBe(404);
    expect(stale.body.error).toBe('SESSION_NOT_FOUND');
    expect((await op(t, a, 'Disconnect')).status).toBe(404);
    const h2 = await connect(t, id);
    expect(h2).not.toBe(h1);
    expect((await op(t, { ...a, handle: h2 }, 'AccountSummary')).status).toBe(200);
    expect((await op(t, a, 'AccountSummary')).status).toBe(404);
  });

  it('connects sent at once for one account open one session: every answer is the same handle (SPEC §3, no second session)', async () => {
    const id = await brokerAccount(t, 'P5');
    const key = await apiKey(t, id);
    const answers = await Promise.all(Array.from({ length: 6 }, (_, i) => t.req('POST', '/v1/connect', {
      headers: i % 2 ? { 'x-api-key': key } : mgmt(t.managementKey), body: { brokerAccountId: id },
    })));
    expect(answers.map((r) => r.status)).toEqual(Array(6).fill(200));
    expect(new Set(answers.map((r) => r.body.handle)).size).toBe(1);
  });

  it('ClosedOrders lists the orders closed since this handle connected, not those closed under an earlier handle (SPEC §4.4)', async () => {
    const a = await account(t, 'P5');
    const roundTrip = async (h: Acct) => {
      const buy = await op(t, h, 'OrderSendSafe', { symbol: 'BTCUSD', operation: 0, volume: 0.01 });
      expect(buy.status, buy.text).toBe(200);
      const close = await op(t, h, 'OrderCloseSafe', { ticket: buy.body.ticket, price: 0 });
      expect(close.status, close.text).toBe(200);
      return buy.body.ticket as number;
    };
    const closedUnder = async (h: Acct) => {
      const r = await op(t, h, 'ClosedOrders');
      expect(r.status, r.text).toBe(200);
      return (r.body as Array<{ positionId: number }>).map((o) => o.positionId);
    };
    const first = await roundTrip(a);
    expect(await closedUnder(a)).toContain(first);
    expect((await op(t, a, 'Disconnect')).status).toBe(200);
    const b: Acct = { ...a, handle: await connect(t, a.id) };
    expect(await closedUnder(b)).toEqual([]);
    const second = await roundTrip(b);
    // The history orders of the position's round trip: the one that opened it and the one that closed it.
    expect(await closedUnder(b)).toEqual([second, second]);
  });

  it('re-binding the account to a login of the other platform ends its session: no P5 dialect on a P4 account', async () => {
    const a = await account(t, 'P5');
    const c = await openWs(t, a.handle, a.key);
    const rebind = await t.req('POST', '/ConnectEx', { headers: mgmt(t.managementKey), body: { id: a.id, user: `rb4-${a.id.slice(0, 8)}`, password: 'x', server: 'Sim-P4-Demo' } });
    expect(rebind.status, rebind.text).toBe(200);
    // The P5 handle must not keep serving P5-only operations against what is now a P4 account.
    const stale = await op(t, a, 'OrderSendSafe', { symbol: 'BTCUSD', operation: 0, volume: 0.01 });
    expect(stale.status, stale.text).toBe(404);
    expect(stale.body.error).toBe('SESSION_NOT_FOUND');
    expect((await op(t, a, 'Account')).body.error).toBe('SESSION_NOT_FOUND');
    expect((await c.closed).code).toBe(SOCKET_CLOSE.SESSION_ENDED.code);
    const h2 = await connect(t, a.id);
    expect(h2).not.toBe(a.handle);
    const b = { ...a, handle: h2 };
    expect((await op(t, b, 'AccountDetails')).body.platform).toBe('P4');
    expect((await op(t, b, 'Account')).body.error).toBe('OPERATION_NOT_ON_PLATFORM');
    expect((await op(t, b, 'OrderSendSafe', { symbol: 'BTCUSD', operation: 0, volume: 0.01 })).body.error).toBe('OPERATION_NOT_ON_PLATFORM');
    // Re-binding to a login of the same platform keeps the session (SPEC §3: same handle while live).
    const same = await t.req('POST', '/ConnectEx', { headers: mgmt(t.managementKey), body: { id: a.id, user: `rb4b-${a.id.slice(0, 8)}`, password: 'x', server: 'Sim-P4-Demo' } });
    expect(same.status, same.text).toBe(200);
    expect((await op(t, b, 'AccountDetails')).status).toBe(200);
    expect(await connect(t, a.id)).toBe(h2);
  });

  it('POST /ConnectEx?id=<account> re-binds that account (query id, as on every classic route), not a new seat', async () => {
    const a = await account(t, 'P5');
    const user = `rbq-${a.id.slice(0, 8)}`;
    // Used to ignore the query id and create (and bill) a second seat bound to the new login.
    const rebind = await t.req('POST', `/ConnectEx?id=${a.id}`, { headers: mgmt(t.managementKey), body: { user, password: 'x', server: 'Sim-P4-Demo' } });
    expect(rebind.status, rebind.text).toBe(200);
    expect(rebind.body.id).toBe(a.id);
    // ...so the account now trades as the P4 login: its P5 session ended as with any re-bind to the other platform.
    expect((await op(t, a, 'AccountSummary')).body.error).toBe('SESSION_NOT_FOUND');
    const b = { ...a, handle: await connect(t, a.id) };
    expect((await op(t, b, 'AccountDetails')).body).toMatchObject({ platform: 'P4', login: user });
    // query and body naming different accounts: refused, nothing re-bound
    const other = await brokerAccount(t, 'P5');
    const clash = await t.req('POST', `/ConnectEx?id=${other}`, { headers: mgmt(t.managementKey), body: { id: a.id, user: `${user}-2`, password: 'x', server: 'Sim-P4-Demo' } });
    expect(clash.status, clash.text).toBe(400);
    expect((await op(t, b, 'AccountDetails')).body.login).toBe(user);
    // the same id in both places is fine
    const both = await t.req('POST', `/ConnectEx?accountId=${a.id.toUpperCase()}`, { headers: mgmt(t.managementKey), body: { id: a.id, user, password: 'x', server: 'Sim-P4-Demo' } });
    expect(both.status, both.text).toBe(200);
    expect(both.body.id).toBe(a.id);
  });

  it('rejects made-up handles, a missing handle, unknown accounts and accounts without a broker login', async () => {
    const a = await account(t, 'P5');
    expect((await op(t, { ...a, handle: 'gwh_madeup' }, 'AccountSummary')).status).toBe(404);
    const r = await t.req('GET', '/v1/proxy/AccountSummary', { headers: { 'x-api-key': a.key } });
    expect(r.status).toBe(400);
    // `handle` twice with different values is a 400 naming it, whichever comes last (not "last wins").
    for (const qs of [`handle=gwh_madeup&handle=${a.handle}`, `handle=${a.handle}&handle=gwh_madeup`]) {
      const twice = await t.req('GET', `/v1/proxy/AccountSummary?${qs}`, { headers: { 'x-api-key': a.key } });
      expect(twice.status, `${qs}: ${twice.text}`).toBe(400);
      expect(twice.body.message).toMatch(/handle/);
    }
    expect((await t.req('GET', `/v1/proxy/AccountSummary?handle=${a.handle}&handle=${a.handle}`, { headers: { 'x-api-key': a.key } })).status).toBe(200);
    expect((await t.req('POST', '/v1/connect', { headers: mgmt(t.managementKey), body: { brokerAccountId: '00000000-0000-4000-8000-000000000000' } })).status).toBe(404);
    expect((await t.req('POST', '/v1/connect', { headers: mgmt(t.managementKey), body: { brokerAccountId: 'not-a-uuid' } })).status).toBe(400);
    const seat = await t.req('POST', '/v1/seats', { headers: mgmt(t.managementKey), body: {} });
    // An account that exists but has no broker login cannot connect: 503, as on the classic routes.
    expect((await t.req('POST', '/v1/connect', { headers: mgmt(t.managementKey), body: { brokerAccountId: seat.body.id } })).status).toBe(503);
  });

  it('Ping needs a key but no handle; unknown operations are 404, known ones with another method 405', async () => {
    const a = await account(t, 'P4');
    expect((await t.req('GET', '/v1/proxy/Ping', { headers: { 'x-api-key': a.key } })).status).toBe(200);
    expect((await t.req('GET', '/v1/proxy/Ping')).status).toBe(401);
    expect((await op(t, a, 'NoSuchOp')).status).toBe(404);
    // A known operation with another method: 405 that says so (Allow: GET), not "unknown operation".
    const post = await t.req('POST', `/v1/proxy/AccountSummary?handle=${a.handle}`, { headers: { 'x-api-key': a.key } });
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('GET');
    expect(post.body).toMatchObject({ error: 'METHOD_NOT_ALLOWED', message: expect.stringMatching(/answers GET, not POST: gateway operations are GET/) });
  });
});

describe('unknown operations and other methods', () => {
  it('answer 404 / 405 before any key is looked at, and never count toward the failed-auth block', async () => {
    const g = await startTestGateway({ authFailLimit: 3 });
    try {
      for (let i = 0; i < 5; i++) {
        const post = await g.req('POST', '/v1/proxy/AccountSummary?handle=x');
        expect(post.status, post.text).toBe(405);
        expect(post.headers.get('allow')).toBe('GET');
        expect(post.body.error).toBe('METHOD_NOT_ALLOWED');
        const unknown = await g.req('GET', '/v1/proxy/NoSuchOp?handle=x', { headers: { 'x-api-key': 'not-a-key' } });
        expect(unknown.status, unknown.text).toBe(404);
        expect(unknown.body.error).toBe('ROUTE_NOT_FOUND');
      }
      // Ten such answers later the client is not blocked: a key is still checked, once, as a key.
      const ping = await g.req('GET', '/v1/proxy/Ping');
      expect(ping.status, ping.text).toBe(401);
    } finally {
      await g.stop();
    }
  });
});

describe('rights (SPEC §5)', () => {
  it('x-api-key only; read-only keys 403 on trading; scoped keys only their account; other customers see 404', async () => {
    const a = await account(t, 'P5');
    const b = await account(t, 'P5');
    // A management key is not an API key on gateway operations; Bearer is not accepted there.
    expect((await op(t, a, 'AccountSummary', {}, t.managementKey)).status).toBe(401);
    expect((await t.req('GET', `/v1/proxy/AccountSummary?handle=${a.handle}`, { headers: { authorization: `Bearer ${a.key}` } })).status).toBe(401);
    const ro = await apiKey(t, a.id, { readOnly: true });
    expect((await op(t, a, 'AccountSummary', {}, ro)).status).toBe(200);
    const send = await op(t, a, 'OrderSendSafe', { symbol: 'BTCUSD', operation: 0, volume: 0.01 }, ro);
    expect(send.status).toBe(403);
    // Nor may it end the session it shares with the keys that trade.
    const bye = await op(t, a, 'Disconnect', {}, ro);
    expect(bye.status).toBe(403);
    expect(bye.body.error).toBe('READ_ONLY_KEY');
    expect((await op(t, a, 'AccountSummary')).status).toBe(200);
    expect((await op(t, a, 'OpenedOrdersTickets')).body).toEqual([]);
    const scopedA = await apiKey(t, a.id, { accountScoped: true });
    expect((await op(t, a, 'AccountSummary', {}, scopedA)).status).toBe(200);
    expect((await op(t, b, 'AccountSummary', {}, scopedA)).status).toBe(403);
    expect((await t.req('POST', '/v1/connect', { headers: { 'x-api-key': scopedA }, body: { brokerAccountId: b.id } })).status).toBe(403);
    expect((await t.req('POST', '/v1/connect', { headers: { 'x-api-key': scopedA }, body: { brokerAccountId: a.id } })).body.handle).toBe(a.handle);
    const other = createCustomer(t.gw.services.tenancy, `other-${Date.now()}`);
    const os = await t.req('POST', '/v1/seats', { headers: mgmt(other.managementKey), body: {} });
    const ok = await t.req('POST', `/v1/seats/${os.body.id}/keys`, { headers: mgmt(other.managementKey), body: { label: 'o' } });
    expect((await op(t, a, 'AccountSummary', {}, ok.body.key)).status).toBe(404);
    expect((await t.req('POST', '/v1/connect', { headers: mgmt(other.managementKey), body: { brokerAccountId: a.id } })).status).toBe(404);
  });
});

describe('/ws pushes', () => {
  it('refuses bad upgrades before the socket exists', async () => {
    const a = await account(t, 'P5');
    expect(await wsRefusal(t, `handle=${a.handle}`)).toBe(401);
    expect(await wsRefusal(t, 'handle=gwh_nope', { 'x-api-key': a.key })).toBe(404);
    expect(await wsRefusal(t, '', { 'x-api-key': a.key })).toBe(400);
    expect(await wsRefusal(t, `handle=${a.handle}&apiKey=${a.key}`).catch(() => 0)).toBe(0); // ?apiKey= is accepted
    // A parameter /ws does not take (it takes handle and apiKey): refused, not ignored.
    expect(await wsRefusal(t, `handle=${a.handle}&heartbeat=0`, { 'x-api-key': a.key })).toBe(400);
    expect(await wsRefusal(t, `Handle=${a.handle}`, { 'x-api-key': a.key })).toBe(400);
    // A parameter given twice with different values is a 400, never "the first one wins".
    const b = await account(t, 'P5');
    expect(await wsRefusal(t, `handle=${a.handle}&handle=${b.handle}`, { 'x-api-key': a.key })).toBe(400);
    expect(await wsRefusal(t, `handle=${a.handle}&apiKey=${a.key}&apiKey=${b.key}`)).toBe(400);
    expect(await wsRefusal(t, `handle=${a.handle}&handle=${a.handle}`, { 'x-api-key': a.key }).catch(() => 0)).toBe(0);
  });

  it('any client message but a ping gets an ERROR frame, a large one (16 KiB) too; the socket stays open', async () => {
    const a = await account(t, 'P5');
    const c = await openWs(t, a.handle, a.key);
    for (const m of ['{"action":"subscribe"}', 'x'.repeat(16 * 1024)]) {
      const before = c.frames.filter((f) => f.type === 'ERROR').length;
      c.ws.send(m);
      await c.waitFor(() => c.frames.filter((f) => f.type === 'ERROR').length > before);
    }
    c.ws.send('ping');
    await c.waitFor((f) => f.type === 'PONG');
    // {"action":"ping"} however a JSON library writes it (Python's json.dumps puts a space after ':').
    for (const m of ['{"action": "ping"}', ' { "action" : "ping" }\n']) {
      const pongs = c.frames.filter((f) => f.type === 'PONG').length;
      c.ws.send(m);
      await c.waitFor(() => c.frames.filter((f) => f.type === 'PONG').length > pongs);
    }
    // Not a ping: another action, another field, another type.
    for (const m of ['{"action":"ping","symbol":"BTCUSD"}', '{"action":"pong"}', '["ping"]', '"ping"']) {
      const errs = c.frames.filter((f) => f.type === 'ERROR').length;
      c.ws.send(m);
      await c.waitFor(() => c.frames.filter((f) => f.type === 'ERROR').length > errs);
    }
    expect(c.frames.filter((f) => f.type === 'PONG')).toHaveLength(3);
    expect(c.ws.readyState).toBe(c.ws.OPEN);
    c.ws.close();
  });

  it('quotes, candles and order book frames start with Subscribe* and stop after the unsubscribes', async () => {
    const a = await account(t, 'P5');
    const c = await openWs(t, a.handle, a.key);
    expect((await op(t, a, 'SubscribeMany', { symbols: 'BTCUSD,XAUUSD', interval: 0 })).status).toBe(200);
    const q = await c.waitFor((f) => f.type === 'QUOTE' && f.data.symbol === 'BTCUSD');
    expect(q.data).toMatchObject({ symbol: 'BTCUSD' });
    expect(typeof q.data.bid).toBe('number');
    // Broker server time: the P5 server is UTC+2 in winter (+3 in US summer time).
    const offset = q.data.timeMsc - q.data.timeMscUtc;
    expect([2 * 3_600_000, 3 * 3_600_000]).toContain(offset);
    expect((await op(t, a, 'SubscribeOhlc', { symbol: 'BTCUSD', timeframe: 1 })).status).toBe(200);
    const candle = await c.waitFor((f) => f.type === 'CANDLE');
    expect(candle.data).toMatchObject({ symbol: 'BTCUSD', timeframe: 'M1' });
    for (const k of ['time', 'open', 'high', 'low', 'close', 'ticks', 'closed', 'partial']) expect(candle.data).toHaveProperty(k);
    expect((await op(t, a, 'SubscribeOrderBook', { symbols: 'BTCUSD' })).status).toBe(200);
    const book = await c.waitFor((f) => f.type === 'BOOK');
    expect(book.data.bids[0].price).toBeLessThan(book.data.asks[0].price);
    const listed = await op(t, a, 'SubscribedSymbols');
    expect(listed.body).toMatchObject({
      quotes: [{ symbol: 'BTCUSD', interval: 0 }, { symbol: 'XAUUSD', interval: 0 }],
      ohlc: [{ symbol: 'BTCUSD', timeframe: 'M1' }],
      orderBook: [{ symbol: 'BTCUSD' }],
      symbols: ['BTCUSD', 'XAUUSD'],
    });
    expect((await op(t, a, 'UnSubscribeMany', { symbols: 'BTCUSD,XAUUSD' })).status).toBe(200);
    expect((await op(t, a, 'UnsubscribeOhlc', { symbol: 'BTCUSD' })).status).toBe(200);
    expect((await op(t, a, 'UnsubscribeOrderBook', { symbols: 'BTCUSD' })).status).toBe(200);
    expect((await op(t, a, 'SubscribedSymbols')).body).toMatchObject({ quotes: [], ohlc: [], orderBook: [], symbols: [] });
    // Frames already in flight may still land; after that nothing more arrives. The shard sent its
    // frames before its replies to the unsubscribes, and the PONG is written after every frame main
    // had: a barrier, where a 300 ms pause alone was a guess a loaded machine could outlast.
    await new Promise((r) => setTimeout(r, 300));
    c.ws.send('ping');
    await c.waitFor((f) => f.type === 'PONG');
    const before = c.frames.length;
    await new Promise((r) => setTimeout(r, 1_500));
    expect(c.frames.slice(before)).toEqual([]);
    c.ws.close();
  });

  it('Subscribe with an interval throttles quotes; Disconnect ends the subscriptions and closes the socket', async () => {
    const a = await account(t, 'P5');
    const c = await openWs(t, a.handle, a.key);
    expect((await op(t, a, 'Subscribe', { symbol: 'BTCUSD', interval: 1000 })).status).toBe(200);
    await c.waitFor((f) => f.type === 'QUOTE');
    expect((await op(t, a, 'Subscribe', { symbol: 'NOPE' })).status).toBe(400);
    expect((await op(t, a, 'Subscribe', { symbol: 'BTCUSD', interval: -5 })).status).toBe(400);
    expect((await op(t, a, 'Disconnect')).status).toBe(200);
    const closed = await c.closed;
    expect(closed.code).toBe(SOCKET_CLOSE.SESSION_ENDED.code);
    // A new session starts without the old subscriptions.
    const h2 = await connect(t, a.id);
    expect((await op(t, { ...a, handle: h2 }, 'SubscribedSymbols')).body.symbols).toEqual([]);
  });
});

describe('/ws and the failed-auth throttle', () => {
  it('a 401 on a /ws upgrade counts toward the block of its IP (SPEC §7 rule 1); then 429 with retry-after, even for a good key (§8)', async () => {
    const g = await startTestGateway({ authFailLimit: 3, authFailWindowMs: 60_000 });
    try {
      const a = await account(g, 'P5');
      const refusal = (query: string, headers: Record<string, string> = {}) => new Promise<{ status: number; retryAfter: string | undefined; body: any }>((resolve, reject) => {
        const ws = new WebSocket(`${g.url.replace('http', 'ws')}/ws?${query}`, { headers });
        ws.once('unexpected-response', (_req, res) => {
          let text = '';
          res.on('data', (c: Buffer) => (text += c.toString()));
          res.on('end', () => {
            resolve({ status: res.statusCode ?? 0, retryAfter: res.headers['retry-after'] as string | undefined, body: JSON.parse(text) });
            ws.terminate();
          });
        });
        ws.once('open', () => {
          ws.close();
          reject(new Error('upgrade was accepted'));
        });
        ws.once('error', () => undefined);
      });
      // A stale handle is no bad key: 404, not counted.
      for (let i = 0; i < 3; i++) expect((await refusal('handle=gwh_stale', { 'x-api-key': a.key })).status).toBe(404);
      for (let i = 0; i < 3; i++) {
        const r = await refusal(`handle=${a.handle}&apiKey=tagw_k_0000000000000000_bogus`);
        expect(r.status).toBe(401);
        expect(r.body.error).toBe('INVALID_API_KEY');
      }
      const blocked = await refusal(`handle=${a.handle}`, { 'x-api-key': a.key });
      expect(blocked.status).toBe(429);
      expect(blocked.body).toMatchObject({ error: 'AUTH_THROTTLED', message: 'too many failed auth attempts, slow down' });
      expect(Number(blocked.retryAfter)).toBeGreaterThan(0);
      // The block is the IP's, on every route.
      expect((await op(g, a, 'AccountSummary')).status).toBe(429);
    } finally {
      await g.stop();
    }
  });
});

describe('restart', () => {
  it('handles and their subscriptions survive a gateway restart', async () => {
    const { mkdtempSync, rmSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const dataDir = mkdtempSync(join(tmpdir(), 'tagw-gw-restart-'));
    try {
      let g = await startTestGateway({}, { dataDir });
      const a = await account(g, 'P4');
      expect((await op(g, a, 'Subscribe', { symbol: 'BTCUSD' })).status).toBe(200);
      await g.stop();
      g = await startTestGateway({}, { dataDir });
      try {
        expect((await op(g, a, 'AccountSummary')).status).toBe(200);
        expect(await connect(g, a.id)).toBe(a.handle);
        expect((await op(g, a, 'SubscribedSymbols')).body.symbols).toEqual(['BTCUSD']);
        const c = await openWs(g, a.handle, a.key);
        await c.waitFor((f) => f.type === 'QUOTE' && f.data.symbol === 'BTCUSD');
        c.ws.close();
      } finally {
        await g.stop();
      }
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
