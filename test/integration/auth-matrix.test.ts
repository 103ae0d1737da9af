// Who may do what (SPEC §5, §7): every route of /openapi.json, plus /v1/stream, /ws and /dashboard,
// against every kind of credential an attacker may hold. One gateway for the file.
//
// Customer A (the operator, GATEWAY_MANAGEMENT_KEY): accounts A1 and A2 (P5), A4 (P4), A3 (a spare
// for upgrades and faults); keys: full, read-only, scoped to A1, one revoked, one replaced.
// Customer B (createCustomer): account B1, its management key and a full API key.
// Each probe addresses A's accounts (A2 unless said): the scoped key is scoped to A1, so `scoped`
// is "seat A1's key on seat A2's account" and `scopedOwn` the same key on its own account A1.
//
// A route added to the gateway without a row here fails 'every documented route has a row'.
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCustomer } from '../../src/auth/bootstrap.js';
import { generateKey } from '../../src/auth/keys.js';
import { createLogger } from '../../src/log.js';
import { mgmt, startTestGateway, type TestGateway, type TestResponse } from '../helpers/gateway.js';

const CREDS = ['none', 'garbled', 'unknown', 'revoked', 'replaced', 'mgmt', 'otherMgmt', 'otherApi', 'scoped', 'ro', 'scopedOwn', 'api'] as const;
type Cred = (typeof CREDS)[number];
const PASSWORD = 'secret-pw-auth-matrix';
const WRONG_PASSWORD = 'not-the-password';

let t: TestGateway;
const logs: string[] = [];
const key: Partial<Record<Cred, string>> = {};
const acct = { A1: '', A2: '', A3: '', A4: '', B1: '' };
const login = { A1: '', A2: '', A4: '' };
const handle = { A1: '', A2: '', A4: '', B1: '' };
let ipSeq = 0;
/** Each request from its own client address: the matrix's 401s must not trip the failed-auth block. */
const nextIp = () => `203.0.113.${(ipSeq++ % 250) + 1}`;
let loginSeq = 90_000 + Math.floor(Math.random() * 5_000);

async function brokerAccount(platform: 'P4' | 'P5', mkey: string): Promise<{ id: string; user: string }> {
  const user = String(loginSeq++);
  const r = await t.req('POST', '/v1/broker-accounts', {
    headers: mgmt(mkey), body: { platform, user, password: PASSWORD, server: platform === 'P5' ? 'Sim-P5-Demo' : 'Sim-P4-Demo' },
  });
  expect(r.status, r.text).toBe(201);
  return { id: r.body.id, user };
}
async function seatKey(seat: string, opts: { readOnly?: boolean; accountScoped?: boolean } = {}, mkey = t.managementKey): Promise<{ id: string; key: string }> {
  const r = await t.req('POST', `/v1/seats/${seat}/keys`, { headers: mgmt(mkey), body: { label: 'matrix', ...opts } });
  expect(r.status, r.text).toBe(201);
  return { id: r.body.id, key: r.body.key };
}
async function connect(id: string, mkey = t.managementKey): Promise<string> {
  const r = await t.req('POST', '/v1/connect', { headers: mgmt(mkey), body: { brokerAccountId: id } });
  expect(r.status, r.text).toBe(200);
  return r.body.handle;
}

/** The shard threads log on their own (to the process's stdout, LOG_LEVEL from the settings): kept too. */
const stdoutWrite = process.stdout.write.bind(process.stdout);
beforeAll(async () => {
  process.stdout.write = ((chunk: string | Uint8Array, ...rest: unknown[]) => {
    logs.push(String(chunk));
    return (stdoutWrite as (...a: unknown[]) => boolean)(chunk, ...rest);
  }) as typeof process.stdout.write;
  t = await startTestGateway({ trustProxy: true, logLevel: 'debug' }, { log: createLogger('debug', {}, (l) => logs.push(l)) });
  for (const [name, platform] of [['A1', 'P5'], ['A2', 'P5'], ['A4', 'P4']] as const) {
    const a = await brokerAccount(platform, t.managementKey);
    acct[name] = a.id;
    login[name] = a.user;
  }
  acct.A3 = (await brokerAccount('P5', t.managementKey)).id;
  key.mgmt = t.managementKey;
  key.api = (await seatKey(acct.A1)).key;
  key.ro = (await seatKey(acct.A1, { readOnly: true })).key;
  key.scoped = key.scopedOwn = (await seatKey(acct.A1, { accountScoped: true })).key;
  const revoked = await seatKey(acct.A1);
  expect((await t.req('DELETE', `/v1/keys/${revoked.id}`, { headers: mgmt(t.managementKey) })).status).toBe(200);
  key.revoked = revoked.key;
  const replaced = await seatKey(acct.A1);
  expect((await t.req('POST', `/v1/keys/${replaced.id}/replace`, { headers: mgmt(t.managementKey), body: {} })).status).toBe(201);
  key.replaced = replaced.key;
  key.garbled = 'not-a-key';
  key.unknown = generateKey('api').value;
  const b = createCustomer(t.gw.services.tenancy, 'matrix-b');
  key.otherMgmt = b.managementKey;
  acct.B1 = (await brokerAccount('P5', b.managementKey)).id;
  key.otherApi = (await seatKey(acct.B1, {}, b.managementKey)).key;
  handle.A1 = await connect(acct.A1);
  handle.A2 = await connect(acct.A2);
  handle.A4 = await connect(acct.A4);
  handle.B1 = await connect(acct.B1, b.managementKey);
}, 60_000);
afterAll(async () => {
  await t?.stop();
  process.stdout.write = stdoutWrite;
});

/** Every secret of the file: no response (but the one that creates it) and no log line may carry one. */
const secrets = () => [...new Set(Object.values(key))].filter((k) => k !== 'not-a-key').concat(Object.values(handle), [PASSWORD]);
/** What the log must not carry either: the wrong password B tried on A's login. */
const logSecrets = () => [...secrets(), WRONG_PASSWORD];

type Auth = 'management' | 'api' | 'connection' | 'none';
interface Probe { method: string; path: string; body?: unknown }
interface Row {
  /** The OpenAPI operation (method and path template) the row covers. */
  route: string;
  auth: Auth;
  /** The request for a credential (async: some make a fresh seat or key first). */
  probe: (c: Cred) => Probe | Promise<Probe>;
  expect: Record<Cred, number>;
  /** Responses that may carry a handle (POST /v1/connect answers one). */
  showsHandle?: boolean;
}

/** The header a credential travels in: a management route gets it as Bearer, any other as x-api-key
 *  (a management key there is the attacker trying it where SPEC §5.8 says it is not valid). */
function headersFor(c: Cred, auth: Auth): Record<string, string> {
  const h: Record<string, string> = { 'x-forwarded-for': nextIp() };
  const v = key[c];
  if (c === 'none' || v === undefined) return h;
  const isMgmt = c === 'mgmt' || c === 'otherMgmt';
  if (auth === 'management' || (auth === 'connection' && isMgmt)) h.authorization = `Bearer ${v}`;
  else h['x-api-key'] = v;
  return h;
}

const U = 401;
/** Statuses by credential, from a base: anything not named answers 401. */
const only = (m: Partial<Record<Cred, number>>): Record<Cred, number> =>
  Object.fromEntries(CREDS.map((c) => [c, m[c] ?? U])) as Record<Cred, number>;
/** A management route over customer A's resource: A's key `ok`, B's key `other` (404: not disclosed). */
const mgmtRow = (ok: number, other = 404) => only({ mgmt: ok, otherMgmt: other });
/** A route that reads account A2: any of A's API keys but the one scoped to A1; B's key 404. */
const readRow = (ok = 200, own = ok) => only({ api: ok, ro: ok, scoped: 403, scopedOwn: own, otherApi: 404 });
/** A trading call on A2: the read-only key 403 whatever else (SPEC §5.5). */
const tradeRow = (ok: number, own = ok) => only({ api: ok, ro: 403, scoped: 403, scopedOwn: own, otherApi: 404 });
const everyone = (s: number) => Object.fromEntries(CREDS.map((c) => [c, s])) as Record<Cred, number>;
/** A's account for the credential: the scoped key's own account for scopedOwn, A2 otherwise. */
const A = (c: Cred) => (c === 'scopedOwn' ? acct.A1 : acct.A2);
const H = (c: Cred, p4 = false) => (c === 'scopedOwn' ? handle.A1 : p4 ? handle.A4 : handle.A2);

// BTCUSD trades around the clock in the simulator: the order's answer does not depend on the hour.
const order = 'symbol=BTCUSD&operation=Buy&volume=0.01';
const classicRead: Array<[string, string]> = [
  ['Account', ''], ['AccountSummary', ''], ['AccountDetails', ''], ['IsInvestor', ''], ['OpenedOrders', ''], ['OpenedOrdersTickets', ''],
  ['ClosedOrders', ''], ['Symbols', ''], ['SymbolList', ''], ['ServerTimezone', ''], ['ServerTimezoneInfo', ''], ['Mails', ''],
  ['GetQuoteMany', '&symbols=EURUSD'], ['MarketWatchMany', '&symbols=EURUSD'], ['IsTradeSessionMany', '&symbols=EURUSD'],
  ['IsQuoteSessionMany', '&symbols=EURUSD'], ['GetTickValueMany', '&symbols=EURUSD'], ['TickValueWithSize', '&symbols=EURUSD'],
  ['SymbolParamsMany', '&symbols=EURUSD'], ['SymbolParams', '&symbol=EURUSD'], ['SymbolSessions', '&symbol=EURUSD'],
  ['IsTradeSession', '&symbol=EURUSD'], ['IsQuoteSession', '&symbol=EURUSD'], ['RequiredMargin', '&symbol=EURUSD&lots=0.01'],
  ['OrderHistory', ''], ['BalanceHistory', ''], ['GetQuote', '&symbol=EURUSD'], ['CheckConnect', ''], ['Ping', ''],
];
const classicOpenedOrder: Row = { route: 'GET /OpenedOrder', auth: 'api', probe: (c) => ({ method: 'GET', path: `/OpenedOrder?id=${A(c)}&ticket=999999` }), expect: readRow(400) };
const classicTrade: Array<[string, string, number]> = [
  ['OrderSend', order, 200], ['OrderModify', '&ticket=999999&stoploss=0&takeprofit=0', 400], ['OrderClose', '&ticket=999999', 400],
  ['OrderDelete', '&ticket=999999', 400], ['OrderCloseBy', '&ticket=999999&byTicket=999998', 400],
];

const now = Date.now();
const st = (ms: number) => new Date(ms).toISOString().slice(0, 19);
/** Gateway operations on A2's session (P5), or A4's for the P4-only ones. */
/** `unsubscribe`: ends subscriptions of the session, which every key of the customer shares: the
 *  read-only key 403 as on Disconnect (it may Subscribe: SPEC §2 "data and streaming"). */
const proxyOps: Array<{ op: string; q: string; kind: 'read' | 'trade' | 'p4read' | 'p4trade' | 'session' | 'unsubscribe'; ok?: number; own?: number }> = [
  { op: 'CheckConnect', q: '', kind: 'session' }, { op: 'ConnectionStatus', q: '', kind: 'session' },
  { op: 'Account', q: '', kind: 'read' }, { op: 'AccountSummary', q: '', kind: 'read' }, { op: 'AccountDetails', q: '', kind: 'read' },
  { op: 'SymbolList', q: '', kind: 'read' }, { op: 'Symbols', q: '', kind: 'read' }, { op: 'SymbolParams', q: '&symbol=EURUSD', kind: 'read' },
  { op: 'SymbolParamsMany', q: '&symbols=EURUSD', kind: 'read' }, { op: 'GetQuote', q: '&symbol=EURUSD', kind: 'read' },
  { op: 'Quote', q: '&symbol=EURUSD', kind: 'p4read' }, { op: 'GetQuoteMany', q: '&symbols=EURUSD', kind: 'read' },
  { op: 'MarketWatchMany', q: '&symbols=EURUSD', kind: 'read' }, { op: 'OpenedOrders', q: '', kind: 'read' },
  { op: 'OpenedOrder', q: '&ticket=999999', kind: 'read', ok: 400 }, { op: 'OpenedOrdersTickets', q: '', kind: 'read' },
  { op: 'ClosedOrders', q: '', kind: 'read' }, { op: 'OrderHistory', q: `&from=${st(now - 86_400_000)}&to=${st(now + 86_400_000)}`, kind: 'read' },
  { op: 'RequiredMargin', q: '&symbol=EURUSD&lots=0.01', kind: 'read' },
  { op: 'OrderSendSafe', q: '&symbol=BTCUSD&operation=0&volume=0.01', kind: 'trade' },
  { op: 'OrderSend', q: '&symbol=BTCUSD&operation=Buy&volume=0.01', kind: 'p4trade' },
  { op: 'OrderModifySafe', q: '&ticket=999999&stoploss=0&takeprofit=0', kind: 'trade', ok: 400 },
  { op: 'OrderModify', q: '&ticket=999999&stoploss=0&takeprofit=0', kind: 'p4trade', ok: 400 },
  { op: 'OrderCloseSafe', q: '&ticket=999999', kind: 'trade', ok: 400 }, { op: 'OrderClose', q: '&ticket=999999', kind: 'p4trade', ok: 400 },
  { op: 'OrderDelete', q: '&ticket=999999', kind: 'p4trade', ok: 400 },
  { op: 'PriceHistory', q: `&symbol=EURUSD&from=${st(now - 3_600_000)}&to=${st(now)}&timeFrame=1`, kind: 'read' },
  { op: 'PriceHistoryV2', q: `&symbol=EURUSD&from=${st(now - 3_600_000)}&to=${st(now)}&timeFrame=1`, kind: 'read' },
  { op: 'QuoteHistory', q: `&symbol=EURUSD&timeframe=M1&from=${st(now)}&count=5`, kind: 'p4read' },
  { op: 'EquityHistory', q: `&from=${st(now - 86_400_000)}`, kind: 'read' },
  { op: 'Subscribe', q: '&symbol=EURUSD', kind: 'read' }, { op: 'SubscribeMany', q: '&symbols=EURUSD', kind: 'read' },
  { op: 'UnSubscribe', q: '&symbol=EURUSD', kind: 'unsubscribe' }, { op: 'UnSubscribeMany', q: '&symbols=EURUSD', kind: 'unsubscribe' },
  { op: 'SubscribeOhlc', q: '&symbol=EURUSD&timeframe=1', kind: 'read' }, { op: 'UnsubscribeOhlc', q: '&symbol=EURUSD', kind: 'unsubscribe' },
  { op: 'SubscribeOrderBook', q: '&symbols=EURUSD', kind: 'read' }, { op: 'UnsubscribeOrderBook', q: '&symbols=EURUSD', kind: 'unsubscribe' },
  { op: 'SubscribedSymbols', q: '', kind: 'read' },
];

function proxyRow(p: (typeof proxyOps)[number]): Row {
  const p4 = p.kind.startsWith('p4');
  const trade = p.kind.endsWith('trade');
  const ok = p.ok ?? 200;
  // scopedOwn runs the P4-only operations on its own P5 session: 404 OPERATION_NOT_ON_PLATFORM.
  const own = p.own ?? (p4 ? 404 : ok);
  return {
    route: `GET /v1/proxy/${p.op}`, auth: 'api',
    probe: (c) => ({ method: 'GET', path: `/v1/proxy/${p.op}?handle=${encodeURIComponent(H(c, p4))}${p.q}` }),
    expect: trade || p.kind === 'unsubscribe' ? tradeRow(ok, own) : readRow(ok, own),
  };
}

const freshSeat = async () => (await t.req('POST', '/v1/seats', { headers: mgmt(t.managementKey), body: {} })).body.id as string;
const freshKey = async () => (await seatKey(acct.A1)).id;
const rebind = (c: Cred) => {
  const own = c === 'scopedOwn';
  return `id=${own ? acct.A1 : acct.A2}&user=${own ? login.A1 : login.A2}&password=${PASSWORD}&server=Sim-P5-Demo&platform=P5`;
};
const connectionRow = (ok: number, m: Partial<Record<Cred, number>> = {}) => only({ mgmt: ok, otherMgmt: 404, api: ok, ro: ok, scoped: 403, scopedOwn: ok, otherApi: 404, ...m });

const ROWS: Row[] = [
  // Operations: open to anyone, whatever key is sent.
  { route: 'GET /healthz', auth: 'none', probe: () => ({ method: 'GET', path: '/healthz' }), expect: everyone(200) },
  { route: 'GET /readyz', auth: 'none', probe: () => ({ method: 'GET', path: '/readyz' }), expect: everyone(200) },
  { route: 'GET /metrics', auth: 'none', probe: () => ({ method: 'GET', path: '/metrics' }), expect: everyone(200) },
  { route: 'GET /openapi.json', auth: 'none', probe: () => ({ method: 'GET', path: '/openapi.json' }), expect: everyone(200) },
  { route: 'GET /v1/proxy/{operation}', auth: 'none', probe: () => ({ method: 'GET', path: '/v1/proxy/NoSuchOperation' }), expect: everyone(404) },
  { route: 'GET /v1/stream', auth: 'none', probe: () => ({ method: 'GET', path: '/v1/stream' }), expect: everyone(400) },
  { route: 'GET /ws', auth: 'none', probe: () => ({ method: 'GET', path: '/ws' }), expect: everyone(400) },
  // Management (SPEC §5.7-5.8): management keys only, each over its own customer.
  { route: 'POST /v1/seats', auth: 'management', probe: () => ({ method: 'POST', path: '/v1/seats', body: {} }), expect: mgmtRow(201, 201) },
  { route: 'GET /v1/seats', auth: 'management', probe: () => ({ method: 'GET', path: '/v1/seats' }), expect: mgmtRow(200, 200) },
  { route: 'GET /v1/seats/{id}', auth: 'management', probe: () => ({ method: 'GET', path: `/v1/seats/${acct.A2}` }), expect: mgmtRow(200) },
  { route: 'POST /v1/seats/{id}/keys', auth: 'management', probe: () => ({ method: 'POST', path: `/v1/seats/${acct.A2}/keys`, body: { label: 'x' } }), expect: mgmtRow(201) },
  { route: 'GET /v1/seats/{id}/keys', auth: 'management', probe: () => ({ method: 'GET', path: `/v1/seats/${acct.A1}/keys` }), expect: mgmtRow(200) },
  { route: 'POST /v1/keys', auth: 'management', probe: () => ({ method: 'POST', path: '/v1/keys', body: { label: 'x' } }), expect: mgmtRow(201, 201) },
  { route: 'GET /v1/keys', auth: 'management', probe: () => ({ method: 'GET', path: `/v1/keys?kind=all&seatId=${acct.A1}` }), expect: mgmtRow(200, 200) },
  { route: 'DELETE /v1/keys/{keyId}', auth: 'management', probe: async () => ({ method: 'DELETE', path: `/v1/keys/${await freshKey()}` }), expect: mgmtRow(200) },
  { route: 'POST /v1/keys/{keyId}/replace', auth: 'management', probe: async () => ({ method: 'POST', path: `/v1/keys/${await freshKey()}/replace`, body: {} }), expect: mgmtRow(201) },
  { route: 'PUT /v1/keys/{keyId}/limits', auth: 'management', probe: async () => ({ method: 'PUT', path: `/v1/keys/${await freshKey()}/limits`, body: { requestsPerSec: 100, ordersPerSec: 10 } }), expect: mgmtRow(200) },
  { route: 'GET /v1/audit', auth: 'management', probe: () => ({ method: 'GET', path: '/v1/audit' }), expect: mgmtRow(200, 200) },
  { route: 'DELETE /v1/seats/{id}', auth: 'management', probe: async () => ({ method: 'DELETE', path: `/v1/seats/${await freshSeat()}` }), expect: mgmtRow(200) },
  { route: 'POST /v1/accounts/{id}/upgrade', auth: 'management', probe: () => ({ method: 'POST', path: `/v1/accounts/${acct.A3}/upgrade`, body: {} }), expect: mgmtRow(200) },
  { route: 'POST /v1/accounts/{id}/faults', auth: 'management', probe: () => ({ method: 'POST', path: `/v1/accounts/${acct.A3}/faults`, body: { kind: 'latency', latencyMs: 1, durationMs: 1 } }), expect: mgmtRow(201) },
  // The faults of an account's login: its customer's management key, or its API keys (scoped: its own
  // account only); clearing them needs a key that may trade.
  { route: 'GET /v1/accounts/{id}/faults', auth: 'connection', probe: (c) => ({ method: 'GET', path: `/v1/accounts/${A(c)}/faults` }), expect: connectionRow(200) },
  { route: 'DELETE /v1/accounts/{id}/faults', auth: 'connection', probe: (c) => ({ method: 'DELETE', path: `/v1/accounts/${A(c)}/faults?faultId=999999` }), expect: connectionRow(200, { ro: 403 }) },
  // Server-wide faults and the gateway's status: the operator (customer A) only.
  { route: 'POST /v1/sim/faults', auth: 'management', probe: () => ({ method: 'POST', path: '/v1/sim/faults', body: { server: 'Matrix-None', kind: 'latency', latencyMs: 1, durationMs: 1 } }), expect: mgmtRow(201, 403) },
  { route: 'GET /v1/sim/faults', auth: 'management', probe: () => ({ method: 'GET', path: '/v1/sim/faults' }), expect: mgmtRow(200, 403) },
  { route: 'DELETE /v1/sim/faults', auth: 'management', probe: () => ({ method: 'DELETE', path: '/v1/sim/faults?server=Matrix-None' }), expect: mgmtRow(200, 403) },
  { route: 'GET /v1/status', auth: 'management', probe: () => ({ method: 'GET', path: '/v1/status' }), expect: mgmtRow(200, 403) },
  { route: 'GET /v1/accounts/connections', auth: 'management', probe: () => ({ method: 'GET', path: '/v1/accounts/connections' }), expect: mgmtRow(200, 200) },
  // API keys only.
  { route: 'GET /v1/whoami', auth: 'api', probe: () => ({ method: 'GET', path: '/v1/whoami' }), expect: only({ api: 200, ro: 200, scoped: 200, scopedOwn: 200, otherApi: 200 }) },
  // Connection routes (SPEC §5.2, §5.8): management keys and API keys.
  { route: 'GET /news', auth: 'connection', probe: () => ({ method: 'GET', path: '/news' }), expect: only({ mgmt: 200, otherMgmt: 200, api: 200, ro: 200, scoped: 200, scopedOwn: 200, otherApi: 200 }) },
  {
    route: 'POST /v1/broker-accounts', auth: 'connection',
    probe: (c) => ({ method: 'POST', path: '/v1/broker-accounts', body: { platform: 'P5', user: c === 'scopedOwn' ? login.A1 : login.A2, password: PASSWORD, server: 'Sim-P5-Demo' } }),
    // A's login answers A's own account (200); another customer cannot take it (409). Read-only
    // and scoped keys bind nothing (403).
    expect: only({ mgmt: 200, otherMgmt: 409, api: 200, ro: 403, scoped: 403, scopedOwn: 403, otherApi: 409 }),
  },
  { route: 'POST /v1/connect', auth: 'connection', probe: (c) => ({ method: 'POST', path: '/v1/connect', body: { brokerAccountId: A(c) } }), expect: connectionRow(200), showsHandle: true },
  ...(['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const).map((m): Row => ({
    route: `${m} /ConnectEx`, auth: 'connection',
    probe: (c) => (m === 'GET'
      ? { method: 'GET', path: `/ConnectEx?${rebind(c)}` }
      : { method: m, path: '/ConnectEx', body: Object.fromEntries(new URLSearchParams(rebind(c))) }),
    // Re-binding A's account to its own login: read-only keys bind nothing.
    expect: connectionRow(200, { ro: 403 }),
  })),
  { route: 'POST /v1/accounts/upgrade', auth: 'management', probe: () => ({ method: 'POST', path: '/v1/accounts/upgrade', body: {} }), expect: mgmtRow(200, 200) },
  // Classic routes (SPEC §5.1, §5.4-5.6): x-api-key only.
  ...classicRead.map(([op, q]): Row => ({
    route: `GET /${op}`, auth: 'api', probe: (c) => ({ method: 'GET', path: `/${op}?id=${A(c)}${q}` }),
    expect: readRow(),
  })),
  classicOpenedOrder,
  ...classicTrade.map(([op, q, ok]): Row => ({
    route: `GET /${op}`, auth: 'api',
    probe: (c) => ({ method: 'GET', path: `/${op}?id=${A(c)}${op === 'OrderSend' ? '&' : ''}${q}` }),
    expect: tradeRow(ok),
  })),
  // Gateway sessions (SPEC §4.4-4.5, §5.9): the handle's account, as the classic id.
  ...proxyOps.map(proxyRow),
  { route: 'GET /v1/proxy/Ping', auth: 'api', probe: () => ({ method: 'GET', path: '/v1/proxy/Ping' }), expect: only({ api: 200, ro: 200, scoped: 200, scopedOwn: 200, otherApi: 200 }) },
  // Last: it ends the sessions of A1 (scopedOwn) and A2 (api). A read-only key must not (it is
  // shared with the keys that trade).
  // Last of all: customer B's (generated) key is rotated; A's comes from GATEWAY_MANAGEMENT_KEY (403).
  { route: 'POST /v1/management-key/rotate', auth: 'management', probe: () => ({ method: 'POST', path: '/v1/management-key/rotate', body: {} }), expect: mgmtRow(403, 201) },
  { route: 'GET /v1/proxy/Disconnect', auth: 'api', probe: (c) => ({ method: 'GET', path: `/v1/proxy/Disconnect?handle=${encodeURIComponent(H(c))}` }), expect: only({ api: 200, ro: 403, scoped: 403, scopedOwn: 200, otherApi: 404 }) },
];

async function send(row: Row, c: Cred): Promise<TestResponse> {
  const p = await row.probe(c);
  return t.req(p.method, p.path, { headers: headersFor(c, row.auth), ...(p.body !== undefined ? { body: p.body } : {}) });
}

describe('auth matrix: every route against every credential (SPEC §5, §7)', () => {
  it('every documented route has a row', async () => {
    const doc = await t.req('GET', '/openapi.json');
    const documented = Object.entries(doc.body.paths as Record<string, Record<string, unknown>>)
      .flatMap(([p, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${p}`));
    const covered = new Set(ROWS.map((r) => r.route));
    expect(documented.filter((r) => !covered.has(r))).toEqual([]);
  });

  /** A WebSocket upgrade's outcome: 101, or the status of the refusal. */
  const upgrade = (path: string, c: Cred, viaQuery: boolean) => new Promise<number>((resolve, reject) => {
    const v = key[c];
    const q = viaQuery && v !== undefined && c !== 'none' ? `&apiKey=${encodeURIComponent(v)}` : '';
    const headers: Record<string, string> = { 'x-forwarded-for': nextIp() };
    if (!viaQuery && v !== undefined && c !== 'none') headers['x-api-key'] = v;
    const ws = new WebSocket(`${t.url.replace('http', 'ws')}${path}${q}`, { headers });
    ws.once('open', () => {
      ws.close();
      resolve(101);
    });
    ws.once('unexpected-response', (_req, res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    ws.once('error', reject);
  });
  const sockets = only({ api: 101, ro: 101, scoped: 403, scopedOwn: 101, otherApi: 404 });

  it('/v1/stream (key as ?apiKey= and as x-api-key) and /ws: the same rights as the routes', async () => {
    const wrong: string[] = [];
    for (const c of CREDS) {
      for (const viaQuery of [true, false]) {
        const s = await upgrade(`/v1/stream?id=${A(c)}&heartbeat=0`, c, viaQuery);
        if (s !== sockets[c]) wrong.push(`/v1/stream as ${c}${viaQuery ? ' (apiKey=)' : ''}: ${s} (expected ${sockets[c]})`);
        const w = await upgrade(`/ws?handle=${encodeURIComponent(H(c))}`, c, viaQuery);
        if (w !== sockets[c]) wrong.push(`/ws as ${c}${viaQuery ? ' (apiKey=)' : ''}: ${w} (expected ${sockets[c]})`);
      }
    }
    // Customer A's full key on customer B's account and session: as unknown as a made-up one.
    expect(await upgrade(`/v1/stream?id=${acct.B1}`, 'api', true)).toBe(404);
    expect(await upgrade(`/ws?handle=${encodeURIComponent(handle.B1)}`, 'api', true)).toBe(404);
    expect(wrong).toEqual([]);
  });

  it("another customer's handle or account id answers as an unknown one, wherever the id travels", async () => {
    const h = { 'x-api-key': key.api!, 'x-forwarded-for': nextIp() };
    expect((await t.req('GET', `/v1/proxy/AccountSummary?handle=${encodeURIComponent(handle.B1)}`, { headers: h })).status).toBe(404);
    expect((await t.req('GET', `/AccountSummary?id=${acct.B1}`, { headers: h })).status).toBe(404);
    expect((await t.req('GET', `/AccountSummary?accountId=${acct.B1}`, { headers: h })).status).toBe(404);
    expect((await t.req('POST', '/v1/connect', { headers: h, body: { brokerAccountId: acct.B1 } })).status).toBe(404);
    expect((await t.req('POST', '/ConnectEx', { headers: h, body: { id: acct.B1, user: login.A2, password: PASSWORD, server: 'Sim-P5-Demo', platform: 'P5' } })).status).toBe(404);
    // A's broker login with a wrong password: the broker's refusal (400), as for any login, not a
    // 409 that tells another customer the login is bound at this gateway.
    const wrongPw = { user: login.A2, password: WRONG_PASSWORD, server: 'Sim-P5-Demo', platform: 'P5' };
    const b = { 'x-api-key': key.otherApi!, 'x-forwarded-for': nextIp() };
    for (const [m, p, body] of [['POST', '/v1/broker-accounts', wrongPw], ['POST', '/ConnectEx', wrongPw]] as const) {
      const r = await t.req(m, p, { headers: b, body });
      expect([r.status, r.body.error], `${p}: ${r.text}`).toEqual([400, 'BROKER_AUTH_FAILED']);
    }
    const byQuery = await t.req('GET', `/ConnectEx?${new URLSearchParams(wrongPw)}`, { headers: b });
    expect([byQuery.status, byQuery.body.error]).toEqual([400, 'BROKER_AUTH_FAILED']);
    // The same through a re-bind of B's own account, and a new seat with B's management key.
    const rebindB = await t.req('POST', `/ConnectEx?id=${acct.B1}`, { headers: b, body: wrongPw });
    expect([rebindB.status, rebindB.body.error], rebindB.text).toEqual([400, 'BROKER_AUTH_FAILED']);
    const seatsBefore = (await t.req('GET', '/v1/seats', { headers: mgmt(key.otherMgmt!) })).body;
    const seatB = await t.req('POST', '/v1/seats', { headers: mgmt(key.otherMgmt!), body: { user: login.A2, password: WRONG_PASSWORD, server: 'Sim-P5-Demo' } });
    expect([seatB.status, seatB.body.error], seatB.text).toEqual([400, 'BROKER_AUTH_FAILED']);
    expect((await t.req('GET', '/v1/seats', { headers: mgmt(key.otherMgmt!) })).body).toEqual(seatsBefore);
    // With the right password B learns the login is bound (it holds the login): 409, nothing bound.
    const right = await t.req('POST', `/ConnectEx?id=${acct.B1}`, { headers: b, body: { ...wrongPw, password: PASSWORD } });
    expect([right.status, right.body.error]).toEqual([409, 'BROKER_LOGIN_IN_USE']);
    // The scoped key: the other account's id in the query alias and in a body.
    const s = { 'x-api-key': key.scoped!, 'x-forwarded-for': nextIp() };
    expect((await t.req('GET', `/AccountSummary?accountId=${acct.A2}`, { headers: s })).status).toBe(403);
    expect((await t.req('POST', '/ConnectEx', { headers: s, body: { accountId: acct.A2, user: login.A2, password: PASSWORD, server: 'Sim-P5-Demo', platform: 'P5' } })).status).toBe(403);
    // The other account's id in another spelling, or beside its own under the alias: never served.
    expect((await t.req('GET', `/AccountSummary?id=${acct.A2.toUpperCase()}`, { headers: s })).status).toBe(403);
    expect((await t.req('GET', `/AccountSummary?id=${acct.A1}&accountId=${acct.A2}`, { headers: s })).status).toBe(400);
    expect((await t.req('GET', `/AccountSummary?id=${acct.A1}&id=${acct.A2}`, { headers: s })).status).toBe(400);
    expect((await t.req('GET', `/OrderSend?id=${acct.A2.toUpperCase()}&${order}`, { headers: s })).status).toBe(403);
    // An id in the query and another in the body of /ConnectEx: refused, not the body's taken.
    expect((await t.req('POST', `/ConnectEx?id=${acct.A1}`, { headers: s, body: { id: acct.A2, user: login.A2, password: PASSWORD, server: 'Sim-P5-Demo', platform: 'P5' } })).status).toBe(400);
  });

  it('the keys scoped to a removed seat answer 401 from the next request (they were cached as verified)', async () => {
    const seat = (await brokerAccount('P5', t.managementKey)).id;
    const scoped = (await seatKey(seat, { accountScoped: true })).key;
    const unscoped = (await seatKey(seat)).key;
    const h = (k: string) => ({ headers: { 'x-api-key': k, 'x-forwarded-for': nextIp() } });
    expect((await t.req('GET', `/AccountSummary?id=${seat}`, h(scoped))).status).toBe(200);
    expect((await t.req('DELETE', `/v1/seats/${seat}`, { headers: mgmt(t.managementKey) })).status).toBe(200);
    expect((await t.req('GET', '/v1/whoami', h(scoped))).status).toBe(401);
    // An unscoped key made on that seat's page works for the customer's other accounts; the seat is gone.
    expect((await t.req('GET', `/AccountSummary?id=${seat}`, h(unscoped))).status).toBe(404);
    expect((await t.req('GET', `/AccountSummary?id=${acct.A3}`, h(unscoped))).status).toBe(200);
  });

  it('an account-scoped key is refused on connection routes in x-management-key as in Authorization: only x-api-key carries it (SPEC §5.2, §5.8)', async () => {
    const body = { brokerAccountId: acct.A1 };
    const as = (h: Record<string, string>) => t.req('POST', '/v1/connect', { headers: { ...h, 'x-forwarded-for': nextIp() }, body });
    expect((await as({ 'x-api-key': key.scoped! })).status).toBe(200);
    const wrong = [await as({ authorization: `Bearer ${key.scoped!}` }), await as({ 'x-management-key': key.scoped! })];
    expect(wrong.map((r) => [r.status, r.body.error])).toEqual([[403, 'ACCOUNT_SCOPE'], [403, 'ACCOUNT_SCOPE']]);
  });

  it("key listings show no secret and no hash of one", async () => {
    for (const p of ['/v1/keys?kind=all', `/v1/seats/${acct.A1}/keys`]) {
      const r = await t.req('GET', p, { headers: mgmt(t.managementKey) });
      expect(r.status).toBe(200);
      expect(r.body.keys.length).toBeGreaterThan(0);
      expect(r.text).not.toMatch(/[0-9a-f]{64}|"hash"|"secret"/);
      for (const s of secrets()) expect(r.text).not.toContain(s);
    }
  });

  it('a trading route reached with HEAD, or a gateway trade operation with POST, sends no order', async () => {
    const tickets = async () => (await t.req('GET', `/OpenedOrdersTickets?id=${acct.A3}`, { headers: { 'x-api-key': key.api! } })).text;
    const before = await tickets();
    const head = await fetch(`${t.url}/OrderSend?id=${acct.A3}&${order}`, { method: 'HEAD', headers: { 'x-api-key': key.api! } });
    expect(head.status).toBe(405);
    const post = await fetch(`${t.url}/OrderSend?id=${acct.A3}&${order}`, { method: 'POST', headers: { 'x-api-key': key.api! } });
    expect(post.status).toBe(405);
    const proxyPost = await fetch(`${t.url}/v1/proxy/OrderSendSafe?handle=${encodeURIComponent(handle.A2)}&symbol=BTCUSD&operation=0&volume=0.01`, { method: 'POST', headers: { 'x-api-key': key.api! } });
    expect(proxyPost.status).toBe(405);
    expect(await tickets()).toBe(before);
  });

  it("B's management key sees none of A's seats, keys, audit rows or connections", async () => {
    const h = mgmt(key.otherMgmt!);
    const texts = await Promise.all(['/v1/seats', '/v1/keys?kind=all', `/v1/keys?seatId=${acct.A1}`, '/v1/audit', '/v1/accounts/connections'].map((p) => t.req('GET', p, { headers: h })));
    for (const r of texts) {
      expect(r.status).toBe(200);
      for (const id of [acct.A1, acct.A2, acct.A3, acct.A4]) expect(r.text).not.toContain(id);
    }
  });

  // The rows in order, one test: later rows depend on earlier ones (Disconnect ends the sessions).
  it('each credential gets what SPEC says, and no response carries a secret it did not create', async () => {
    const wrong: string[] = [];
    for (const row of ROWS) {
      for (const c of CREDS) {
        const r = await send(row, c);
        if (r.status !== row.expect[c]) wrong.push(`${row.route} as ${c}: ${r.status} (expected ${row.expect[c]}) ${r.text.slice(0, 200)}`);
        // A response may show a key only when it made that key (it is then a new one, not in `secrets`).
        for (const s of secrets()) {
          if (row.showsHandle && Object.values(handle).includes(s)) continue;
          if (r.text.includes(s)) wrong.push(`${row.route} as ${c}: response echoes a secret`);
        }
      }
    }
    expect(wrong).toEqual([]);
  }, 120_000);

  it('a rotated management key (B rotated its own in the matrix) answers 401 wherever management keys go', async () => {
    const h = { authorization: `Bearer ${key.otherMgmt}`, 'x-forwarded-for': nextIp() };
    expect((await t.req('GET', '/v1/seats', { headers: h })).status).toBe(401);
    expect((await t.req('GET', '/news', { headers: h })).status).toBe(401);
    expect((await t.req('POST', '/v1/connect', { headers: h, body: { brokerAccountId: acct.B1 } })).status).toBe(401);
    expect((await t.req('GET', '/v1/seats', { headers: { 'x-management-key': key.otherMgmt!, 'x-forwarded-for': nextIp() } })).status).toBe(401);
  });

  it('what answers without a key (/metrics, /readyz, /healthz, /openapi.json, /dashboard) names no account, key or secret', async () => {
    const ids = [...Object.values(acct), ...secrets()];
    for (const p of ['/metrics', '/readyz', '/healthz', '/openapi.json', '/dashboard', '/dashboard/']) {
      const r = await fetch(t.url + p);
      const text = await r.text();
      expect(r.status, p).toBe(200);
      for (const id of ids) expect(text, p).not.toContain(id);
    }
  });

  it('no log line (LOG_LEVEL=debug) carries a key, a handle or a broker password', () => {
    expect(logs.length).toBeGreaterThan(100);
    expect(logs.some((l) => l.includes('"shard":0'))).toBe(true);
    const leaked = logs.filter((l) => logSecrets().some((s) => l.includes(s)));
    expect(leaked).toEqual([]);
  });
});
