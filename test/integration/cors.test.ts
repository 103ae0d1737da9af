// CORS_ORIGINS over real sockets: preflight answers, CORS headers on responses (errors included)
// for allowed origins only, and the Origin check on both WebSocket upgrades. The browser's side of
// it (a page really blocked or allowed) is in test/dashboard-cors.browser.test.ts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { ConfigError, parseConfig } from '../../src/config.js';
import { websocketOriginAllowed, CorsPolicy } from '../../src/http/cors.js';
import { HEADER_NAMES } from '../../src/http/request.js';
import { parseOrigins } from '../../src/util/origins.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

const ALLOWED = 'http://app.example:5173';
const OTHER = 'http://evil.example';

/** The status of a WebSocket upgrade (101 when it opened). */
function upgradeStatus(url: string, headers: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers });
    ws.once('open', () => {
      ws.close();
      resolve(101);
    });
    ws.once('unexpected-response', (_req, res) => {
      resolve(res.statusCode ?? 0);
      res.resume();
    });
    ws.once('error', (e) => reject(e));
  });
}

describe('CORS_ORIGINS parsing', () => {
  it('takes a comma-separated list in canonical form and refuses what is not an origin', () => {
    expect(parseOrigins(' http://A.example:5173 , https://b.example:443/, http://a.example:5173')).toEqual(['http://a.example:5173', 'https://b.example']);
    expect(parseOrigins('')).toEqual([]);
    expect(() => parseOrigins('*')).toThrow(/'\*' is not accepted/);
    expect(() => parseOrigins('app.example')).toThrow(/not an origin/);
    expect(() => parseOrigins('http://app.example/path')).toThrow(/more than scheme/);
    expect(() => parseOrigins('ftp://app.example')).toThrow(/only http and https/);
    expect(() => parseConfig({ corsOrigins: 'http://ok.example,nope' })).toThrow(ConfigError);
    expect(() => parseConfig({ corsOrigins: 'http://ok.example,nope' })).toThrow(/corsOrigins: 'nope' is not an origin/);
    expect(parseConfig({}).corsOrigins).toEqual([]);
  });

  it('lets WebSocket upgrades without Origin, from the same host, or from a listed origin through', () => {
    const cors = CorsPolicy.of([ALLOWED]);
    expect(websocketOriginAllowed('', 'gw:8080', cors)).toBe(true);
    expect(websocketOriginAllowed('http://gw:8080', 'gw:8080', undefined)).toBe(true);
    expect(websocketOriginAllowed('https://GW:8080', 'gw:8080', undefined)).toBe(true);
    expect(websocketOriginAllowed(ALLOWED, 'gw:8080', cors)).toBe(true);
    expect(websocketOriginAllowed(OTHER, 'gw:8080', cors)).toBe(false);
    expect(websocketOriginAllowed('http://gw:8081', 'gw:8080', cors)).toBe(false);
    expect(websocketOriginAllowed('null', 'gw:8080', cors)).toBe(false);
  });
});

/** Every header an answer carries beyond the CORS-safelisted ones is readable by the page. */
function expectAllReadable(headers: Headers): void {
  const exposed = (headers.get('access-control-expose-headers') ?? '').split(', ');
  const safelisted = new Set(['cache-control', 'content-language', 'content-length', 'content-type', 'expires', 'last-modified', 'pragma']);
  const cors = (h: string) => h.startsWith('access-control-') || h === 'vary' || h === 'date' || h === 'connection' || h === 'keep-alive' || h === 'uwebsockets';
  for (const h of headers.keys()) if (!safelisted.has(h) && !cors(h)) expect(exposed, h).toContain(h);
}

describe('CORS with an allowlist', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({ corsOrigins: `${ALLOWED},https://other-allowed.example`, keyRequestsPerSec: 2 });
  });
  afterAll(() => t.stop());

  it('answers a preflight from a listed origin with 204, methods, headers and max-age', async () => {
    const r = await t.req('OPTIONS', '/GetQuote?id=x', {
      headers: { origin: ALLOWED, 'access-control-request-method': 'GET', 'access-control-request-headers': 'x-api-key' },
    });
    expect(r.status).toBe(204);
    expect(r.text).toBe('');
    expect(r.headers.get('access-control-allow-origin')).toBe(ALLOWED);
    expect(r.headers.get('access-control-allow-methods')).toBe('GET, OPTIONS');
    expect(r.headers.get('access-control-allow-headers')).toBe('x-api-key, authorization, x-management-key, idempotency-key, content-type, x-request-id');
    expect(r.headers.get('access-control-max-age')).toBe('600');
    expect(r.headers.get('vary')).toMatch(/origin/i);
    expect(r.headers.get('allow')).toBe('GET, OPTIONS');
    // A path with two methods, a path parameter, and an 'any' route (/ConnectEx).
    const seats = await t.req('OPTIONS', '/v1/seats/abc', { headers: { origin: ALLOWED } });
    expect(seats.status).toBe(204);
    expect(seats.headers.get('access-control-allow-methods')).toContain('GET');
    // A gateway operation: GET only, though a catch-all 'any' route shares its path pattern.
    const op = await t.req('OPTIONS', '/v1/proxy/GetQuote', { headers: { origin: ALLOWED, 'access-control-request-method': 'GET' } });
    expect(op.status).toBe(204);
    expect(op.headers.get('access-control-allow-methods')).toBe('GET, OPTIONS');
    expect((await t.req('OPTIONS', '/v1/proxy/NoSuchOperation', { headers: { origin: ALLOWED } })).status).toBe(404);
    const cx = await t.req('OPTIONS', '/ConnectEx', { headers: { origin: ALLOWED } });
    expect(cx.status).toBe(204);
    expect(cx.headers.get('access-control-allow-methods')).toContain('POST');
  });

  it('gives an origin not on the list no CORS headers, and the same answer otherwise', async () => {
    const pre = await t.req('OPTIONS', '/GetQuote', { headers: { origin: OTHER, 'access-control-request-method': 'GET' } });
    expect(pre.status).toBe(204);
    expect(pre.headers.get('access-control-allow-origin')).toBeNull();
    expect(pre.headers.get('access-control-allow-methods')).toBeNull();
    const r = await t.req('GET', '/GetQuote?symbol=EURUSD', { headers: { origin: OTHER } });
    expect(r.status).toBe(401);
    expect(r.body.error).toBe('API_KEY_REQUIRED');
    expect(r.headers.get('access-control-allow-origin')).toBeNull();
  });

  it('puts CORS headers on every answer to a listed origin, errors included, exposing replay, retry and rate-limit headers', async () => {
    const r = await t.req('GET', '/GetQuote?symbol=EURUSD', { headers: { origin: ALLOWED } });
    expect(r.status).toBe(401);
    expect(r.headers.get('access-control-allow-origin')).toBe(ALLOWED);
    const exposed = r.headers.get('access-control-expose-headers') ?? '';
    for (const h of ['idempotent-replay', 'retry-after', 'ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset', 'ratelimit-policy', 'x-request-id']) expect(exposed).toContain(h);
    expectAllReadable(r.headers);
    const ok = await t.req('GET', '/healthz', { headers: { origin: 'https://other-allowed.example' } });
    expect(ok.status).toBe(200);
    expect(ok.headers.get('access-control-allow-origin')).toBe('https://other-allowed.example');
    const missing = await t.req('GET', '/no-such-route', { headers: { origin: ALLOWED } });
    expect(missing.status).toBe(404);
    expect(missing.headers.get('access-control-allow-origin')).toBe(ALLOWED);
    const seat = await t.req('POST', '/v1/seats', { headers: { origin: ALLOWED, authorization: `Bearer ${t.managementKey}` }, body: {} });
    expect(seat.status).toBe(201);
    expect(seat.headers.get('access-control-allow-origin')).toBe(ALLOWED);
  });

  it('lets a page send every header the API reads (x-management-key too, SPEC §5.8) and read every header /news answers with', async () => {
    const pre = await t.req('OPTIONS', '/v1/seats', {
      headers: { origin: ALLOWED, 'access-control-request-method': 'POST', 'access-control-request-headers': 'x-management-key, content-type' },
    });
    expect(pre.status).toBe(204);
    const allowed = (pre.headers.get('access-control-allow-headers') ?? '').split(', ');
    // The headers handlers read (HEADER_NAMES; content-length is the browser's own), and the body's type.
    for (const h of [...HEADER_NAMES.filter((x) => x !== 'content-length'), 'content-type']) expect(allowed, h).toContain(h);
    const seat = await t.req('POST', '/v1/seats', { headers: { origin: ALLOWED, 'x-management-key': t.managementKey }, body: {} });
    expect(seat.status).toBe(201);
    const key = (await t.req('POST', '/v1/keys', { headers: { 'x-management-key': t.managementKey }, body: { label: 'news' } })).body.key as string;
    const news = await t.req('GET', '/news', { headers: { origin: ALLOWED, 'x-api-key': key } });
    expect(news.status).toBe(200);
    expect(news.headers.get('x-calendar-source')).toBeTruthy();
    expectAllReadable(news.headers);
  });

  it("exposes every header of a per-key rate limit's 429", async () => {
    const key = (await t.req('POST', '/v1/keys', { headers: { authorization: `Bearer ${t.managementKey}` }, body: { label: 'limited' } })).body.key as string;
    let r = await t.req('GET', '/v1/whoami', { headers: { origin: ALLOWED, 'x-api-key': key } });
    for (let i = 0; i < 20 && r.status !== 429; i++) r = await t.req('GET', '/v1/whoami', { headers: { origin: ALLOWED, 'x-api-key': key } });
    expect(r.status).toBe(429);
    expect(r.headers.get('access-control-allow-origin')).toBe(ALLOWED);
    const exposed = (r.headers.get('access-control-expose-headers') ?? '').split(', ');
    const sent = [...r.headers.keys()].filter((h) => h.startsWith('ratelimit') || h === 'retry-after');
    expect(sent.length).toBeGreaterThan(1);
    for (const h of sent) expect(exposed).toContain(h);
  });

  it('keeps unknown paths a 404 under OPTIONS', async () => {
    const r = await t.req('OPTIONS', '/no-such-route', { headers: { origin: ALLOWED } });
    expect(r.status).toBe(404);
    expect(r.body.error).toBe('ROUTE_NOT_FOUND');
  });

  it('checks Origin on the /v1/stream and /ws upgrades', async () => {
    const ws = t.url.replace('http', 'ws');
    const host = t.url.slice('http://'.length);
    for (const path of ['/v1/stream?id=00000000-0000-4000-8000-000000000000', '/ws?handle=h']) {
      // Past the origin check a keyless upgrade is a 401; before it, 403.
      expect(await upgradeStatus(ws + path, { origin: OTHER })).toBe(403);
      expect(await upgradeStatus(ws + path, { origin: ALLOWED })).toBe(401);
      expect(await upgradeStatus(ws + path, { origin: `http://${host}` })).toBe(401);
      expect(await upgradeStatus(ws + path, {})).toBe(401);
    }
  });
});

describe('CORS without an allowlist (the default)', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway();
  });
  afterAll(() => t.stop());

  it('adds no CORS headers anywhere, answers OPTIONS with Allow, and still serves same-origin sockets', async () => {
    const pre = await t.req('OPTIONS', '/AccountSummary', { headers: { origin: ALLOWED, 'access-control-request-method': 'GET' } });
    expect(pre.status).toBe(204);
    expect(pre.headers.get('allow')).toBe('GET, OPTIONS');
    expect(pre.headers.get('access-control-allow-origin')).toBeNull();
    const r = await t.req('GET', '/healthz', { headers: { origin: ALLOWED } });
    expect(r.headers.get('access-control-allow-origin')).toBeNull();
    const ws = t.url.replace('http', 'ws') + '/v1/stream?id=00000000-0000-4000-8000-000000000000';
    expect(await upgradeStatus(ws, { origin: ALLOWED })).toBe(403);
    expect(await upgradeStatus(ws, { origin: t.url })).toBe(401);
  });
});
