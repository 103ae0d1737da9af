// Classic routes over real HTTP against a real gateway (uWS, shard workers, embedded simulator):
// every §4.1 route on a P5 and a P4 account, and every §7 status reached by a real request.
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mgmt, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { until } from '../helpers/until.js';

let t: TestGateway;
let key: string;
let p5: string;
let p4: string;
const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));
const api = (path: string, k = key, headers: Record<string, string> = {}) => t.req('GET', path, { headers: { 'x-api-key': k, ...headers } });

/** The gateway's clock: the system's, unless a test holds it still (the /GetQuote cache ages by it). */
let heldAt: number | undefined;
const clock = { now: () => heldAt ?? Date.now() };
beforeAll(async () => {
  // trustProxy: failed-auth counting per x-forwarded-for, so the 401/429 cases do not block the other tests.
  t = await startTestGateway({ seatBuildMs: 600_000, trustProxy: true, authFailLimit: 3 }, { clock });
  key = (await t.req('POST', '/v1/keys', { headers: mgmt(t.managementKey), body: { label: 'full' } })).body.key;
  const a = await t.req('POST', '/ConnectEx', { headers: { 'x-api-key': key }, body: { user: 'c-p5', password: 'pw5', server: 'Sim-P5-Demo' } });
  expect(a.status).toBe(200);
  p5 = a.body.id;
  // GET with query parameters, Bearer auth, platform inferred from the server.
  const b = await t.req('GET', '/ConnectEx?user=c-p4&password=pw4&server=Sim-P4-Demo', { headers: { authorization: `Bearer ${key}` } });
  expect(b.status).toBe(200);
  p4 = b.body.id;
}, 60_000);
afterAll(async () => {
  await t?.stop();
});

const READ_ROUTES: Array<[string, string]> = [
  ['Account', ''], ['AccountSummary', ''], ['AccountDetails', ''], ['IsInvestor', ''], ['OpenedOrders', ''],
  ['OpenedOrdersTickets', ''], ['ClosedOrders', ''], ['Symbols', ''], ['SymbolList', ''], ['ServerTimezone', ''],
  ['ServerTimezoneInfo', ''], ['CheckConnect', ''], ['Mails', ''], ['Ping', ''], ['GetQuote', '&symbol=EURUSD'],
  ['GetQuoteMany', '&symbol=EURUSD&symbol=GBPUSD'], ['MarketWatchMany', '&symbols=EURUSD,BTCUSD'],
  ['IsTradeSessionMany', '&symbols=EURUSD&symbols=BTCUSD'], ['IsQuoteSessionMany', '&symbol=EURUSD,BTCUSD'],
  ['GetTickValueMany', '&symbol=EURUSD'], ['TickValueWithSize', '&symbols=EURUSD&lots=2'], ['SymbolParamsMany', '&symbols=EURUSD,XAUUSD'],
  ['SymbolParams', '&symbol=EURUSD'], ['SymbolSessions', '&symbol=EURUSD'], ['IsTradeSession', '&symbol=BTCUSD'],
  ['IsQuoteSession', '&symbol=EURUSD'], ['RequiredMargin', '&symbol=EURUSD&lots=1&type=Buy'],
  ['OrderHistory', '&from=2020-01-01T00:00:00'],
];

describe.each([['P5', () => p5], ['P4', () => p4]])('every read route on %s', (platform, idOf) => {
  it.each(READ_ROUTES)('/%s', async (route, extra) => {
    const r = await api(`/${route}?id=${idOf()}${extra}`);
    expect(r.status, r.text).toBe(200);
    expect(r.headers.get('content-type')).toContain('application/json');
  });

  it('shapes: summary synced, details without personal data, symbolInfo, empty sessions, [] mails, UTC times', async () => {
    const id = idOf();
    const s = await api(`/AccountSummary?accountId=${id}`);
    expect(s.body).toMatchObject({ synced: true, currency: 'USD' });
    expect(typeof s.body.balance).toBe('number');
    const d = await api(`/AccountDetails?id=${id}`);
    expect(d.body.platform).toBe(platform);
    expect(d.body.email).toBeUndefined();
    expect((await api(`/Account?id=${id}`)).body.email).toBeDefined();
    const sp = await api(`/SymbolParams?id=${id}&symbol=EURUSD`);
    expect(sp.body.symbolInfo.stopsLevel).toBe(sp.body.symbolInfo.limitPoints);
    expect(typeof sp.body.symbolInfo.freezeLevel).toBe('number');
    expect((await api(`/SymbolSessions?id=${id}&symbol=EURUSD`)).body).toEqual({ symbol: 'EURUSD', quoteSessions: [], tradeSessions: [] });
    expect((await api(`/Mails?id=${id}`)).body).toEqual([]);
    const many = await api(`/GetQuoteMany?id=${id}&symbol=EURUSD&symbols=GBPUSD,USDJPY`);
    expect(many.body.map((q: { symbol: string }) => q.symbol)).toEqual(['EURUSD', 'GBPUSD', 'USDJPY']);
    const q = await api(`/GetQuote?id=${id}&symbol=EURUSD&cached=0`);
    expect(q.body.time).toMatch(/Z$/);
    expect(new Date(q.body.time).getTime()).toBe(q.body.timeMsc);
    const tz = await api(`/ServerTimezone?id=${id}`);
    expect(tz.body.utcOffsetMinutes).not.toBe(0);
  });

  it('trading: market order by name and by code, modify, close; replay with the same clientOrderId; history agrees at once', async () => {
    const id = idOf();
    const cid = `t-${platform}-${Date.now()}`;
    const o = await api(`/OrderSend?id=${id}&symbol=BTCUSD&operation=Buy&volume=0.01&clientOrderId=${cid}`);
    expect(o.status, o.text).toBe(200);
    expect(o.body.ticket).toBeGreaterThan(0);
    expect(typeof o.body.state).toBe('string');
    expect(o.body.openTime).toMatch(/Z$/);
    expect(o.headers.get('idempotent-replay')).toBeNull();
    const again = await api(`/OrderSend?id=${id}&symbol=BTCUSD&operation=Buy&volume=0.01`, key, { 'idempotency-key': cid });
    expect(again.status).toBe(200);
    expect(again.headers.get('idempotent-replay')).toBe('true');
    expect(again.body).toEqual(o.body);
    expect(again.text).toBe(o.text); // replayed byte for byte
    expect(again.headers.get('content-type')).toBe(o.headers.get('content-type'));
    expect(o.headers.get('content-type')).toMatch(/^application\/json/);

    const byCode = await api(`/OrderSend?id=${id}&symbol=BTCUSD&operation=1&volume=0.01`);
    expect(byCode.status, byCode.text).toBe(200);
    expect(byCode.body.type).toBe('Sell');

    const opened = await api(`/OpenedOrders?id=${id}`);
    const pos = opened.body.find((x: { ticket: number }) => x.ticket === o.body.ticket || x.ticket === o.body.positionId);
    expect(pos).toBeDefined();
    expect((await api(`/OpenedOrder?id=${id}&ticket=${pos.ticket}`)).status).toBe(200);
    expect((await api(`/OpenedOrdersTickets?id=${id}`)).body).toContain(pos.ticket);

    const price = pos.openPrice as number;
    const m = await api(`/OrderModify?id=${id}&ticket=${pos.ticket}&stoploss=${Math.round(price * 0.5)}&takeprofit=${Math.round(price * 1.5)}`);
    expect(m.status, m.text).toBe(200);
    const c = await api(`/OrderClose?id=${id}&ticket=${pos.ticket}`);
    expect(c.status, c.text).toBe(200);
    const h = await api(`/OrderHistory?id=${id}`);
    expect(h.status).toBe(200);
    expect(h.body.deals.some((d: { position: number; entry: string }) => d.position === pos.ticket && d.entry === 'out')).toBe(true);

    // A pending order far from the market, then deleted.
    const q = await api(`/GetQuote?id=${id}&symbol=BTCUSD&cached=0`);
    const lim = await api(`/OrderSend?id=${id}&symbol=BTCUSD&operation=BuyLimit&volume=0.01&price=${Math.round(q.body.ask * 0.5)}`);
    expect(lim.status, lim.text).toBe(200);
    const del = await api(`/OrderDelete?id=${id}&ticket=${lim.body.ticket}`);
    expect(del.status, del.text).toBe(200);
  });
});

describe('P4/P5 differences', () => {
  it('/BalanceHistory: P5 answers, P4 501 NOT_ON_THIS_TERMINAL', async () => {
    expect((await api(`/BalanceHistory?id=${p5}`)).status).toBe(200);
    const r = await api(`/BalanceHistory?id=${p4}`);
    expect(r.status).toBe(501);
    expect(r.body.error).toBe('NOT_ON_THIS_TERMINAL');
  });

  it('stop-limit orders: refused on P4 before reaching the broker', async () => {
    const r = await api(`/OrderSend?id=${p4}&symbol=BTCUSD&operation=BuyStopLimit&volume=0.01&price=1&stopLimitPrice=1`);
    expect(r.status).toBe(400);
    expect(r.body.message).toMatch(/stop-limit/);
  });

  it('OrderCloseBy exists on both (a Buy closed by a Sell on P4 tickets / P5 hedging needs opposite positions)', async () => {
    for (const id of [p4, p5]) {
      const a = await api(`/OrderSend?id=${id}&symbol=BTCUSD&operation=Buy&volume=0.01`);
      const b = await api(`/OrderSend?id=${id}&symbol=BTCUSD&operation=Sell&volume=0.01`);
      const r = await api(`/OrderCloseBy?id=${id}&ticket=${a.body.positionId || a.body.ticket}&byTicket=${b.body.positionId || b.body.ticket}`);
      // 200 when the account can hold opposite positions; otherwise the broker's reason (400 TRADE_REQUEST_ERROR).
      expect([200, 400]).toContain(r.status);
      if (r.status === 400) expect(r.body.error).toBe('TRADE_REQUEST_ERROR');
    }
  });
});

describe('/GetQuote cache', () => {
  it('serves the same quote within 250 ms unless cached=0', async () => {
    // On the gateway's clock held still (whatever this machine's speed): a bypassing read fills the
    // cache, and after the market ticked (seen through GetQuoteMany, which has no cache) a cached read
    // still answers the old quote; once the clock is 250 ms on, the cached read is fresh.
    const quote = (q: string) => api(`/GetQuote?id=${p5}&symbol=BTCUSD${q}`);
    heldAt = Date.now();
    try {
      const a = await quote('&cached=0');
      expect(a.status, a.text).toBe(200);
      let ticked: { timeMsc: number } | undefined;
      await until(async () => {
        const many = (await api(`/GetQuoteMany?id=${p5}&symbols=BTCUSD`)).body as Array<{ symbol: string; timeMsc: number }>;
        ticked = many.find((m) => m.symbol === 'BTCUSD' && m.timeMsc !== a.body.timeMsc);
        return ticked !== undefined;
      }, 'BTCUSD to tick');
      expect((await quote('')).body).toEqual(a.body);
      heldAt += 249;
      expect((await quote('')).body, 'served from the cache up to 250 ms').toEqual(a.body);
      heldAt += 1;
      const fresh = await quote('');
      expect(fresh.body.timeMsc, 'the cache entry is 250 ms old: read again').not.toBe(a.body.timeMsc);
      // cached=0 bypasses a fresh entry too (and refreshes it).
      heldAt += 1;
      await until(async () => (await api(`/GetQuoteMany?id=${p5}&symbols=BTCUSD`)).body.some((m: { symbol: string; timeMsc: number }) => m.symbol === 'BTCUSD' && m.timeMsc !== fresh.body.timeMsc), 'BTCUSD to tick again');
      const bypass = await quote('&cached=0');
      expect(bypass.body.timeMsc).not.toBe(fresh.body.timeMsc);
      expect((await quote('')).body).toEqual(bypass.body);
      // cached=1 is the default; any other value (cached=false read as "use the cache", a quote up to
      // 250 ms old for a bot that asked for none) is a 400 naming it, as heartbeat= is on /v1/stream.
      expect((await quote('&cached=1')).body).toEqual(bypass.body);
      for (const v of ['false', 'no', '', 'abc']) {
        const r = await quote(`&cached=${v}`);
        expect(r.status, v).toBe(400);
        expect(r.body.message, v).toContain("'cached'");
      }
    } finally {
      heldAt = undefined;
    }
  });
});

describe('§7 statuses', () => {
  it('400 ACCOUNT_ID_REQUIRED asks for ?id=<accountUUID>; 400 BAD_REQUEST; 400 TRADE_REQUEST_ERROR with the broker reason, replayed', async () => {
    const r = await api('/AccountSummary');
    expect(r.status).toBe(400);
    expect(r.body.error).toBe('ACCOUNT_ID_REQUIRED');
    expect(r.body.message).toContain('?id=<accountUUID>');
    expect((await api('/AccountSummary?id=')).body.error).toBe('ACCOUNT_ID_REQUIRED');
    const bad = await api(`/GetQuote?id=${p5}`);
    expect(bad.status).toBe(400);
    expect(bad.body.error).toBe('BAD_REQUEST');
    expect((await api(`/OrderSend?id=${p5}&symbol=BTCUSD&operation=Fly&volume=1`)).status).toBe(400);
    // Numbers are plain decimals: '0x1' is not one lot, a ticket is not hex or 1e23, magic is an integer.
    for (const q of ['volume=0x1', 'volume=0b1', 'volume=Infinity', 'volume=0.01&magic=1.5', 'volume=0.01&magic=-1', 'volume=0.01&magic=1e30']) {
      const r = await api(`/OrderSend?id=${p5}&symbol=BTCUSD&operation=Buy&${q}`);
      expect(r.status, q).toBe(400);
      expect(r.body.error, q).toBe('BAD_REQUEST');
    }
    for (const tk of ['0x186A3', '99999999999999999999999', '1e5']) {
      expect((await api(`/OpenedOrder?id=${p5}&ticket=${tk}`)).body.error, tk).toBe('BAD_REQUEST');
      expect((await api(`/OrderClose?id=${p5}&ticket=${tk}`)).body.error, tk).toBe('BAD_REQUEST');
    }
    expect((await api(`/OrderSend?id=${p5}&symbol=BTCUSD&operation=Buy&volume=1&clientOrderId=bad%20id`)).body.error).toBe('BAD_REQUEST');
    expect((await api(`/OrderSend?id=${p5}&symbol=BTCUSD&operation=Buy&volume=1&clientOrderId=${'x'.repeat(65)}`)).status).toBe(400);
    const rej = await api(`/OrderSend?id=${p5}&symbol=BTCUSD&operation=Buy&volume=0.013&clientOrderId=rej-1`);
    expect(rej.status).toBe(400);
    expect(rej.body).toMatchObject({ error: 'TRADE_REQUEST_ERROR', reason: 'INVALID_VOLUME' });
    const rej2 = await api(`/OrderSend?id=${p5}&symbol=BTCUSD&operation=Buy&volume=0.013&clientOrderId=rej-1`);
    expect(rej2.status).toBe(400);
    expect(rej2.headers.get('idempotent-replay')).toBe('true');
    expect(rej2.body).toEqual(rej.body);
  });

  it('400 for a time with no calendar date (out of range, 2026-02-30) and for absurd lots or prices; nothing is sent', async () => {
    // BTCUSD trades around the clock (EURUSD's market closes Friday 21:55 UTC until Sunday 22:00).
    const q = (await api(`/GetQuote?id=${p5}&symbol=BTCUSD`)).body;
    const limit = `/OrderSend?id=${p5}&symbol=BTCUSD&operation=BuyLimit&volume=0.01&price=${(q.ask - 100).toFixed(2)}`;
    const before = (await api(`/OpenedOrdersTickets?id=${p5}`)).body;
    for (const exp of ['8640000000000001', '99999999999999999999', '2026-02-30T00:00:00', '10000-01-01T00:00:00Z']) {
      const r = await api(`${limit}&expiration=${exp}`);
      expect(r.status, exp).toBe(400);
      expect(r.body.error, exp).toBe('BAD_REQUEST');
      expect(r.body.message, exp).toContain("'expiration'");
    }
    expect((await api(`/OpenedOrdersTickets?id=${p5}`)).body).toEqual(before);
    // A field of another kind of order is 400 before the id is claimed, as on /v1/proxy: a Buy with an
    // expiration, a BuyStop with a stopLimitPrice (it filled at market, or placed a plain stop).
    const stop = `/OrderSend?id=${p5}&symbol=BTCUSD&operation=BuyStop&volume=0.01&price=${(q.ask + 100).toFixed(2)}`;
    for (const [url, field] of [
      [`/OrderSend?id=${p5}&symbol=BTCUSD&operation=Buy&volume=0.01&expiration=2030-01-01T00:00:00&clientOrderId=belongs-1`, 'expiration'],
      [`${stop}&stopLimitPrice=${q.ask.toFixed(2)}&clientOrderId=belongs-2`, 'stopLimitPrice'],
    ] as const) {
      const r = await api(url);
      expect(r.status, url).toBe(400);
      expect(r.body, url).toMatchObject({ error: 'BAD_REQUEST', message: expect.stringContaining(`'${field}'`) });
    }
    // A value no order can have is 400 before the id is claimed (it reached the broker and burned the id
    // as a final rejection; a negative slippage was taken), with the value ranges of /v1/proxy.
    const buy = `/OrderSend?id=${p5}&symbol=BTCUSD&operation=Buy&volume=0.01`;
    for (const [url, field] of [
      [`${buy}&slippage=-5`, 'slippage'], [`${buy}&stoploss=-1`, 'stoploss'], [`${buy}&takeprofit=-1`, 'takeprofit'],
      [`${stop}&stopLimitPrice=0`, 'stopLimitPrice'], [`/OrderSend?id=${p5}&symbol=BTCUSD&operation=BuyLimit&volume=0.01&price=-1`, 'price'],
      [`/OrderClose?id=${p5}&ticket=1&lots=-0.01`, 'lots'], [`/OrderClose?id=${p5}&ticket=1&volume=0`, 'volume'],
      [`/OrderClose?id=${p5}&ticket=1&slippage=-1`, 'slippage'], [`/OrderModify?id=${p5}&ticket=1&stoploss=-1`, 'stoploss'],
    ] as const) {
      const r = await api(`${url}&clientOrderId=range-${field}`);
      expect(r.status, url).toBe(400);
      expect(r.body, url).toMatchObject({ error: 'BAD_REQUEST', message: expect.stringContaining(`'${field}'`) });
    }
    expect((await api(`/OpenedOrdersTickets?id=${p5}`)).body).toEqual(before);
    const corrected = await api(`${stop}&clientOrderId=belongs-2`);
    expect(corrected.status, corrected.text).toBe(200);
    expect(corrected.headers.get('idempotent-replay')).toBeNull();
    expect((await api(`/OrderDelete?id=${p5}&ticket=${corrected.body.ticket}`)).status).toBe(200);
    // The order listings still answer (an unrepresentable time once made them 500).
    expect((await api(`/OpenedOrders?id=${p5}`)).status).toBe(200);
    for (const bad of ['lots=1&price=-5000', 'lots=1e308', 'lots=1&price=1e308', 'volume=-2']) {
      expect((await api(`/RequiredMargin?id=${p5}&symbol=BTCUSD&${bad}`)).status, bad).toBe(400);
    }
    expect((await api(`/TickValueWithSize?id=${p5}&symbols=EURUSD&lots=-2`)).status).toBe(400);
    // A single-symbol route given two symbols: 400 (it answered for the last one).
    expect((await api(`/GetQuote?id=${p5}&symbol=BTCUSD&symbol=GBPUSD`)).body.message).toContain('one symbol');
    expect((await api(`/GetQuote?id=${p5}&symbol=BTCUSD&symbol=BTCUSD`)).status).toBe(200);
    // Any single-valued parameter given twice with different values: 400 naming it, nothing sent.
    const send = `/OrderSend?id=${p5}&symbol=BTCUSD&operation=Buy&volume=0.01`;
    for (const [q, field] of [['&clientOrderId=x1&clientOrderId=x2', 'clientOrderId'], ['&volume=0.02', 'volume'], ['&operation=Sell', 'operation']]) {
      const r = await api(send + q);
      expect(r.status, q).toBe(400);
      expect(r.body.message, q).toMatch(new RegExp(`'${field}': given more than once with different values`));
    }
    expect((await api(`/RequiredMargin?id=${p5}&symbol=BTCUSD&lots=1&lots=2`)).status).toBe(400);
    // A parameter and its alias with different values: the same ambiguity, the same 400 (volume=0.01&lots=0.05
    // filled 0.01, id=A&accountId=B answered for A); equal values are that value.
    for (const [url, field] of [
      [`${send}&lots=0.05`, 'lots'], [`/OrderClose?id=${p5}&ticket=1&lots=0.01&volume=0.02`, 'volume'],
      [`/OrderSend?id=${p5}&symbol=BTCUSD&operation=BuyStopLimit&volume=0.01&price=1&stopLimitPrice=0.9&stoplimit=0.8`, 'stoplimit'],
      [`/RequiredMargin?id=${p5}&symbol=BTCUSD&lots=1&volume=2`, 'volume'], [`/TickValueWithSize?id=${p5}&symbols=EURUSD&lots=1&volume=3`, 'volume'],
      [`/AccountSummary?id=${p5}&accountId=${p4}`, 'accountId'],
    ] as const) {
      const r = await api(url);
      expect(r.status, url).toBe(400);
      expect(r.body.message, url).toContain(`'${field}'`);
    }
    expect((await api(`/AccountSummary?id=${p5}&accountId=${p5}`)).status).toBe(200);
    expect((await api(`/RequiredMargin?id=${p5}&symbol=BTCUSD&lots=1&volume=1.0`)).status).toBe(200);
    const alias = await api(`/TickValueWithSize?id=${p5}&symbols=EURUSD&volume=3`);
    expect(alias.body[0]).toMatchObject({ lots: 3 });
  });

  it('an Idempotency-Key that reads as empty (empty, or only bytes >= 0x80, which uWS trims) is 400, not an order without idempotency', async () => {
    const raw = (header: Buffer) => new Promise<string>((resolve, reject) => {
      const sock = connect(t.gw.port, '127.0.0.1');
      let out = '';
      sock.on('data', (d) => (out += String(d)));
      sock.on('end', () => resolve(out));
      sock.on('error', reject);
      sock.write(Buffer.concat([
        Buffer.from(`GET /OrderSend?id=${p5}&symbol=BTCUSD&operation=Buy&volume=0.01 HTTP/1.1\r\nHost: x\r\nx-api-key: ${key}\r\nConnection: close\r\nIdempotency-Key: `),
        header, Buffer.from('\r\n\r\n'),
      ]));
    });
    const before = (await api(`/OpenedOrdersTickets?id=${p5}`)).body;
    for (const h of [Buffer.from('é', 'utf8'), Buffer.from([0xff, 0x80]), Buffer.alloc(0)]) {
      const r = await raw(h);
      expect(r, h.toString('hex')).toMatch(/^HTTP\/1\.1 400/);
      expect(r).toContain('1 to 64 characters');
    }
    // Two Idempotency-Key headers that differ: refused (uWS would give the first one only).
    const twice = await raw(Buffer.from('h1\r\nIdempotency-Key: h2'));
    expect(twice).toMatch(/^HTTP\/1\.1 400/);
    expect(twice).toContain("'Idempotency-Key' given more than once");
    expect((await api(`/OpenedOrdersTickets?id=${p5}`)).body).toEqual(before);
  });

  it('401 without a key and with an invalid key; 429 after too many failures from one IP', async () => {
    const ip = { 'x-forwarded-for': '198.51.100.7' };
    const none = await t.req('GET', `/AccountSummary?id=${p5}`, { headers: ip });
    expect(none.status).toBe(401);
    expect((await api(`/AccountSummary?id=${p5}`, 'tagw_api_bogus', ip)).status).toBe(401);
    expect((await api(`/AccountSummary?id=${p5}`, 'nope', ip)).status).toBe(401);
    const blocked = await api(`/AccountSummary?id=${p5}`, key, ip);
    expect(blocked.status).toBe(429);
    expect(blocked.headers.get('retry-after')).toBeTruthy();
  });

  it('402 NO_SUBSCRIPTION while a private seat is being prepared', async () => {
    const seat = await t.req('POST', '/v1/seats', { headers: mgmt(t.managementKey), body: { privateHosting: true } });
    expect(seat.body.status).toBe('BUILDING_SERVER');
    const r = await api(`/AccountSummary?id=${seat.body.id}`);
    expect(r.status).toBe(402);
    expect(r.body.error).toBe('NO_SUBSCRIPTION');
  });

  it('the gateway routes check the seat too: /v1/connect answers 402 while it is prepared, 503 when it has no login', async () => {
    const building = await t.req('POST', '/v1/seats', { headers: mgmt(t.managementKey), body: { privateHosting: true, user: 'bld-1', password: 'pw', server: 'Sim-P4-Demo' } });
    expect(building.body.status).toBe('BUILDING_SERVER');
    const c1 = await t.req('POST', '/v1/connect', { headers: { 'x-api-key': key }, body: { brokerAccountId: building.body.id } });
    expect(c1.status).toBe(402);
    expect(c1.body.error).toBe('NO_SUBSCRIPTION');
    const loginless = await t.req('POST', '/v1/seats', { headers: mgmt(t.managementKey), body: { privateHosting: false } });
    expect(loginless.body.status).toBe('ACTIVE');
    const c2 = await t.req('POST', '/v1/connect', { headers: { 'x-api-key': key }, body: { brokerAccountId: loginless.body.id } });
    expect(c2.status).toBe(503);
    expect(c2.body.error).toBe('NOT_CONNECTED');
    expect((await api(`/AccountSummary?id=${loginless.body.id}`)).status).toBe(503);
  });

  it('a read-only key cannot create or re-bind accounts: /ConnectEx answers 403 whatever its form', async () => {
    const ro = (await t.req('POST', `/v1/seats/${p5}/keys`, { headers: mgmt(t.managementKey), body: { label: 'ro-bind', readOnly: true } })).body.key;
    const roScoped = (await t.req('POST', `/v1/seats/${p5}/keys`, { headers: mgmt(t.managementKey), body: { label: 'ro-sc', readOnly: true, accountScoped: true } })).body.key;
    const tries = [
      t.req('POST', '/ConnectEx', { headers: { 'x-api-key': ro }, body: { user: 'ro-new', password: 'x', server: 'Sim-P5-Demo' } }),
      t.req('GET', `/ConnectEx?id=${p4}&user=ro-attacker&password=a&server=Sim-P4-Demo`, { headers: { 'x-api-key': ro } }),
      t.req('GET', `/ConnectEx?id=${p5}&user=ro-attacker2&password=a&server=Sim-P5-Demo`, { headers: { 'x-api-key': roScoped } }),
    ];
    for (const r of await Promise.all(tries)) {
      expect(r.status, r.text).toBe(403);
      expect(r.body.error).toBe('READ_ONLY_KEY');
    }
    expect((await api(`/AccountDetails?id=${p4}`)).body.login).toBe('c-p4');
  });

  it('a platform that does not match the server is 400 for a login already bound, as for a new one', async () => {
    const r = await t.req('POST', '/ConnectEx', { headers: { 'x-api-key': key }, body: { user: 'c-p5', password: 'pw5', server: 'Sim-P5-Demo', platform: 'P4' } });
    expect(r.status).toBe(400);
    expect(r.body.message).toMatch(/P5 server, not P4/);
    const ok = await t.req('POST', '/ConnectEx', { headers: { 'x-api-key': key }, body: { user: 'c-p5', password: 'pw5', server: 'Sim-P5-Demo', platform: 'P5' } });
    expect(ok.body.id).toBe(p5);
  });

  it('403 for a read-only key on every trading route and for a scoped key on another account', async () => {
    const ro = (await t.req('POST', `/v1/seats/${p5}/keys`, { headers: mgmt(t.managementKey), body: { label: 'ro', readOnly: true } })).body.key;
    expect((await api(`/AccountSummary?id=${p5}`, ro)).status).toBe(200);
    for (const path of ['OrderSend?symbol=BTCUSD&operation=Buy&volume=0.01', 'OrderModify?ticket=1&stoploss=0&takeprofit=0', 'OrderClose?ticket=1', 'OrderDelete?ticket=1', 'OrderCloseBy?ticket=1&byTicket=2']) {
      const r = await api(`/${path}&id=${p5}`, ro);
      expect(r.status, path).toBe(403);
    }
    // Whatever the parameters: a trading call with bad or missing ones is still a 403, not a 400.
    for (const path of ['OrderSend?volume=0x1', 'OrderCloseBy?ticket=1', 'OrderClose?', 'OrderModify?ticket=abc']) {
      const r = await api(`/${path}&id=${p5}`, ro);
      expect(r.status, path).toBe(403);
      expect(r.body.error, path).toBe('READ_ONLY_KEY');
    }
    const scoped = (await t.req('POST', `/v1/seats/${p5}/keys`, { headers: mgmt(t.managementKey), body: { label: 'sc', accountScoped: true } })).body.key;
    expect((await api(`/AccountSummary?id=${p5}`, scoped)).status).toBe(200);
    expect((await api(`/AccountSummary?id=${p4}`, scoped)).status).toBe(403);
  });

  it('404 for an unknown id and for another customer\'s account', async () => {
    expect((await api('/AccountSummary?id=00000000-0000-4000-8000-000000000000')).status).toBe(404);
    const { createCustomer } = await import('../../src/auth/bootstrap.js');
    const other = createCustomer(t.gw.services.tenancy, 'other-classic');
    const otherKey = (await t.req('POST', '/v1/keys', { headers: mgmt(other.managementKey), body: { label: 'o' } })).body.key;
    const r = await api(`/AccountSummary?id=${p5}`, otherKey);
    expect(r.status).toBe(404);
  });

  it('422 IDEMPOTENCY_KEY_REUSED for the same id with other parameters, and nothing is sent', async () => {
    const first = await api(`/OrderSend?id=${p5}&symbol=BTCUSD&operation=Buy&volume=0.01&clientOrderId=re-1`);
    expect(first.status).toBe(200);
    const before = (await api(`/OpenedOrdersTickets?id=${p5}`)).body.length;
    const r = await api(`/OrderSend?id=${p5}&symbol=BTCUSD&operation=Buy&volume=0.02&clientOrderId=re-1`);
    expect(r.status).toBe(422);
    expect(r.body.error).toBe('IDEMPOTENCY_KEY_REUSED');
    expect((await api(`/OpenedOrdersTickets?id=${p5}`)).body.length).toBe(before);
  });

  it('two concurrent requests with the same id execute once', async () => {
    const before = (await api(`/OpenedOrdersTickets?id=${p4}`)).body.length;
    const rs = await Promise.all([1, 2, 3].map(() => api(`/OrderSend?id=${p4}&symbol=BTCUSD&operation=Buy&volume=0.01&clientOrderId=conc-1`)));
    expect(rs.map((r) => r.status)).toEqual([200, 200, 200]);
    expect(rs.filter((r) => r.headers.get('idempotent-replay') === 'true')).toHaveLength(2);
    expect(new Set(rs.map((r) => r.body.ticket)).size).toBe(1);
    expect((await api(`/OpenedOrdersTickets?id=${p4}`)).body.length).toBe(before + 1);
  });

  it('a timeout after send is resolved through the broker request id: the original result, once', async () => {
    await t.gw.services.shards.call(p5, 'account.fault', { accountId: p5, fault: { kind: 'timeoutAfterSend', count: 1 } });
    const before = (await api(`/OpenedOrdersTickets?id=${p5}`)).body.length;
    const r = await api(`/OrderSend?id=${p5}&symbol=BTCUSD&operation=Buy&volume=0.01&clientOrderId=tas-1`);
    expect(r.status, r.text).toBe(200);
    const again = await api(`/OrderSend?id=${p5}&symbol=BTCUSD&operation=Buy&volume=0.01&clientOrderId=tas-1`);
    expect(again.body).toEqual(r.body);
    expect((await api(`/OpenedOrdersTickets?id=${p5}`)).body.length).toBe(before + 1);
  });

  it('embedded: the shard dies while the order waits at the simulator; the retry executes it once (no 409: the simulator died with it and never executed it)', async () => {
    const k = (await t.req('POST', '/v1/keys', { headers: mgmt(t.managementKey), body: { label: 'k409' } })).body.key;
    const id = (await t.req('POST', '/ConnectEx', { headers: { 'x-api-key': k }, body: { user: 'c-409', password: 'pw', server: 'Sim-P5-Demo' } })).body.id;
    await t.gw.services.shards.call(id, 'account.fault', { accountId: id, fault: { kind: 'latency', latencyMs: 5_000 } });
    const inflight = api(`/OrderSend?id=${id}&symbol=BTCUSD&operation=Buy&volume=0.01&clientOrderId=u-1`, k);
    // Killed once the order is claimed (sent to the simulator, waiting out its latency). After a fixed
    // 300 ms a loaded machine could kill the shard before the order reached it: the request then waited
    // for the restart and was answered 200.
    const claimed = t.gw.services.db.prepare("SELECT phase FROM idempotency WHERE account_id = ? AND client_order_id = 'u-1'");
    await until(() => (claimed.get(id) as { phase: string } | undefined)?.phase === 'sent', 'the order claimed and sent');
    await t.gw.services.shards.kill(t.gw.services.shards.shardFor(id));
    const first = await inflight;
    expect(first.status).toBe(503);
    let r = await api(`/OrderSend?id=${id}&symbol=BTCUSD&operation=Buy&volume=0.01&clientOrderId=u-1`, k);
    if (r.status === 503) await until(async () => (r = await api(`/OrderSend?id=${id}&symbol=BTCUSD&operation=Buy&volume=0.01&clientOrderId=u-1`, k)).status !== 503, 'the restarted shard to take the retry');
    // Before: 409 IDEMPOTENCY_UNCERTAIN for 24 h, for an order that certainly did not exist. The
    // 409 stays where it is honest: a broker in another process (test/idempotency.*.test.ts, bridge).
    expect(r.status, r.text).toBe(200);
    expect(r.headers.get('idempotent-replay')).toBeNull();
    expect((await api(`/OpenedOrdersTickets?id=${id}`, k)).body).toEqual([r.body.ticket]);
    const again = await api(`/OrderSend?id=${id}&symbol=BTCUSD&operation=Buy&volume=0.01&clientOrderId=u-1`, k);
    expect(again.headers.get('idempotent-replay')).toBe('true');
    expect(again.body.ticket).toBe(r.body.ticket);
  });

  it('500 TERMINAL_ERROR when the account connection faults unexpectedly (stored credentials unreadable)', async () => {
    const k = (await t.req('POST', '/v1/keys', { headers: mgmt(t.managementKey), body: { label: 'k500' } })).body.key;
    const id = (await t.req('POST', '/ConnectEx', { headers: { 'x-api-key': k }, body: { user: 'c-500', password: 'pw', server: 'Sim-P4-Demo' } })).body.id;
    t.gw.services.db.prepare("UPDATE account_bindings SET password_enc = 'v1.AAAA.AAAA.AAAA' WHERE seat_id = ?").run(id);
    await t.gw.services.shards.kill(t.gw.services.shards.shardFor(id));
    let r = await api(`/AccountSummary?id=${id}`, k);
    await until(async () => (r = await api(`/AccountSummary?id=${id}`, k)).status !== 503, 'the restarted shard to answer');
    expect(r.status).toBe(500);
    expect(r.body.error).toBe('TERMINAL_ERROR');
  });

  it('501 NOT_ON_THIS_TERMINAL for an endpoint newer than the connection build', async () => {
    const r = await t.req('POST', '/ConnectEx', { headers: { 'x-api-key': key }, body: { user: 'c-old', password: 'pw', server: 'Sim-P5-Demo', build: 1500 } });
    expect(r.status).toBe(200);
    expect((await api(`/AccountSummary?id=${r.body.id}`)).status).toBe(200);
    const n = await api(`/TickValueWithSize?id=${r.body.id}&symbols=EURUSD`);
    expect(n.status).toBe(501);
    expect(n.body.error).toBe('NOT_ON_THIS_TERMINAL');
    // The gateway operations of the same names answer as their classic routes (they answered 200 there).
    const handle = (await t.req('POST', '/v1/connect', { headers: { 'x-api-key': key }, body: { brokerAccountId: r.body.id } })).body.handle;
    for (const op of ['GetQuoteMany', 'MarketWatchMany', 'SymbolParamsMany']) {
      const g = await t.req('GET', `/v1/proxy/${op}?handle=${handle}&symbols=EURUSD`, { headers: { 'x-api-key': key } });
      expect(g.status, `${op}: ${g.text}`).toBe(501);
      expect(g.body.error).toBe('NOT_ON_THIS_TERMINAL');
      expect((await api(`/${op}?id=${r.body.id}&symbols=EURUSD`)).status, op).toBe(501);
    }
    expect((await t.req('GET', `/v1/proxy/SymbolParams?handle=${handle}&symbol=EURUSD`, { headers: { 'x-api-key': key } })).status).toBe(200);
  });

  it('503 while not connected: a dropped connection reports reconnecting, summary goes synced=false, CheckConnect restores', { timeout: 30_000 }, async () => {
    const k = (await t.req('POST', '/v1/keys', { headers: mgmt(t.managementKey), body: { label: 'k503' } })).body.key;
    const id = (await t.req('POST', '/ConnectEx', { headers: { 'x-api-key': k }, body: { user: 'c-503', password: 'pw', server: 'Sim-P5-Demo' } })).body.id;
    expect((await api(`/AccountSummary?id=${id}`, k)).body.synced).toBe(true);
    // Outlasts the three requests below: CheckConnect waits CHECK_WAIT_MS (1 s) for its reconnect, and
    // OpenedOrders BROKER_WAIT_MS (2 s) before its 503; 1.5 s more for a loaded machine, not more (the
    // test waits the rest out).
    await t.gw.services.shards.call(id, 'account.fault', { accountId: id, fault: { kind: 'drop', durationMs: 4_500 } });
    const during = await api(`/CheckConnect?id=${id}`, k);
    expect(during.body).toMatchObject({ connected: false, connection: 'reconnecting' });
    const s = await api(`/AccountSummary?id=${id}`, k);
    expect(s.status).toBe(200);
    expect(s.body.synced).toBe(false);
    const o = await api(`/OpenedOrders?id=${id}`, k);
    expect(o.status).toBe(503);
    expect(o.body.error).toBe('NOT_CONNECTED');
    let after = await api(`/CheckConnect?id=${id}`, k);
    for (let i = 0; i < 20 && !after.body.connected; i++) after = await api(`/CheckConnect?id=${id}`, k);
    expect(after.body).toMatchObject({ connected: true, connection: 'connected' });
    expect((await api(`/AccountSummary?id=${id}`, k)).body.synced).toBe(true);
  });

  it('503 for a seat with no broker login bound yet', async () => {
    const seat = await t.req('POST', '/v1/seats', { headers: mgmt(t.managementKey), body: {} });
    const r = await api(`/AccountSummary?id=${seat.body.id}`);
    expect(r.status).toBe(503);
    expect(r.body.message).toMatch(/ConnectEx/);
  });
});

describe('/ConnectEx and POST /v1/seats with broker fields', () => {
  it('a wrong broker password answers 400 BROKER_AUTH_FAILED without echoing it, and creates nothing', async () => {
    const before = (await t.req('GET', '/v1/seats', { headers: mgmt(t.managementKey) })).body.seats.length;
    const r = await t.req('POST', '/ConnectEx', { headers: { 'x-api-key': key }, body: { user: 'c-p5', password: 'WRONG-secret-123', server: 'Sim-P5-Demo' } });
    expect(r.status).toBe(400);
    expect(r.body.error).toBe('BROKER_AUTH_FAILED');
    expect(r.text).not.toContain('WRONG-secret-123');
    expect((await t.req('GET', '/v1/seats', { headers: mgmt(t.managementKey) })).body.seats.length).toBe(before);
  });

  it('any method: PUT, PATCH and DELETE take the JSON body as POST does (SPEC §4.2 lists "any")', async () => {
    for (const method of ['PUT', 'PATCH', 'DELETE'] as const) {
      const r = await t.req(method, '/ConnectEx', { headers: { 'x-api-key': key }, body: { user: 'c-p5', password: 'pw5', server: 'Sim-P5-Demo' } });
      expect(r.status, method).toBe(200);
      expect(r.body, method).toEqual({ id: p5 });
    }
  });

  it('id and its alias accountId with different values: 400 naming the alias, in either form; nothing is re-bound', async () => {
    const q = `/ConnectEx?user=c-p5&password=pw5&server=Sim-P5-Demo&id=${p4}&accountId=${p5}`;
    const get = await t.req('GET', q, { headers: { 'x-api-key': key } });
    expect(get.status, get.text).toBe(400);
    expect(get.body.message).toContain("'accountId'");
    const post = await t.req('POST', '/ConnectEx', { headers: { 'x-api-key': key }, body: { user: 'c-p4', password: 'pw4', server: 'Sim-P4-Demo', id: p5, accountId: p4 } });
    expect(post.status, post.text).toBe(400);
    expect(post.body.message).toContain("'accountId'");
    // Neither account moved to the other's login.
    expect((await api(`/AccountDetails?id=${p5}`)).body.server).toBe('Sim-P5-Demo');
    expect((await api(`/AccountDetails?id=${p4}`)).body.server).toBe('Sim-P4-Demo');
    // The same account twice is that account.
    const same = await t.req('POST', '/ConnectEx', { headers: { 'x-api-key': key }, body: { user: 'c-p5', password: 'pw5', server: 'Sim-P5-Demo', id: p5, accountId: p5 } });
    expect(same.status, same.text).toBe(200);
    expect(same.body).toEqual({ id: p5 });
  });

  it('unknown server and platform mismatch answer 400', async () => {
    expect((await t.req('POST', '/ConnectEx', { headers: { 'x-api-key': key }, body: { user: 'x', password: 'y', server: 'Nope' } })).status).toBe(400);
    expect((await t.req('POST', '/ConnectEx', { headers: { 'x-api-key': key }, body: { user: 'x', password: 'y', server: 'Sim-P5-Demo', platform: 'P4' } })).status).toBe(400);
  });

  it('re-binding an existing id keeps the id; a scoped key may only bind its own account', async () => {
    const r = await t.req('POST', '/ConnectEx', { headers: { 'x-api-key': key }, body: { id: p5, user: 'c-p5', password: 'pw5', server: 'Sim-P5-Demo' } });
    expect(r.status).toBe(200);
    expect(r.body.id).toBe(p5);
    const scoped = (await t.req('POST', `/v1/seats/${p5}/keys`, { headers: mgmt(t.managementKey), body: { label: 'sc2', accountScoped: true } })).body.key;
    const other = await t.req('POST', '/ConnectEx', { headers: { 'x-api-key': scoped }, body: { id: p4, user: 'c-p4', password: 'pw4', server: 'Sim-P4-Demo' } });
    expect(other.status).toBe(403);
  });

  it('POST /v1/seats takes the same broker fields (all or none)', async () => {
    const r = await t.req('POST', '/v1/seats', { headers: mgmt(t.managementKey), body: { user: 'seat-1', password: 'pw', server: 'Sim-P4-Demo' } });
    expect(r.status, r.text).toBe(201);
    expect(r.text).not.toContain('"pw"');
    const s = await api(`/AccountDetails?id=${r.body.id}`);
    expect(s.status).toBe(200);
    expect(s.body).toMatchObject({ platform: 'P4', login: 'seat-1' });
    expect((await t.req('POST', '/v1/seats', { headers: mgmt(t.managementKey), body: { user: 'seat-2', server: 'Sim-P4-Demo' } })).status).toBe(400);
    // A login has one account: a second seat for it is a conflict, whatever the password.
    const second = await t.req('POST', '/v1/seats', { headers: mgmt(t.managementKey), body: { user: 'seat-1', password: 'nope', server: 'Sim-P4-Demo' } });
    expect(second.status).toBe(409);
    expect(second.body.error).toBe('BROKER_LOGIN_IN_USE');
    expect(second.text).not.toContain('nope');
  });

  it('the password is stored sealed, never in clear', async () => {
    const row = t.gw.services.db.prepare('SELECT password_enc FROM account_bindings WHERE seat_id = ?').get(p5) as { password_enc: string };
    expect(row.password_enc.startsWith('v1.')).toBe(true);
    expect(row.password_enc).not.toContain('pw5');
  });
});

describe('rolling upgrade', () => {
  it('a request in flight on the old connection finishes before the new connection (with another build) takes over', async () => {
    const k = (await t.req('POST', '/v1/keys', { headers: mgmt(t.managementKey), body: { label: 'kup' } })).body.key;
    const id = (await t.req('POST', '/ConnectEx', { headers: { 'x-api-key': k }, body: { user: 'c-up', password: 'pw', server: 'Sim-P5-Demo' } })).body.id;
    expect((await api(`/TickValueWithSize?id=${id}&symbols=EURUSD`, k)).status).toBe(200);
    await t.gw.services.shards.call(id, 'account.fault', { accountId: id, fault: { kind: 'latency', latencyMs: 800 } });
    const order: string[] = [];
    const shards = t.gw.services.shards;
    const depth = () => shards.queueDepths()[shards.shardFor(id)]!;
    const idle = depth();
    const slow = api(`/AccountSummary?id=${id}`, k).then((r) => { order.push('request'); return r; });
    // The upgrade is sent once the request is at the shard (its command queued before the upgrade's,
    // which the shard then takes after it). After a fixed 150 ms a loaded machine could still be
    // parsing the request, and the upgrade went first.
    await until(() => depth() > idle, 'the request to be sent to its shard');
    const up = t.req('POST', `/v1/accounts/${id}/upgrade`, { headers: mgmt(t.managementKey), body: { build: 2_000 } }).then((r) => { order.push('upgrade'); return r; });
    const [r, u] = await Promise.all([slow, up]);
    expect(r.status).toBe(200);
    expect(r.body.synced).toBe(true);
    expect(u.status, u.text).toBe(200);
    expect(u.body).toMatchObject({ build: 2_000, generation: 1 });
    expect(order).toEqual(['request', 'upgrade']);
    // The replacement runs the new build: TickValueWithSize needs 3000 on P5.
    expect((await api(`/TickValueWithSize?id=${id}&symbols=EURUSD`, k)).status).toBe(501);
    expect((await api(`/AccountSummary?id=${id}`, k)).status).toBe(200);
  }, 20_000);
});

describe('query memo and secrets', () => {
  it('every route whose query carries a broker password keeps no validated copy of it', () => {
    const withPassword = t.gw.routes.filter((r) => r.query && 'password' in ((r.query as unknown as { shape?: object }).shape ?? {}));
    expect(withPassword.map((r) => `${r.method} ${r.path}`)).toEqual(['get /ConnectEx']);
    for (const r of withPassword) expect(r.secretQuery).toBe(true);
  });
  it('trading routes are marked (a read-only key is refused first, and their unique queries are not memoized)', () => {
    const trading = t.gw.routes.filter((r) => r.trading).map((r) => r.path).sort();
    expect(trading).toEqual(['/OrderClose', '/OrderCloseBy', '/OrderDelete', '/OrderModify', '/OrderSend']);
  });
});

describe('a client that hangs up', () => {
  it('while its request waits on the broker: the late reply is dropped and the gateway serves on', async () => {
    const k = (await t.req('POST', '/v1/keys', { headers: mgmt(t.managementKey), body: { label: 'khang' } })).body.key;
    const id = (await t.req('POST', '/ConnectEx', { headers: { 'x-api-key': k }, body: { user: 'c-hang', password: 'pw', server: 'Sim-P5-Demo' } })).body.id;
    await t.gw.services.shards.call(id, 'account.fault', { accountId: id, fault: { kind: 'latency', latencyMs: 400 } });
    const sock = connect(t.gw.port, '127.0.0.1');
    await new Promise((r) => sock.once('connect', r));
    sock.write(`GET /AccountSummary?id=${id} HTTP/1.1\r\nhost: x\r\nx-api-key: ${k}\r\n\r\n`);
    await wait(100);
    sock.destroy();
    await wait(500); // the broker answers after the client left
    await t.gw.services.shards.call(id, 'account.fault', { accountId: id, fault: { kind: 'latency', latencyMs: 0 } });
    const r = await api(`/AccountSummary?id=${id}`, k);
    expect(r.status).toBe(200);
    expect(r.body.synced).toBe(true);
  }, 20_000);
});

describe('one account per broker login', () => {
  it('ConnectEx again with the same login answers the same account, without reconnecting it', async () => {
    const bind = (password = 'pw') => t.req('POST', '/ConnectEx', { headers: { 'x-api-key': key }, body: { user: 'once-login', password, server: 'Sim-P5-Demo' } });
    const first = await bind();
    expect(first.status).toBe(200);
    const st = await t.gw.services.shards.call(first.body.id, 'account.status', { accountId: first.body.id });
    const again = await bind();
    expect(again.body.id).toBe(first.body.id);
    // Same connection generation: nothing was replaced.
    expect((await t.gw.services.shards.call(first.body.id, 'account.status', { accountId: first.body.id })).generation).toBe(st.generation);
    const wrong = await bind('not-the-password');
    expect(wrong.status).toBe(400);
    expect(wrong.body.error).toBe('BROKER_AUTH_FAILED');
    expect(wrong.text).not.toContain('not-the-password');
  });

  it('re-binding an account to its own login with a wrong password answers 400 and leaves the working binding alone', async () => {
    const h = { 'x-api-key': key };
    const first = await t.req('POST', '/ConnectEx', { headers: h, body: { user: 'rebind-login', password: 'right-pw', server: 'Sim-P4-Demo' } });
    expect(first.status).toBe(200);
    const id = first.body.id as string;
    const gen = (await t.gw.services.shards.call(id, 'account.status', { accountId: id })).generation;
    const wrong = await t.req('POST', '/ConnectEx', { headers: h, body: { id, user: 'rebind-login', password: 'typo-pw', server: 'Sim-P4-Demo' } });
    expect(wrong.status).toBe(400);
    expect(wrong.body.error).toBe('BROKER_AUTH_FAILED');
    // Still connected with the stored password (it was replaced by the refused one, so every
    // request answered 503 'the broker refused the stored login', also after a restart).
    expect((await api(`/AccountSummary?id=${id}`)).status).toBe(200);
    expect((await api(`/CheckConnect?id=${id}`)).body).toMatchObject({ connected: true });
    expect((await t.gw.services.shards.call(id, 'account.status', { accountId: id })).generation).toBe(gen);
    const right = await t.req('POST', '/ConnectEx', { headers: h, body: { id, user: 'rebind-login', password: 'right-pw', server: 'Sim-P4-Demo', build: 1400 } });
    expect(right.status).toBe(200);
    expect((await api(`/CheckConnect?id=${id}`)).body).toMatchObject({ connected: true, build: 1400 });
  });

  it('concurrent binds of one new login create one account', async () => {
    const rs = await Promise.all([1, 2, 3].map(() =>
      t.req('POST', '/ConnectEx', { headers: { 'x-api-key': key }, body: { user: 'race-login', password: 'pw', server: 'Sim-P5-Demo' } })));
    expect(new Set(rs.map((r) => r.body.id)).size).toBe(1);
  });

  it('a login bound to an account of another customer answers 409; so does re-binding another account to it', async () => {
    const other = (await import('../../src/auth/bootstrap.js')).createCustomer(t.gw.services.tenancy, 'login-thief');
    const k = (await t.req('POST', '/v1/keys', { headers: mgmt(other.managementKey), body: { label: 'x' } })).body.key;
    const r = await t.req('POST', '/ConnectEx', { headers: { 'x-api-key': k }, body: { user: 'c-p5', password: 'pw5', server: 'Sim-P5-Demo' } });
    expect(r.status).toBe(409);
    expect(r.body.error).toBe('BROKER_LOGIN_IN_USE');
    const mine = await t.req('POST', '/ConnectEx', { headers: { 'x-api-key': key }, body: { user: 'spare-login', password: 'pw', server: 'Sim-P5-Demo' } });
    const rebind = await t.req('POST', '/ConnectEx', { headers: { 'x-api-key': key }, body: { id: mine.body.id, user: 'c-p5', password: 'pw5', server: 'Sim-P5-Demo' } });
    expect(rebind.status).toBe(409);
  });
});

describe('rolling upgrade of every account', () => {
  it('replaces the accounts one at a time, each with the new build, and skips seats without a broker login', async () => {
    const other = (await import('../../src/auth/bootstrap.js')).createCustomer(t.gw.services.tenancy, 'fleet');
    const k = (await t.req('POST', '/v1/keys', { headers: mgmt(other.managementKey), body: { label: 'fleet' } })).body.key;
    const ids: string[] = [];
    for (const user of ['f-1', 'f-2', 'f-3']) {
      ids.push((await t.req('POST', '/ConnectEx', { headers: { 'x-api-key': k }, body: { user, password: 'pw', server: 'Sim-P5-Demo' } })).body.id);
    }
    await t.req('POST', '/v1/seats', { headers: mgmt(other.managementKey), body: {} }); // no broker login
    const r = await t.req('POST', '/v1/accounts/upgrade', { headers: mgmt(other.managementKey), body: { build: 2_000 } });
    expect(r.status, r.text).toBe(200);
    expect(r.body.upgraded.map((u: { id: string }) => u.id).sort()).toEqual([...ids].sort());
    for (const u of r.body.upgraded) expect(u).toMatchObject({ build: 2_000, generation: 1, connection: 'connected' });
    // Every account now runs the older build: an endpoint newer than it answers 501.
    for (const id of ids) expect((await api(`/TickValueWithSize?id=${id}&symbols=EURUSD`, k)).status).toBe(501);
  }, 30_000);
});
