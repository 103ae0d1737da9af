// The whole HTTP surface under hostile input (developers' guide, "Bad input"; SPEC §7): fast-check
// builds requests over every route the gateway mounts (its own OpenAPI document lists them, with
// their parameters and bodies), with the route's method and with wrong ones, each parameter and body
// field omitted, valid, hostile (wrong type, NaN/Infinity/-0, huge, negative, unicode and control
// characters, overlong, duplicated) or foreign (another account's id, not a UUID). Property: an answer
// arrives (each request is aborted after REQUEST_BOUND_MS: no hang), every status >= 400 is a JSON
// `{error, message}` whose code maps to that status (src/errors.ts) and is never INTERNAL_ERROR, the
// response is one the OpenAPI document promises, no request without a valid credential succeeds,
// and no secret used (API key, management key, broker password) is ever in a body, a header or
// the gateway's log. Afterwards the gateway still answers /healthz and takes a valid order.
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_STATUS, type ErrorCode } from '../../src/errors.js';
import { buildOpenApi } from '../../src/http/openapi.js';
import { API_VERSION } from '../../src/http/routes/ops.js';
import { createLogger } from '../../src/log.js';
import { mgmt, startTestGateway, TEST_MANAGEMENT_KEY, type TestGateway } from '../helpers/gateway.js';
import { checkResponse } from '../helpers/openapiCheck.js';
import { until } from '../helpers/until.js';

/** Long enough for any route's legitimate work on a loaded machine; a request still open then hangs. */
const REQUEST_BOUND_MS = 8_000;
const BROKER_PW = 'Br0ker-Pw-fuzz-7f3a9c';
/** Statuses SPEC §7 names, plus the HTTP layer's own (405 method, 408 body timeout, 413 too large,
 *  415 media type). 500 only as TERMINAL_ERROR (a broker connection's fault), never INTERNAL_ERROR. */
const ERROR_STATUSES = new Set([400, 401, 402, 403, 404, 405, 408, 409, 413, 415, 422, 429, 500, 501, 503]);

type Json = Record<string, any>;
interface Op { method: string; template: string; params: string[]; body: Json | undefined; secured: boolean; schemes: string[] }
interface Req { method: string; path: string; query: Array<[string, string]>; headers: Record<string, string>; body?: string }

let t: TestGateway;
const logs: string[] = [];
let key = '';
let seat = '';
let victimSeat = '';
let victimKeyId = '';
let handle = '';
let ops: Op[] = [];
let doc: Json;

const secrets = () => [key, TEST_MANAGEMENT_KEY, BROKER_PW];

beforeAll(async () => {
  // authFailLimit high: the hostile credentials' 401s must not block the run's loopback address.
  t = await startTestGateway({ authFailLimit: 1_000_000, seatBuildMs: 300 }, { log: createLogger('debug', {}, (l) => logs.push(l)) });
  const k = await t.req('POST', '/v1/keys', { headers: mgmt(t.managementKey), body: { label: 'fuzz' } });
  expect(k.status, k.text).toBe(201);
  key = k.body.key;
  const b = await t.req('POST', '/ConnectEx', { headers: { 'x-api-key': key }, body: { user: 'fuzz-main', password: BROKER_PW, server: 'Sim-P5-Demo' } });
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
  doc = buildOpenApi(t.gw.routes, API_VERSION) as Json;
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
      const params = ((op.parameters ?? []) as Json[]).filter((p) => p.in === 'query').map((p) => p.name as string);
      let body = op.requestBody?.content?.['application/json']?.schema as Json | undefined;
      if (body?.$ref) body = d.components.schemas[String(body.$ref).split('/').pop()!];
      const security = (op.security ?? d.security ?? []) as Json[];
      out.push({ method: method.toUpperCase(), template, params, body, secured: security.length > 0, schemes: security.flatMap((x) => Object.keys(x)) });
    }
  }
  return out;
}

// ---- values ----

const NUMERIC_EDGE = ['NaN', 'Infinity', '-Infinity', '-0', '0', '-1', '-0.01', '1e308', '1e309', '-1e309', '5e-324', '99999999999999999999999', '9007199254740993', '0x1F', '1,5', '1.5.5', ' 1', '1 ', '+1', '.5', '1e2', '0.0000001'];
const ODD = ['', ' ', 'null', 'undefined', 'true', 'false', '[]', '{}', '[object Object]', '%', '%00', '%zz', '\u0000', '\t', '\r\n', '\u007f', 'é', '😀', '\ud800', '\u202e', '\ufeff', '../../etc/passwd', "' OR 1=1 --", '<script>x</script>', '${x}', '__proto__', 'constructor'];
const NOT_UUID = ['0', 'abc', '00000000-0000-0000-0000-000000000000', 'ffffffff-ffff-ffff-ffff-ffffffffffffff', '{uuid}', '..', '%2e%2e'];

const hostileString = fc.oneof(
  fc.constantFrom(...NUMERIC_EDGE, ...ODD, ...NOT_UUID),
  fc.string({ unit: 'binary', maxLength: 24 }),
  fc.double().map(String),
  fc.integer({ min: -(2 ** 31), max: 2 ** 31 }).map(String),
  fc.bigInt({ min: -(10n ** 30n), max: 10n ** 30n }).map(String),
  // Overlong, but within what uWS 20.30 buffers for a request head split across reads: past that
  // (~64 KiB here, 4 KiB by its default when reads are small) it resets the connection unanswered,
  // in native code no route reaches (left as a finding; bodies have no such limit and go to 70 KB).
  fc.constantFrom(600, 5_000).map((n) => 'x'.repeat(n)),
);

/** A value that could pass for the parameter, so requests also get past validation into the handlers. */
function plausible(name: string): fc.Arbitrary<string> {
  const ids = () => fc.constantFrom(seat, seat, seat, victimSeat, crypto.randomUUID());
  const table: Record<string, fc.Arbitrary<string>> = {
    id: ids(), accountId: ids(), brokerAccountId: ids(), handle: fc.constantFrom(handle, 'h-' + crypto.randomUUID()),
    symbol: fc.constantFrom('EURUSD', 'BTCUSD', 'XAUUSD', 'NOPE', 'eurusd'), symbols: fc.constantFrom('EURUSD,GBPUSD', 'EURUSD', ',,', 'BTCUSD,NOPE'),
    volume: fc.constantFrom('0.01', '0.1', '1', '0', '-0.01', '100000'), lots: fc.constantFrom('0.01', '1', '-1', '0'),
    operation: fc.constantFrom('Buy', 'Sell', 'BuyLimit', 'SellStop', 'BuyStopLimit', '0', '1', '5', '7', '99'),
    type: fc.constantFrom('Buy', 'Sell', '0'), ticket: fc.constantFrom('1', '12345', '0', '-5'),
    price: fc.constantFrom('1.1', '0', '-1', '60000'), stoploss: fc.constantFrom('0', '1.0', '-1'), takeprofit: fc.constantFrom('0', '2.0'),
    from: fc.constantFrom('2020-01-01T00:00:00', '2030-01-01T00:00:00', '2020-13-45T99:99:99', '2020-01-01'), to: fc.constantFrom('2030-01-01T00:00:00', '1970-01-01T00:00:00'),
    clientOrderId: fc.stringMatching(/^[A-Za-z0-9_.:-]{1,64}$/), timeframe: fc.constantFrom('M1', 'H1', '1', '60', 'Y9'), timeFrame: fc.constantFrom('1', '60', '0'),
    msNotOlder: fc.constantFrom('0', '100', '-1'), count: fc.constantFrom('1', '10', '0', '100000'), limit: fc.constantFrom('1', '1000', '0'),
    country: fc.constantFrom('US', 'EU', 'XX'), impact: fc.constantFrom('high', 'low', 'none'),
    user: fc.constantFrom('fuzz-main', 'fuzz-other', 'u'), password: fc.constant(BROKER_PW), server: fc.constantFrom('Sim-P5-Demo', 'Sim-P4-Demo', 'Nowhere'),
    platform: fc.constantFrom('P4', 'P5', 'P6'), label: fc.constantFrom('l', ''), region: fc.constantFrom('us-east', ''),
  };
  return table[name] ?? fc.constantFrom('1', 'true', 'EURUSD', 'x');
}

/** A query parameter: omitted, plausible, hostile, or duplicated (plausible and hostile). A near-valid
 *  request has few hostile ones, so it gets past validation into the handler more often. */
function param(name: string, nearValid: boolean): fc.Arbitrary<Array<[string, string]>> {
  // An alias beside its parameter is a conflict whenever the values differ: mostly left out.
  const alias = name === 'accountId' || name === 'symbols';
  return fc.oneof(
    { weight: nearValid && alias ? 40 : 2, arbitrary: fc.constant<Array<[string, string]>>([]) },
    { weight: nearValid ? 40 : 4, arbitrary: plausible(name).map((v) => [[name, v] as [string, string]]) },
    { weight: 3, arbitrary: hostileString.map((v) => [[name, v] as [string, string]]) },
    { weight: 1, arbitrary: fc.tuple(plausible(name), hostileString).map(([a, b]) => [[name, a], [name, b]] as Array<[string, string]>) },
  );
}

const jsonHostile: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom(null, true, false, 0, -0, -1, 1e308, Number.MAX_SAFE_INTEGER + 2, '', 'x'.repeat(5_000), [], {}, [null], { a: { b: { c: [1, { d: null }] } } }),
  fc.string({ unit: 'binary', maxLength: 16 }),
  fc.double(),
  fc.jsonValue({ maxDepth: 3 }),
);

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
    { weight: 2, arbitrary: fc.constantFrom('', '{', '{"a":', '[1,', 'nul', '{"a":1}{"b":2}', "{'a':1}", '{"a":1,}', '\u0000', '{"__proto__":{"x":1}}', '{"a":' + '['.repeat(5_000) + ']'.repeat(5_000) + '}', '{"label":"' + 'y'.repeat(70_000) + '"}') },
    { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 40 }) },
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
  );
  return fc.tuple(...segs.map((s) => (/^\{.+\}$/.test(s) ? idArb.map((v) => encodeURIComponent(v)) : fc.constant(s)))).map((p) => p.join('/'));
}

/** A request for one operation, with its method or (1 in 5) another. */
function requestFor(o: Op): fc.Arbitrary<Req> {
  const destructive = o.method === 'DELETE' || /replace|limits|rotate|upgrade|faults/.test(o.template);
  return fc.record({
    method: fc.oneof({ weight: 4, arbitrary: fc.constant(o.method) }, { weight: 1, arbitrary: fc.constantFrom('GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS') }),
    path: pathOf(o.template, destructive),
    query: fc.boolean().chain((nearValid) => fc.tuple(fc.tuple(...o.params.map((p) => param(p, nearValid))), fc.option(fc.tuple(fc.constantFrom('stopLoss', 'apiKey', 'x', '', 'id[]', '__proto__'), hostileString), { nil: undefined, freq: 3 }))
      .map(([parts, extra]) => [...parts.flat(), ...(extra ? [extra] : [])])),
    auth: authFor(o),
    idem: fc.option(fc.oneof(fc.stringMatching(/^[A-Za-z0-9_.:-]{1,64}$/), hostileString), { nil: undefined, freq: 4 }),
    body: bodyOf(o),
  }).map(({ method, path, query, auth: [h, v], idem, body }) => {
    const headers: Record<string, string> = {};
    if (h) headers[h] = v!.replace('KEY', key).replace('MGMT', TEST_MANAGEMENT_KEY);
    // As a raw client would send them: UTF-8 bytes, no CR, LF or NUL (fetch refuses those).
    if (idem !== undefined) headers['idempotency-key'] = Buffer.from(idem.slice(0, 4_000), 'utf8').toString('latin1').replace(/[\0-\x08\x0a-\x1f\x7f]/g, '');
    if (body?.type !== undefined) headers['content-type'] = body.type;
    const r: Req = { method, path, query, headers };
    if (body && method !== 'GET' && method !== 'HEAD') r.body = body.text;
    return r;
  });
}

const anyRequest = () => fc.constantFrom(...ops).chain(requestFor);

// ---- the property ----

/** The run's seed, printed with a failure of the checks after it too (FUZZ_SEED=... to replay). */
const SEED = process.env.FUZZ_SEED ? Number(process.env.FUZZ_SEED) : (Math.random() * 2 ** 31) | 0;
let previous = '';
const seen = new Map<string, number>();

async function send(r: Req): Promise<{ status: number; headers: Headers; text: string; url: string }> {
  const qs = r.query.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v.replace(/[\ud800-\udfff]/g, '\ufffd'))}`).join('&');
  const url = r.path + (qs ? `?${qs}` : '');
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
  // A Disconnect of the bound session: a new one, so the proxy operations keep reaching their handlers.
  if (status === 200 && r.path === '/v1/proxy/Disconnect') {
    const c = await t.req('POST', '/v1/connect', { headers: mgmt(t.managementKey), body: { brokerAccountId: seat } });
    if (c.status === 200) handle = c.body.handle;
  }
  // The response is one the OpenAPI document promises (status, Error schema, success schema).
  if (r.method !== 'HEAD') checkResponse(doc, r.method, url, status, headers.get('content-type'), text);
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
  }, 60_000);

  it('still answers /healthz and takes a valid order afterwards; the log holds no secret', async () => {
    expect((await t.req('GET', '/healthz')).status).toBe(200);
    // The run may have set simulator faults (POST /v1/sim/faults is on the surface too): cleared.
    expect((await t.req('DELETE', '/v1/sim/faults', { headers: mgmt(t.managementKey) })).status).toBeLessThan(300);
    let last = '';
    await until(async () => {
      const o = await t.req('GET', `/OrderSend?id=${seat}&symbol=BTCUSD&operation=Buy&volume=0.01&clientOrderId=fuzz-after-${Date.now()}`, { headers: { 'x-api-key': key } });
      last = `${o.status} ${o.text}`;
      return o.status === 200 && typeof o.body.ticket === 'number';
    }, 'a valid /OrderSend on the bound account answers 200 with a ticket').catch((err: Error) => {
      throw new Error(`${err.message}; last answer ${last} (seed ${SEED})`);
    });
    expect(logs.length).toBeGreaterThan(0);
    for (const line of logs) expect(secretIn(line), `a secret in the log (seed ${SEED}): ${line.slice(0, 400)}`).toBeUndefined();
  });
});
