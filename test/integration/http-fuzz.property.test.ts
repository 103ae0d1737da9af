// The whole HTTP surface under hostile input (developers' guide, "Bad input"; SPEC §7): fast-check
// builds requests over every route the gateway mounts (its own OpenAPI document lists them, with
// their parameters and bodies), with the route's method and with wrong ones, each parameter and body
// field omitted, valid, hostile (wrong type, NaN/Infinity/-0, huge, negative, unicode and control
// characters, overlong, duplicated) or foreign (another account's id, not a UUID). Property: an answer
// arrives (each request is aborted after REQUEST_BOUND_MS: no hang), every status >= 400 is a JSON
// `{error, message}` whose code maps to that status (src/errors.ts) and is never INTERNAL_ERROR, the
// response is one the OpenAPI document promises, no request without a valid credential succeeds,
// and no secret used (API key, management key, broker password) is ever in a body, a header or
// the gateway's log. The sockets too, once open (/v1/stream, /ws): protocol messages with hostile
// fields, any JSON, truncated JSON, text, binary frames, deep nesting, floods, a frame over the limit;
// each message is answered in order with a JSON frame (an ERROR of a known code, never
// INTERNAL_ERROR), and a frame over the limit ends only its own socket. Afterwards the gateway still
// answers /healthz, subscribes a new socket and takes a valid order.
import fc from 'fast-check';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_STATUS, type ErrorCode } from '../../src/errors.js';
import { CLIENT_MESSAGE_MAX_BYTES } from '../../src/stream/closeCodes.js';
import { createLogger } from '../../src/log.js';
import { mgmt, openApiOf, startTestGateway, TEST_MANAGEMENT_KEY, type TestGateway } from '../helpers/gateway.js';
import { BINARY_UNIT, hostileString, jsonHostile, NOT_UUID, NUMERIC_EDGE, RAW_ESCAPES, sometimes } from '../helpers/hostileValues.js';
import { checkResponse } from '../helpers/openapiCheck.js';
import { until } from '../helpers/until.js';

/** Long enough for any route's legitimate work on a loaded machine; a request still open then hangs. */
const REQUEST_BOUND_MS = 8_000;
const BROKER_PW = 'Br0ker-Pw-fuzz-7f3a9c';
const MAIN_LOGIN = 'fuzz-main';
/** Statuses SPEC §7 names, plus the HTTP layer's own (405 method, 408 body timeout, 413 too large,
 *  415 media type). 500 only as TERMINAL_ERROR (a broker connection's fault), never INTERNAL_ERROR. */
const ERROR_STATUSES = new Set([400, 401, 402, 403, 404, 405, 408, 409, 413, 415, 422, 429, 500, 501, 503]);

type Json = Record<string, any>;
interface Op { method: string; template: string; params: string[]; required: Set<string>; body: Json | undefined; secured: boolean; schemes: string[] }
interface Req { method: string; path: string; query: Array<[string, string]>; headers: Record<string, string>; body?: string; rawQuery?: string }

let t: TestGateway;
const logs: string[] = [];
let key = '';
let seat = '';
let victimSeat = '';
let victimKeyId = '';
let handle = '';
/** A session on the victim's P4 account: the P4 operations' handlers (OrderSend by name, QuoteHistory...). */
let handleP4 = '';
/** Tickets of the orders the run placed: trade operations on real tickets, not only on made-up ones. */
const tickets: string[] = [];
let ops: Op[] = [];
let doc: Json;

const secrets = () => [key, TEST_MANAGEMENT_KEY, BROKER_PW];

beforeAll(async () => {
  // authFailLimit high: the hostile credentials' 401s must not block the run's loopback address.
  // logLevel debug: the gateway then logs every request too (exchange.ts), which the log check reads.
  t = await startTestGateway({ authFailLimit: 1_000_000, seatBuildMs: 300, logLevel: 'debug' }, { log: createLogger('debug', {}, (l) => logs.push(l)) });
  const k = await t.req('POST', '/v1/keys', { headers: mgmt(t.managementKey), body: { label: 'fuzz' } });
  expect(k.status, k.text).toBe(201);
  key = k.body.key;
  const b = await t.req('POST', '/ConnectEx', { headers: { 'x-api-key': key }, body: { user: MAIN_LOGIN, password: BROKER_PW, server: 'Sim-P5-Demo' } });
  expect(b.status, b.text).toBe(200);
  seat = b.body.id;
  const v = await t.req('POST', '/v1/broker-accounts', { headers: mgmt(t.managementKey), body: { platform: 'P4', user: 'fuzz-victim', password: BROKER_PW, server: 'Sim-P4-Demo' } });
  expect(v.status, v.text).toBe(201);
  victimSeat = v.body.id;
  const vk = await t.req('POST', `/v1/seats/${victimSeat}/keys`, { headers: mgmt(t.managementKey), body: { label: 'victim' } });
  expect(vk.status, vk.text).toBe(201);
  victimKeyId = vk.body.id ?? vk.body.keyId;
  const c = await t.req('POST', '/v1/connect', { headers: mgmt(t.managementKey), body: { brokerAccountId: seat } });
  expect(c.status, c.text).toBe(200);
  handle = c.body.handle;
  const c4 = await t.req('POST', '/v1/connect', { headers: mgmt(t.managementKey), body: { brokerAccountId: victimSeat } });
  expect(c4.status, c4.text).toBe(200);
  handleP4 = c4.body.handle;
  // The document (and its checker's compiled validators) the request helper already built for this route table.
  doc = openApiOf(t.gw.routes) as Json;
  ops = operations(doc);
}, 30_000);

afterAll(async () => {
  await t?.stop();
});

/** Every operation of the document: its parameters (query) and its body's top-level fields. */
function operations(d: Json): Op[] {
  const out: Op[] = [];
  for (const [template, item] of Object.entries(d.paths as Record<string, Json>)) {
    for (const [method, op] of Object.entries(item)) {
      if (!['get', 'post', 'put', 'patch', 'delete'].includes(method)) continue;
      const query = ((op.parameters ?? []) as Json[]).filter((p) => p.in === 'query');
      const params = query.map((p) => p.name as string);
      const required = new Set(query.filter((p) => p.required === true).map((p) => p.name as string));
      let body = op.requestBody?.content?.['application/json']?.schema as Json | undefined;
      if (body?.$ref) body = d.components.schemas[String(body.$ref).split('/').pop()!];
      const security = (op.security ?? d.security ?? []) as Json[];
      out.push({ method: method.toUpperCase(), template, params, required, body, secured: security.length > 0, schemes: security.flatMap((x) => Object.keys(x)) });
    }
  }
  return out;
}

/** A value that could pass for the parameter, so requests also get past validation into the handlers. */
function plausible(name: string): fc.Arbitrary<string> {
  const ids = [seat, victimSeat, crypto.randomUUID()];
  // The first of each list is a value the route takes; the others are near misses.
  const table: Record<string, string[]> = {
    id: ids, accountId: ids, brokerAccountId: ids, handle: [handle, handleP4, handle, 'h-' + crypto.randomUUID(), TEST_MANAGEMENT_KEY],
    // (A key where a value belongs, as near misses go: never shown back nor logged.)
    symbol: ['EURUSD', 'BTCUSD', 'XAUUSD', 'NOPE', 'eurusd', key, TEST_MANAGEMENT_KEY], symbols: ['EURUSD,GBPUSD', 'EURUSD', ',,', 'BTCUSD,NOPE'],
    volume: ['0.01', '0.1', '1', '0', '-0.01', '100000'], lots: ['0.01', '1', '-1', '0'],
    operation: ['Buy', 'Sell', 'BuyLimit', 'SellStop', 'BuyStopLimit', '0', '1', '5', '7', '99'],
    type: ['Buy', 'Sell', '0'], ticket: [tickets.at(-1) ?? '1', ...tickets.slice(-3), '12345', '0', '-5'], byTicket: [tickets.at(-2) ?? '1', '1'],
    price: ['1.1', '0', '-1', '60000'], stoploss: ['0', '1.0', '-1'], takeprofit: ['0', '2.0'],
    from: ['2020-01-01T00:00:00', '2030-01-01T00:00:00', '2020-13-45T99:99:99', '2020-01-01'], to: ['2030-01-01T00:00:00', '1970-01-01T00:00:00'],
    timeframe: ['M1', 'H1', '1', '60', 'Y9'], timeFrame: ['1', '60', '0'],
    msNotOlder: ['0', '100', '-1'], count: ['1', '10', '0', '100000'], limit: ['1000', '1', '0'],
    country: ['US', 'EU', 'XX'], impact: ['high', 'low', 'none'],
    // Never the bound account's login: a DELETE /ConnectEx of it would end the run's account.
    user: ['fuzz-other', 'u'], password: [BROKER_PW], server: ['Sim-P5-Demo', 'Sim-P4-Demo', 'Nowhere'],
    platform: ['P5', 'P4', 'P6'], label: ['l', ''], region: ['us-east', ''],
  };
  if (name === 'clientOrderId') return fc.stringMatching(/^[A-Za-z0-9_.:-]{1,64}$/);
  const known = table[name];
  if (!known) return fc.constantFrom('1', 'true', 'EURUSD', 'x');
  return fc.oneof({ weight: 3, arbitrary: fc.constant(known[0]!) }, { weight: 2, arbitrary: fc.constantFrom(...known) });
}

/** A query parameter: omitted, plausible, hostile, or duplicated (plausible and hostile). A near-valid
 *  request has few hostile ones, so it gets past validation into the handler more often. */
function param(name: string, nearValid: boolean, required: boolean): fc.Arbitrary<Array<[string, string]>> {
  // An alias beside its parameter is a conflict whenever the values differ; and an optional
  // parameter is mostly left out of a near-valid request.
  const alias = name === 'accountId' || name === 'symbols' || name === 'lots';
  return fc.oneof(
    { weight: nearValid && (alias || !required) ? 40 : 2, arbitrary: fc.constant<Array<[string, string]>>([]) },
    { weight: nearValid ? 40 : 4, arbitrary: plausible(name).map((v) => [[name, v] as [string, string]]) },
    { weight: 3, arbitrary: hostileString.map((v) => [[name, v] as [string, string]]) },
    { weight: 1, arbitrary: fc.tuple(plausible(name), hostileString).map(([a, b]) => [[name, a], [name, b]] as Array<[string, string]>) },
  );
}

/** The body: the route's fields each plausible, hostile or missing; or JSON of the wrong shape; or not JSON. */
function bodyOf(o: Op): fc.Arbitrary<{ text: string; type: string | undefined } | undefined> {
  const fields = Object.keys((o.body?.properties as Json | undefined) ?? {});
  const field = (name: string) => fc.oneof(
    { weight: 3, arbitrary: plausible(name).map((v): unknown => (['readOnly', 'accountScoped', 'privateHosting'].includes(name) ? v === 'true' : v)) },
    { weight: 1, arbitrary: fc.constantFrom<unknown>(true, false) },
    { weight: 3, arbitrary: jsonHostile },
  );
  const shaped = fc.record(Object.fromEntries(fields.map((f) => [f, field(f)])), { requiredKeys: [] })
    .chain((r) => fc.option(fc.dictionary(fc.string({ maxLength: 8 }), jsonHostile, { maxKeys: 2 }), { nil: undefined }).map((extra) => ({ ...extra, ...r })))
    .map((v) => JSON.stringify(v));
  const text = fc.oneof(
    { weight: 5, arbitrary: shaped },
    { weight: 2, arbitrary: jsonHostile.map((v) => JSON.stringify(v) ?? 'null') },
    { weight: 2, arbitrary: fc.constantFrom('\ufeff{}', '{"label":"a","label":{"x":1}}', '{"privateHosting":1e999,"readOnly":-0,"label":1e400}', '{"brokerAccountId":null}', '[{"label":"a"}]', '"{}"', '', '{', '{"a":', '[1,', 'nul', '{"a":1}{"b":2}', "{'a':1}", '{"a":1,}', '\u0000', '{"__proto__":{"x":1}}', '{"a":' + '['.repeat(5_000) + ']'.repeat(5_000) + '}', '{"label":"' + 'y'.repeat(70_000) + '"}') },
    { weight: 1, arbitrary: fc.string({ unit: BINARY_UNIT, maxLength: 40 }) },
  );
  const type = fc.constantFrom<string | undefined>('application/json', 'application/json', 'application/json; charset=utf-8', undefined, 'text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/xml', 'application/json; charset=latin1', '');
  return fc.option(fc.record({ text, type }), { nil: undefined, freq: 5 });
}

/** The credential each security scheme of the document names. */
const SCHEME_AUTH: Record<string, [string, string]> = {
  apiKey: ['x-api-key', 'KEY'], apiKeyBearer: ['authorization', 'Bearer KEY'], managementBearer: ['authorization', 'Bearer MGMT'], managementHeader: ['x-management-key', 'MGMT'],
};

/** Who the request claims to be: mostly the route's own credential, so requests reach the handlers. */
const authFor = (o: Op) => fc.oneof(
  { weight: 3, arbitrary: o.schemes.length > 0 ? fc.constantFrom(...o.schemes.map((x) => SCHEME_AUTH[x]!)) : fc.constant([undefined, undefined]) },
  { weight: 1, arbitrary: hostileAuth },
);
const hostileAuth = fc.constantFrom<(string | undefined)[]>(
  ['x-api-key', 'KEY'], ['authorization', 'Bearer KEY'], ['authorization', 'Bearer MGMT'], ['x-management-key', 'MGMT'],
  ['x-api-key', 'MGMT'], [undefined, undefined], ['x-api-key', 'nope'], ['authorization', 'Bearer '], ['authorization', 'Basic Zm9vOmJhcg=='],
  ['x-api-key', ''], ['x-api-key', 'KEY KEY'], ['authorization', 'bearer KEY'],
);

function pathOf(template: string, destructive: boolean): fc.Arbitrary<string> {
  const segs = template.split('/');
  const idArb = fc.oneof(
    fc.constantFrom(...(destructive ? [victimSeat, victimKeyId] : [seat, victimSeat, victimKeyId])),
    fc.constant(crypto.randomUUID()),
    fc.constantFrom(...NOT_UUID, 'OrderSend', 'Nope', 'é', '%00', 'x'.repeat(600)),
    // A key pasted where its id belongs (DELETE /v1/keys/<the key>): never shown back nor logged.
    fc.constantFrom(key, TEST_MANAGEMENT_KEY),
  );
  const segment = fc.oneof({ weight: 6, arbitrary: idArb.map((v) => encodeURIComponent(v)) }, { weight: 1, arbitrary: fc.constantFrom(...RAW_ESCAPES) });
  return fc.tuple(...segs.map((s) => (/^\{.+\}$/.test(s) ? segment : fc.constant(s)))).map((p) => p.join('/'));
}

/** A request for one operation, with its method or (1 in 5) another. */
function requestFor(o: Op): fc.Arbitrary<Req> {
  const destructive = o.method === 'DELETE' || /replace|limits|rotate|upgrade|faults/.test(o.template);
  return fc.record({
    // The path's ids by the method sent: any DELETE (a GET turned DELETE too) never names the bound account.
    mp: fc.oneof({ weight: 4, arbitrary: fc.constant(o.method) }, { weight: 1, arbitrary: fc.constantFrom('GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS') })
      .chain((method) => pathOf(o.template, destructive || method === 'DELETE').map((path) => ({ method, path }))),
    query: fc.boolean().chain((nearValid) => fc.tuple(fc.tuple(...o.params.map((p) => param(p, nearValid, o.required.has(p) || ['id', 'handle', 'volume'].includes(p)))), sometimes(fc.tuple(fc.constantFrom('stopLoss', 'apiKey', 'x', '', 'id[]', '__proto__'), hostileString), 4))
      .map(([parts, extra]) => [...parts.flat(), ...(extra ? [extra] : [])])),
    auth: authFor(o),
    rawQuery: sometimes(fc.tuple(fc.constantFrom(...o.params, 'x'), fc.constantFrom(...RAW_ESCAPES)).map(([k, v]) => `${k}=${v}`), 6),
    // Other headers the gateway reads or echoes: a request id, a CORS origin, a forwarded address.
    other: sometimes(fc.tuple(fc.constantFrom('x-request-id', 'origin', 'x-forwarded-for', 'content-length', 'x-api-key'), hostileString), 4),
    idem: sometimes(fc.oneof(fc.stringMatching(/^[A-Za-z0-9_.:-]{1,64}$/), hostileString), 5),
    body: bodyOf(o),
  }).map(({ mp: { method, path }, query, auth: [h, v], rawQuery, other, idem, body }) => {
    const headers: Record<string, string> = {};
    // As a raw client would send them: UTF-8 bytes, no CR, LF or NUL (fetch refuses those).
    const asSent = (x: string) => Buffer.from(x.slice(0, 4_000), 'utf8').toString('latin1').replace(/[\0-\x08\x0a-\x1f\x7f]/g, '');
    // (content-length is fetch's own: a hostile one would only fail the client; framing is http-framing.test.ts's.)
    if (other && other[0] !== 'content-length') headers[other[0]] = asSent(other[1]);
    if (h) headers[h] = v!.replace('KEY', key).replace('MGMT', TEST_MANAGEMENT_KEY) + (other?.[0] === 'x-api-key' && h === 'x-api-key' ? `, ${asSent(other[1])}` : '');
    if (idem !== undefined) headers['idempotency-key'] = asSent(idem);
    if (body?.type !== undefined) headers['content-type'] = body.type;
    const r: Req = { method, path, query, headers, ...(rawQuery !== undefined ? { rawQuery } : {}) };
    if (body && method !== 'GET' && method !== 'HEAD') r.body = body.text;
    return r;
  });
}

/** Every operation, the trading and gateway ones weighted up: their handlers take the most input. */
const anyRequest = () => fc.oneof(...ops.map((o) => ({ weight: /Order|proxy|ConnectEx|connect|broker/.test(o.template) ? 3 : 1, arbitrary: requestFor(o) })));

// ---- the property ----

/** The run's seed, printed with a failure of the checks after it too (FUZZ_SEED=... to replay). */
const SEED = process.env.FUZZ_SEED ? Number(process.env.FUZZ_SEED) : (Math.random() * 2 ** 31) | 0;
let previous = '';
let orderSeq = 0;
let ordersTaken = 0;
const seen = new Map<string, number>();

async function send(r: Req): Promise<{ status: number; headers: Headers; text: string; url: string }> {
  const qs = r.query.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v.replace(/[\ud800-\udfff]/g, '\ufffd'))}`).join('&');
  const all = [qs, r.rawQuery].filter((x) => x).join('&');
  const url = r.path + (all ? `?${all}` : '');
  let res: Response;
  const before = previous;
  previous = `${r.method} ${url.slice(0, 200)} ${JSON.stringify(r.headers).slice(0, 200)} body ${String(r.body).slice(0, 100)}`;
  try {
    res = await fetch(t.url + url, { method: r.method, headers: r.headers, body: r.body, signal: AbortSignal.timeout(REQUEST_BOUND_MS) });
  } catch (err) {
    throw new Error(`${r.method} ${url.slice(0, 300)}: no answer (${(err as Error).name}: ${(err as Error).message}; cause ${String((err as Error).cause)}); the request before it: ${before}`);
  }
  const text = await res.text();
  return { status: res.status, headers: res.headers, text, url };
}

function secretIn(s: string): string | undefined {
  return secrets().find((x) => x !== '' && s.includes(x));
}

async function holds(r: Req): Promise<void> {
  const { status, headers, text, url } = await send(r);
  seen.set(`${status} ${status >= 400 ? (JSON.parse(text || '{}') as Json).error : ''}`, (seen.get(`${status} ${status >= 400 ? (JSON.parse(text || '{}') as Json).error : ''}`) ?? 0) + 1);
  const what = `${r.method} ${url.slice(0, 300)} (headers ${JSON.stringify(r.headers).slice(0, 200)}, body ${String(r.body).slice(0, 200)}) answered ${status}: ${text.slice(0, 300)}`;
  for (const [name, value] of headers) expect(secretIn(value), `a secret in response header ${name}: ${what}`).toBeUndefined();
  expect(secretIn(text), `a secret in the body: ${what}`).toBeUndefined();
  if (status >= 400 && r.method !== 'HEAD') {
    expect(headers.get('content-type'), what).toContain('application/json');
    let body: Json;
    try {
      body = JSON.parse(text);
    } catch {
      throw new Error(`not JSON: ${what}`);
    }
    expect(typeof body.error, what).toBe('string');
    expect(typeof body.message, what).toBe('string');
    expect(body.message.length, what).toBeGreaterThan(0);
    expect(body.error, what).not.toBe('INTERNAL_ERROR');
    expect(ERROR_STATUS[body.error as ErrorCode], `code and status disagree: ${what}`).toBe(status);
  }
  expect(status >= 500 && status !== 500 && status !== 501 && status !== 503, what).toBe(false);
  if (status >= 400) expect(ERROR_STATUSES.has(status), what).toBe(true);
  // No credential, or a false one: nothing but the open routes succeeds.
  const claimed = Object.values(r.headers).some((v) => v.includes(key) || v.includes(TEST_MANAGEMENT_KEY));
  const op = ops.find((o) => o.method === r.method && new RegExp(`^${o.template.replace(/\{[^}]+\}/g, '[^/]+')}$`).test(r.path.split('?')[0]!));
  if (!claimed && op?.secured && status < 300) throw new Error(`succeeded without a valid credential: ${what}`);
  // No silent default: an order placed carries the volume asked for, and was asked for one.
  if (status < 300 && r.method === 'GET' && /\/OrderSend(Safe)?$/.test(r.path)) {
    const asked = r.query.filter(([k]) => k === 'volume' || k === 'lots').map(([, v]) => Number(v));
    const body = JSON.parse(text) as Json;
    const placed = [body.volumeInitial, body.volume, body.lots, body.order?.volumeInitial, body.order?.volume].filter((v) => typeof v === 'number');
    expect(asked.length, `an order without a volume was placed: ${what}`).toBeGreaterThan(0);
    expect(placed.some((v) => asked.includes(v)), `placed ${placed.join('/')} lots, asked ${asked.join('/')}: ${what}`).toBe(true);
    ordersTaken++;
    const ticket = body.ticket ?? body.order?.ticket;
    if (typeof ticket === 'number') tickets.push(String(ticket));
  }
  // Added latency the run set on the simulator (POST /v1/sim/faults takes up to 60 s per reply): taken
  // off at once, or every later request that reaches the broker would outlast REQUEST_BOUND_MS (seen
  // in a 3000-run search, as a 'hang' of a valid OrderSendSafe).
  if (status < 300 && r.method === 'POST' && r.path === '/v1/sim/faults' && String(r.body).includes('latency')) {
    await t.req('DELETE', '/v1/sim/faults', { headers: mgmt(t.managementKey) });
  }
  // A Disconnect of the bound session (or an upgrade that ended it): a new one, so the proxy
  // operations keep reaching their handlers.
  const sent = r.query.find(([k]) => k === 'handle')?.[1];
  if (sent !== undefined && (sent === handle || sent === handleP4) && ((status === 200 && r.path === '/v1/proxy/Disconnect') || (status === 404 && text.includes('SESSION_NOT_FOUND')))) {
    const c = await t.req('POST', '/v1/connect', { headers: mgmt(t.managementKey), body: { brokerAccountId: sent === handle ? seat : victimSeat } });
    if (c.status === 200 && sent === handle) handle = c.body.handle;
    else if (c.status === 200) handleP4 = c.body.handle;
  }
  // The response is one the OpenAPI document promises (status, Error schema, success schema).
  // (A path that is not valid percent-encoding is refused 400 before any method matching: no operation to check it against.)
  const malformedPath = (() => { try { decodeURIComponent(r.path); return false; } catch { return true; } })();
  if (r.method !== 'HEAD' && !(malformedPath && status === 400)) checkResponse(doc, r.method, url, status, headers.get('content-type'), text);
}

describe('the HTTP surface under hostile input', () => {
  it('answers every request with a JSON error of a spec status, never a crash, a hang or a secret', async () => {
    expect(ops.length).toBeGreaterThan(60);
    await fc.assert(fc.asyncProperty(anyRequest(), holds), { numRuns: Number(process.env.FUZZ_RUNS ?? 1_000), seed: SEED });
    if (process.env.FUZZ_STATS) console.log([...seen].sort((a, b) => b[1] - a[1]));
    // The search reached the handlers (successes) as well as each kind of refusal.
    for (const s of ['200 ', '400 BAD_REQUEST', '400 INVALID_PARAMETER', '401 INVALID_API_KEY', '404 NOT_FOUND', '405 METHOD_NOT_ALLOWED']) {
      expect(seen.get(s), `no '${s}' among ${[...seen.keys()].join(', ')}`).toBeGreaterThan(0);
    }
    // A hang is each request's 8 s bound (REQUEST_BOUND_MS); this one bounds the run, ~10 s of CPU,
    // which under other work (npm test at load 18-35, twice) took past 60 s of wall.
  }, 180_000);

  it('holds as well for requests sent at once, on several connections', async () => {
    await fc.assert(fc.asyncProperty(fc.array(anyRequest(), { minLength: 2, maxLength: 12 }), async (rs) => {
      await Promise.all(rs.map(holds));
    }), { numRuns: Number(process.env.FUZZ_PARALLEL_RUNS ?? 60), seed: SEED });
  }, 60_000);

  it('answers every WebSocket upgrade (/v1/stream, /ws): opened, or refused with a JSON error of a spec status', async () => {
    const upgrade = fc.record({
      path: fc.constantFrom('/v1/stream', '/ws'),
      apiKey: sometimes(fc.oneof(fc.constant('KEY'), hostileString), 2),
      id: sometimes(fc.oneof(plausible('id'), hostileString), 2),
      handle: sometimes(fc.oneof(plausible('handle'), hostileString), 2),
      heartbeat: sometimes(fc.oneof(fc.constantFrom('0', '1'), hostileString), 3),
      foreign: fc.nat(5).map((n) => n === 0),
      auth: authFor({ schemes: ['apiKey', 'apiKeyBearer'] } as Op),
    });
    await fc.assert(fc.asyncProperty(upgrade, async (u) => {
      const qs = new URLSearchParams();
      if (u.apiKey !== undefined) qs.set('apiKey', u.apiKey.replace('KEY', key));
      // Mostly the socket's own parameters (so upgrades open too); now and then the other socket's,
      // which it refuses (400 INVALID_PARAMETER).
      const stream = u.path === '/v1/stream';
      if (u.id !== undefined && (stream || u.foreign)) qs.set('id', u.id);
      if (u.handle !== undefined && (!stream || u.foreign)) qs.set('handle', u.handle);
      if (u.heartbeat !== undefined && (stream || u.foreign)) qs.set('heartbeat', u.heartbeat);
      const headers: Record<string, string> = {};
      if (u.auth[0]) headers[u.auth[0]] = u.auth[1]!.replace('KEY', key).replace('MGMT', TEST_MANAGEMENT_KEY);
      const what = `upgrade ${u.path}?${qs.toString().slice(0, 200)} ${JSON.stringify(headers).slice(0, 120)}`;
      const outcome = await new Promise<{ open: true } | { status: number; text: string }>((resolve, reject) => {
        const ws = new WebSocket(`${t.url.replace('http', 'ws')}${u.path}?${qs}`, { headers });
        const timer = setTimeout(() => { ws.terminate(); reject(new Error(`no answer within ${REQUEST_BOUND_MS} ms: ${what}`)); }, REQUEST_BOUND_MS);
        ws.once('open', () => { clearTimeout(timer); ws.terminate(); resolve({ open: true }); });
        ws.once('unexpected-response', (_req, res) => {
          let text = '';
          res.on('data', (d: Buffer) => { text += d.toString(); });
          res.on('end', () => { clearTimeout(timer); ws.terminate(); resolve({ status: res.statusCode ?? 0, text }); });
        });
        ws.once('error', (err) => { clearTimeout(timer); reject(new Error(`${what}: ${err.message}`)); });
      });
      if ('open' in outcome) return;
      expect(secretIn(outcome.text), `a secret in the refusal: ${what}`).toBeUndefined();
      expect(ERROR_STATUSES.has(outcome.status), `${what} answered ${outcome.status}`).toBe(true);
      const body = JSON.parse(outcome.text) as Json;
      expect(body.error, `${what}: ${outcome.text}`).not.toBe('INTERNAL_ERROR');
      expect(typeof body.message, `${what}: ${outcome.text}`).toBe('string');
      expect(ERROR_STATUS[body.error as ErrorCode], `code and status disagree: ${what} answered ${outcome.status} ${outcome.text}`).toBe(outcome.status);
    }), { numRuns: Number(process.env.FUZZ_WS_RUNS ?? 100), seed: SEED });
  }, 60_000);

  it('takes an order, or refuses it with a JSON 4xx, whatever one or two of its fields hold', async () => {
    const numeric = (name: string) => fc.oneof({ weight: 3, arbitrary: plausible(name) }, { weight: 1, arbitrary: hostileString }, { weight: 1, arbitrary: fc.constantFrom(...NUMERIC_EDGE) });
    const optional: Record<string, fc.Arbitrary<string>> = {
      price: numeric('price'), stoploss: numeric('stoploss'), takeprofit: numeric('takeprofit'), slippage: numeric('slippage'),
      comment: fc.oneof(fc.constantFrom('c', 'x'.repeat(200), 'é😀', ''), hostileString), magic: numeric('magic'),
      expiration: fc.oneof(plausible('from'), hostileString), stopLimitPrice: numeric('price'), expirationType: numeric('expirationType'),
    };
    const order = fc.record({
      gateway: fc.boolean(),
      // Which base field to spoil (or none), and what with; then extra fields, maybe a duplicate.
      spoil: sometimes(fc.tuple(fc.constantFrom('symbol', 'operation', 'volume'), fc.oneof(numeric('volume'), hostileString)), 2),
      drop: sometimes(fc.constantFrom('symbol', 'operation', 'volume'), 8),
      extra: fc.dictionary(fc.constantFrom(...Object.keys(optional)), fc.constant(''), { maxKeys: 2, size: 'xsmall' }).chain((d) =>
        fc.tuple(...Object.keys(d).map((k) => optional[k]!.map((v) => [k, v] as [string, string])))),
      twice: sometimes(fc.tuple(fc.constantFrom('volume', 'symbol', 'lots'), fc.oneof(numeric('volume'), plausible('volume'))), 8),
      cid: fc.stringMatching(/^[A-Za-z0-9_.:-]{1,40}$/),
    }).map(({ gateway, spoil, drop, extra, twice, cid }): Req => {
      const base: Record<string, string> = { symbol: 'BTCUSD', operation: gateway ? '0' : 'Buy', volume: '0.01' };
      if (spoil) base[spoil[0]] = spoil[1];
      if (drop) delete base[drop];
      const query: Array<[string, string]> = [[gateway ? 'handle' : 'id', gateway ? handle : seat], ...Object.entries(base), ...extra];
      if (twice) query.push(twice);
      // A fresh idempotency id each time (classic): a repeated one would be a replay, not a new order.
      if (!gateway) query.push(['clientOrderId', `fz-${orderSeq++}-${cid}`]);
      return { method: 'GET', path: gateway ? '/v1/proxy/OrderSendSafe' : '/OrderSend', query, headers: { 'x-api-key': key } };
    });
    await fc.assert(fc.asyncProperty(order, holds), { numRuns: Number(process.env.FUZZ_ORDER_RUNS ?? 300), seed: SEED });
    if (process.env.FUZZ_STATS) console.log('orders taken', ordersTaken);
    expect(ordersTaken, 'no order was taken: the search did not reach the order engine').toBeGreaterThan(10);
  }, 60_000);

  it('answers every message on an open socket (/v1/stream, /ws) in order, whatever it holds; a frame over the limit ends only its own socket', async () => {
    // What a client may send once the socket is open: messages of the protocol with hostile fields,
    // any JSON, truncated JSON, text that is no JSON, binary frames, a deep nesting, a near-limit
    // frame; sometimes a flood of them at once, and sometimes one frame over the limit.
    const protocolish = fc.record({
      action: fc.oneof(fc.constantFrom('subscribe', 'unsubscribe', 'resume', 'ping'), hostileString),
      symbol: fc.oneof(fc.constantFrom('BTCUSD', 'EURUSD'), hostileString, fc.integer()),
      symbols: fc.oneof(fc.array(fc.oneof(fc.constantFrom('BTCUSD', 'EURUSD'), hostileString), { maxLength: 4 }), hostileString),
      timeframe: fc.oneof(fc.constantFrom('M1', 'H1', 'MN1', 1, 0), hostileString, fc.double()),
      timeframes: fc.oneof(fc.array(fc.oneof(fc.constantFrom('M1', 'H4'), hostileString), { maxLength: 3 }), fc.jsonValue()),
      since: fc.oneof(fc.constantFrom('0:0', 'abc', '1:-1'), hostileString),
      apiKey: fc.constant('KEY'),
    }, { requiredKeys: ['action'] }).map((m) => JSON.stringify(m).replace('"KEY"', JSON.stringify(key)));
    const frame: fc.Arbitrary<{ text: string } | { binary: Uint8Array }> = fc.oneof(
      { weight: 4, arbitrary: protocolish.map((text) => ({ text })) },
      { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 3 }).map((v) => ({ text: JSON.stringify(v) })) },
      { weight: 1, arbitrary: fc.tuple(protocolish, fc.nat()).map(([t, n]) => ({ text: t.slice(0, n % Math.max(1, t.length)) })) },
      { weight: 2, arbitrary: hostileString.map((text) => ({ text })) },
      { weight: 1, arbitrary: fc.uint8Array({ maxLength: 2_000 }).map((binary) => ({ binary })) },
      { weight: 1, arbitrary: fc.constantFrom(10, 5_000).map((n) => ({ text: `${'['.repeat(n)}${']'.repeat(n)}` })) },
      { weight: 1, arbitrary: fc.constant({ text: JSON.stringify({ action: 'subscribe', symbol: 'x'.repeat(CLIENT_MESSAGE_MAX_BYTES - 40) }) }) },
    );
    const run = fc.record({
      path: fc.constantFrom('/v1/stream', '/ws'),
      frames: fc.array(frame, { minLength: 1, maxLength: 6 }),
      flood: sometimes(fc.integer({ min: 50, max: 300 }), 6),
      giant: sometimes(fc.constantFrom(CLIENT_MESSAGE_MAX_BYTES + 1, 1_000_000), 8),
    });
    const ANSWERS = new Set(['SUBSCRIBED', 'UNSUBSCRIBED', 'ERROR', 'RESUMED', 'PONG']);
    await fc.assert(fc.asyncProperty(run, async (r) => {
      const qs = r.path === '/v1/stream' ? `id=${seat}` : `handle=${encodeURIComponent(handle)}`;
      const ws = new WebSocket(`${t.url.replace('http', 'ws')}${r.path}?${qs}`, { headers: { 'x-api-key': key }, maxPayload: 0 });
      const frames: Json[] = [];
      const what = () => `${r.path}: sent ${JSON.stringify(r.frames.map((f) => ('text' in f ? f.text.slice(0, 80) : `<${f.binary.length} bytes>`)))} flood ${r.flood} giant ${r.giant}; got ${JSON.stringify(frames.map((f) => f.type)).slice(0, 400)} (seed ${SEED})`;
      const closed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));
      // Checked after (a listener's throw would escape the property).
      const problems: string[] = [];
      ws.on('message', (data, isBinary) => {
        const text = String(data);
        if (isBinary) problems.push(`a binary frame from the gateway: ${text.slice(0, 100)}`);
        if (secretIn(text)) problems.push(`a secret in a frame: ${text.slice(0, 300)}`);
        try {
          frames.push(JSON.parse(text) as Json);
        } catch {
          problems.push(`a frame that is not JSON: ${text.slice(0, 200)}`);
        }
      });
      await new Promise<void>((resolve, reject) => {
        ws.once('open', () => resolve());
        ws.once('error', (err) => reject(new Error(`${r.path} did not open: ${err.message}`)));
      });
      const sent = [...r.frames, ...Array.from({ length: r.flood ?? 0 }, () => r.frames[0]!)];
      for (const f of sent) ws.send('text' in f ? f.text : f.binary, { binary: 'binary' in f });
      // The sentinel: answered after everything sent before it (each socket answers in order).
      const sentinel = r.path === '/v1/stream' ? JSON.stringify({ action: 'unsubscribe', symbol: 'FUZZ-SENTINEL' }) : 'ping';
      const answered = (f: Json) => (r.path === '/v1/stream' ? f.type === 'ERROR' && f.data?.request?.symbol === 'FUZZ-SENTINEL' : f.type === 'PONG');
      if (r.giant !== undefined) {
        ws.send(Buffer.alloc(r.giant, 0x61));
        // Over the limit: the gateway fails that connection (RFC 6455), and only it.
        const code = await Promise.race([closed, new Promise<number>((resolve) => setTimeout(() => resolve(-1), REQUEST_BOUND_MS))]);
        expect(code, `a frame over the limit did not end the socket: ${what()}`).not.toBe(-1);
        expect(problems, what()).toEqual([]);
        return;
      }
      ws.send(sentinel);
      await until(async () => {
        // /ws answers each message with one PONG or ERROR: the sentinel's PONG is the last of them.
        const done = r.path === '/ws' ? frames.filter((f) => f.type === 'PONG' || f.type === 'ERROR').length >= sent.length + 1 && answered(frames.filter((f) => f.type === 'PONG' || f.type === 'ERROR').at(-1)!) : frames.some(answered);
        // Closed without the answer: a failure. Closed after it (read at this poll, which may come up
        // to 50 ms later): the answers are checked below as for an open socket.
        if (!done && ws.readyState !== WebSocket.OPEN) throw new Error(`the socket closed before the sentinel's answer: ${what()}`);
        return done;
      }, `every message on ${r.path} answered`, REQUEST_BOUND_MS).catch((err: Error) => {
        throw new Error(`${err.message}: ${what()}`);
      });
      expect(problems, what()).toEqual([]);
      const answers = frames.filter((f) => ANSWERS.has(f.type));
      // Each message got an answer (on /v1/stream a subscribe to several symbols gets one each).
      expect(answers.length, `fewer answers than messages: ${what()}`).toBeGreaterThanOrEqual(sent.length + 1);
      for (const f of frames) {
        expect(typeof f.type, what()).toBe('string');
        if (f.type !== 'ERROR') continue;
        expect(ERROR_STATUS[f.data?.error as ErrorCode], `an ERROR frame with no known code (${JSON.stringify(f).slice(0, 300)}): ${what()}`).toBeDefined();
        expect(f.data.error, `${JSON.stringify(f).slice(0, 300)}: ${what()}`).not.toBe('INTERNAL_ERROR');
        expect(typeof f.data.message, what()).toBe('string');
      }
      ws.close();
      await closed;
    }), { numRuns: Number(process.env.FUZZ_SOCKET_RUNS ?? 60), seed: SEED });
    // Afterwards a new socket subscribes as before.
    const ws = new WebSocket(`${t.url.replace('http', 'ws')}/v1/stream?id=${seat}`, { headers: { 'x-api-key': key } });
    const got: Json[] = [];
    ws.on('message', (d) => got.push(JSON.parse(String(d))));
    await new Promise((resolve) => ws.once('open', resolve));
    ws.send(JSON.stringify({ action: 'subscribe', symbol: 'BTCUSD' }));
    await until(async () => got.some((f) => f.type === 'SUBSCRIBED'), 'a fresh socket to subscribe after the run');
    ws.close();
  }, 60_000);

  it('still answers /healthz and takes a valid order afterwards; the log holds no secret', async () => {
    expect((await t.req('GET', '/healthz')).status).toBe(200);
    // The run may have set simulator faults (POST /v1/sim/faults is on the surface too): cleared.
    expect((await t.req('DELETE', '/v1/sim/faults', { headers: mgmt(t.managementKey) })).status).toBeLessThan(300);
    // The run's orders may have used the bound account's margin up (the broker then answers
    // TRADE_REQUEST_ERROR NO_MONEY, a final answer): it still answers; a new account takes an order.
    let last = '';
    const order = (id: string) => t.req('GET', `/OrderSend?id=${id}&symbol=BTCUSD&operation=Buy&volume=0.01&clientOrderId=fuzz-after-${orderSeq++}`, { headers: { 'x-api-key': key } });
    await until(async () => {
      const o = await order(seat);
      last = `${o.status} ${o.text}`;
      return o.status === 200 || o.body?.error === 'TRADE_REQUEST_ERROR';
    }, 'a valid /OrderSend on the bound account answers with an order or the broker\'s refusal').catch((err: Error) => {
      throw new Error(`${err.message}; last answer ${last} (seed ${SEED})`);
    });
    const b = await t.req('POST', '/ConnectEx', { headers: { 'x-api-key': key }, body: { user: 'fuzz-after', password: BROKER_PW, server: 'Sim-P5-Demo' } });
    expect(b.status, b.text).toBe(200);
    await until(async () => {
      const o = await order(b.body.id);
      last = `${o.status} ${o.text}`;
      return o.status === 200 && typeof o.body.ticket === 'number';
    }, 'a valid /OrderSend on a new account answers 200 with a ticket').catch((err: Error) => {
      throw new Error(`${err.message}; last answer ${last} (seed ${SEED})`);
    });
    expect(logs.filter((l) => l.includes('"msg":"request"')).length, 'the gateway logged no request: the log check would read nothing').toBeGreaterThan(100);
    for (const line of logs) expect(secretIn(line), `a secret in the log (seed ${SEED}): ${line.slice(0, 400)}`).toBeUndefined();
    if (process.env.FUZZ_STATS) console.log(logs.filter((l) => /"level":"(error|warn)"/.test(l)).map((l) => l.slice(0, 300)).join('\n'));
  });
});
