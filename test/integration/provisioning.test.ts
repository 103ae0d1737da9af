import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect } from 'node:net';
import WebSocket from 'ws';
import { createCustomer } from '../../src/auth/bootstrap.js';
import { mgmt, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { until } from '../helpers/until.js';

let t: TestGateway;
beforeAll(async () => {
  // A private seat's build outlasts the reads that must see it building on a loaded machine (with
  // 400 ms, the POST's answer and the next GET could take longer).
  t = await startTestGateway({ seatBuildMs: 3_000 });
});
afterAll(async () => {
  await t.stop();
});

const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('seats', () => {
  it('a shared seat is ACTIVE at once and priced 14 USD', async () => {
    const r = await t.req('POST', '/v1/seats', { headers: mgmt(t.managementKey), body: { privateHosting: false } });
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({ status: 'ACTIVE', serverBuilding: false, privateHosting: false, monthlyPrice: 14, currency: 'USD' });
    const g = await t.req('GET', `/v1/seats/${r.body.id}`, { headers: { 'x-management-key': t.managementKey } });
    expect(g.status).toBe(200);
    expect(g.body.id).toBe(r.body.id);
  });

  it('a private seat is BUILDING_SERVER, then ACTIVE after the preparation time, priced 17 USD', async () => {
    const r = await t.req('POST', '/v1/seats', { headers: mgmt(t.managementKey), body: { privateHosting: true, region: 'us-east' } });
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({ status: 'BUILDING_SERVER', serverBuilding: true, privateHosting: true, region: 'us-east', monthlyPrice: 17 });
    const mid = await t.req('GET', `/v1/seats/${r.body.id}`, { headers: mgmt(t.managementKey) });
    expect(mid.body.status).toBe('BUILDING_SERVER');
    let last = mid;
    await until(async () => {
      last = await t.req('GET', `/v1/seats/${r.body.id}`, { headers: mgmt(t.managementKey) });
      return last.body.status === 'ACTIVE';
    }, 'the seat to be ACTIVE after its preparation time');
    expect(last.body).toMatchObject({ status: 'ACTIVE', serverBuilding: false });
  });

  it('lists seats of the customer only', async () => {
    const other = createCustomer(t.gw.services.tenancy, 'other-list');
    await t.req('POST', '/v1/seats', { headers: mgmt(other.managementKey), body: {} });
    const mine = await t.req('GET', '/v1/seats', { headers: mgmt(t.managementKey) });
    const theirs = await t.req('GET', '/v1/seats', { headers: mgmt(other.managementKey) });
    expect(theirs.body.seats).toHaveLength(1);
    const mineIds = new Set(mine.body.seats.map((s: { id: string }) => s.id));
    expect(mineIds.has(theirs.body.seats[0].id)).toBe(false);
  });

  it("another customer's seat is 404, like an unknown one", async () => {
    const other = createCustomer(t.gw.services.tenancy, 'other');
    const r = await t.req('POST', '/v1/seats', { headers: mgmt(other.managementKey), body: {} });
    expect(r.status).toBe(201);
    const g = await t.req('GET', `/v1/seats/${r.body.id}`, { headers: mgmt(t.managementKey) });
    expect(g.status).toBe(404);
    expect(g.body.error).toBe('NOT_FOUND');
    const u = await t.req('GET', '/v1/seats/00000000-0000-4000-8000-000000000000', { headers: mgmt(t.managementKey) });
    expect(u.status).toBe(404);
    const k = await t.req('POST', `/v1/seats/${r.body.id}/keys`, { headers: mgmt(t.managementKey), body: { label: 'x' } });
    expect(k.status).toBe(404);
  });
});

describe('keys', () => {
  it('creates a key shown once, stored only as a hash', async () => {
    const seat = await t.req('POST', '/v1/seats', { headers: mgmt(t.managementKey), body: {} });
    const r = await t.req('POST', `/v1/seats/${seat.body.id}/keys`, {
      headers: mgmt(t.managementKey), body: { label: 'bot-1', readOnly: true, accountScoped: true },
    });
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({ label: 'bot-1', readOnly: true, accountScoped: true, seatId: seat.body.id });
    expect(r.body.key).toMatch(/^tagw_k_[0-9a-f]{16}_[A-Za-z0-9_-]{43}$/);
    const secret = r.body.key.split('_').slice(3).join('_');
    // The listing never shows the key; the store holds a hash, not the secret.
    const list = await t.req('GET', '/v1/keys', { headers: mgmt(t.managementKey) });
    expect(list.text).not.toContain(secret);
    expect(list.body.keys.find((k: { id: string }) => k.id === r.body.id)).toMatchObject({ label: 'bot-1', revoked: false });
    const row = t.gw.services.tenancy.keyById(r.body.id)!;
    expect(JSON.stringify(row)).not.toContain(secret);
    expect(row.hash).toMatch(/^[0-9a-f]{64}$/);
  });

  it('rejects bad key bodies with 400', async () => {
    const seat = await t.req('POST', '/v1/seats', { headers: mgmt(t.managementKey), body: {} });
    const r = await t.req('POST', `/v1/seats/${seat.body.id}/keys`, { headers: mgmt(t.managementKey), body: { label: '', readOnly: 'yes' } });
    expect(r.status).toBe(400);
    expect(r.body.error).toBe('BAD_REQUEST');
    expect(r.body.message).toContain('label');
  });

  it('revoking a key makes it answer 401', async () => {
    const created = await t.req('POST', '/v1/keys', { headers: mgmt(t.managementKey), body: { label: 'temp' } });
    expect(created.status).toBe(201);
    const news = () => t.req('GET', '/v1/keys', { headers: mgmt(created.body.key) });
    // An API key is not a management key.
    expect((await news()).status).toBe(401);
    const del = await t.req('DELETE', `/v1/keys/${created.body.id}`, { headers: mgmt(t.managementKey) });
    expect(del.status).toBe(200);
    const again = await t.req('DELETE', `/v1/keys/${created.body.id}`, { headers: mgmt(t.managementKey) });
    expect(again.status).toBe(200);
    expect(t.gw.services.auth.resolve(created.body.key)).toBeUndefined();
  });
});

describe('errors', () => {
  it('malformed JSON is 400 INVALID_JSON', async () => {
    const r = await t.req('POST', '/v1/seats', { headers: { ...mgmt(t.managementKey), 'content-type': 'application/json' }, rawBody: '{"privateHosting":' });
    expect(r.status).toBe(400);
    expect(r.body.error).toBe('INVALID_JSON');
  });

  it('wrong field types are 400 naming the field', async () => {
    const r = await t.req('POST', '/v1/seats', { headers: mgmt(t.managementKey), body: { privateHosting: 'yes' } });
    expect(r.status).toBe(400);
    expect(r.body.message).toContain('privateHosting');
  });

  it('unknown fields are rejected rather than ignored', async () => {
    const r = await t.req('POST', '/v1/seats', { headers: mgmt(t.managementKey), body: { privateHostng: true } });
    expect(r.status).toBe(400);
  });

  it('a body over the limit is 413', async () => {
    const big = JSON.stringify({ region: 'x'.repeat(200_000) });
    const r = await t.req('POST', '/v1/seats', { headers: { ...mgmt(t.managementKey), 'content-type': 'application/json' }, rawBody: big });
    expect(r.status).toBe(413);
    expect(r.body.error).toBe('PAYLOAD_TOO_LARGE');
  });

  it('a body over the limit on a request that fails authentication: 401, and the gateway keeps serving', async () => {
    // The body read starts before the key is checked; its failure must not go unhandled (it ended the process).
    const big = 'a'.repeat(70_000);
    for (const headers of [{}, { authorization: 'Bearer not-a-key-at-all-0123456789' }] as Array<Record<string, string>>) {
      for (const path of ['/v1/keys', '/v1/seats', '/ConnectEx', '/v1/broker-accounts', '/v1/connect']) {
        const r = await t.req('POST', path, { headers: { ...headers, 'content-type': 'application/json' }, rawBody: big });
        expect([401, 413], `${path}: ${r.text}`).toContain(r.status);
      }
    }
    await new Promise((r) => setTimeout(r, 100));
    expect((await t.req('GET', '/healthz')).status).toBe(200);
  });

  it('a client that goes away in the middle of a body is no longer counted in flight', async () => {
    const inflight = async () => Number(/^tagw_http_inflight_requests (\d+)$/m.exec((await t.req('GET', '/metrics')).text)![1]);
    // The /metrics request counts itself.
    expect(await inflight()).toBe(1);
    const { port } = new URL(t.url);
    for (const path of ['/v1/seats', '/v1/keys', '/ConnectEx']) {
      const sock = connect(Number(port), '127.0.0.1');
      await new Promise<void>((r) => sock.once('connect', () => r()));
      sock.write(`POST ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${t.managementKey}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"la`);
      await wait(50);
      sock.destroy();
    }
    await until(async () => (await inflight()) === 1, 'the abandoned requests to leave the in-flight count');
  });

  it('an unknown route is a JSON 404', async () => {
    const r = await t.req('GET', '/no/such/route');
    expect(r.status).toBe(404);
    expect(r.headers.get('content-type')).toContain('application/json');
    expect(r.body.error).toBe('ROUTE_NOT_FOUND');
  });

  it('a route asked with another method is a JSON 405 naming the methods it answers (Allow), before any key check', async () => {
    const post = await t.req('POST', '/AccountSummary?id=x');
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('GET');
    expect(post.headers.get('content-type')).toContain('application/json');
    expect(post.body).toMatchObject({ error: 'METHOD_NOT_ALLOWED', message: '/AccountSummary answers GET, not POST' });
    // Path parameters match any one segment; every method of the path is listed.
    const put = await t.req('PUT', '/v1/keys/some-key-id');
    expect(put.status).toBe(405);
    expect(put.headers.get('allow')).toBe('DELETE');
    expect((await t.req('DELETE', '/v1/seats')).headers.get('allow')).toBe('GET, POST');
    // A path no route has under any method stays a 404.
    expect((await t.req('POST', '/v1/keys/a/b')).status).toBe(404);
  });
});

describe('account ids', () => {
  it('an account UUID in upper case is the same account on every route family (RFC 9562: case-insensitive on input)', async () => {
    const acct = await t.req('POST', '/v1/broker-accounts', {
      headers: mgmt(t.managementKey), body: { platform: 'P5', user: `upper-${Date.now()}`, password: 'pw', server: 'Sim-P5-Demo' },
    });
    expect(acct.status, acct.text).toBe(201);
    const id = acct.body.id as string;
    const ID = id.toUpperCase();
    expect(ID).not.toBe(id);
    const scoped = await t.req('POST', `/v1/seats/${ID}/keys`, { headers: mgmt(t.managementKey), body: { label: 'upper', accountScoped: true } });
    expect(scoped.status, scoped.text).toBe(201);
    expect(scoped.body.seatId).toBe(id);
    const key = scoped.body.key as string;
    const seat = await t.req('GET', `/v1/seats/${ID}`, { headers: mgmt(t.managementKey) });
    expect(seat.status, seat.text).toBe(200);
    expect(seat.body.id).toBe(id);
    // A key scoped to this account accepts its id in either case: not "scoped to another account".
    const summary = await t.req('GET', `/AccountSummary?id=${ID}`, { headers: { 'x-api-key': key } });
    expect(summary.status, summary.text).toBe(200);
    expect((await t.req('GET', `/AccountSummary?accountId=${ID}`, { headers: { 'x-api-key': key } })).status).toBe(200);
    const rebind = await t.req('POST', '/ConnectEx', { headers: { 'x-api-key': key }, body: { id: ID, user: `upper2-${Date.now()}`, password: 'pw', server: 'Sim-P5-Demo' } });
    expect(rebind.status, rebind.text).toBe(200);
    expect(rebind.body.id).toBe(id);
    const lower = await t.req('POST', '/v1/connect', { headers: { 'x-api-key': key }, body: { brokerAccountId: id } });
    const upper = await t.req('POST', '/v1/connect', { headers: { 'x-api-key': key }, body: { brokerAccountId: ID } });
    expect(upper.status, upper.text).toBe(200);
    expect(upper.body.handle).toBe(lower.body.handle);
    const ws = new WebSocket(`${t.url.replace('http', 'ws')}/v1/stream?id=${ID}&heartbeat=0`, { headers: { 'x-api-key': key } });
    const opened = await new Promise<number>((resolve) => {
      ws.once('open', () => resolve(101));
      ws.once('unexpected-response', (_q, res) => resolve(res.statusCode ?? 0));
      ws.once('error', () => resolve(-1));
    });
    ws.terminate();
    expect(opened).toBe(101);
  });
});
