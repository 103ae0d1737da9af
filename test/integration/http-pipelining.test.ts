// HTTP/1.1 pipelining over raw sockets. uWS (this build, and upstream by design) answers pipelined
// requests only while each reply is written before the next request is parsed; a request parsed
// while a reply is pending makes it close the connection. The gateway (src/http/respond.ts
// `deferred`, src/http/app.ts `afterThisRead`): replies leave in request order; a request sent while
// the previous reply is pending waits until that reply went out; a request that changes state never
// runs on a connection uWS closed, so a dropped order is never an executed one (docs/http.md).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mgmt, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { rawConnect, rawGet } from '../helpers/rawHttp.js';
import { account } from '../helpers/gateway-helpers.js';

let t: TestGateway;
let key: string;
let login = 0;
beforeAll(async () => {
  t = await startTestGateway();
  key = (await t.req('POST', '/v1/keys', { headers: mgmt(t.managementKey), body: { label: 'pipe' } })).body.key;
}, 30_000);
afterAll(async () => {
  await t?.stop();
});

async function newAccount(): Promise<string> {
  const r = await t.req('POST', '/ConnectEx', { headers: { 'x-api-key': key }, body: { user: `pipe-${login++}`, password: 'pw', server: 'Sim-P5-Demo' } });
  expect(r.status, r.text).toBe(200);
  return r.body.id as string;
}

const h = () => ({ 'x-api-key': key });
const tickets = async (id: string) => (await t.req('GET', `/OpenedOrdersTickets?id=${id}`, { headers: h() })).body as number[];
const order = (id: string, coid: string) => rawGet(`/OrderSend?id=${id}&symbol=BTCUSD&operation=Buy&volume=0.01&clientOrderId=${coid}`, h());

/** In-flight requests as /metrics reports them (the /metrics request counts itself). */
async function inflight(): Promise<number> {
  const text = (await t.req('GET', '/metrics')).text;
  return Number(/^tagw_http_inflight_requests (\d+)/m.exec(text)?.[1] ?? NaN);
}

describe('HTTP pipelining', () => {
  it.each([2, 10, 100])('%i pipelined requests answered synchronously come back in order, on one connection', async (n) => {
    const id = await newAccount();
    // Warm the quote cache: a cached /GetQuote is answered in the request's own tick.
    expect((await t.req('GET', `/GetQuote?id=${id}&symbol=BTCUSD`, { headers: h() })).status).toBe(200);
    const c = await rawConnect(t.gw.port);
    const paths = Array.from({ length: n }, (_, i) => (i % 3 === 0 ? '/healthz' : i % 3 === 1 ? `/GetQuote?id=${id}&symbol=BTCUSD` : `/nope-${i}`));
    c.write(paths.map((p) => rawGet(p, h())).join(''));
    const rs = await c.waitFor(n);
    expect(rs.map((r) => r.status)).toEqual(paths.map((p) => (p === '/healthz' || p.startsWith('/GetQuote') ? 200 : 404)));
    rs.forEach((r, i) => {
      if (paths[i]!.startsWith('/GetQuote')) expect(r.json.symbol).toBe('BTCUSD');
      if (paths[i]!.startsWith('/nope')) expect(r.json.message).toContain(paths[i]);
    });
    c.end();
  });

  /** An account whose broker replies are 600 ms late, and a raw connection with an order of it in flight. */
  async function orderInFlight(coid: string) {
    const id = await newAccount();
    await t.req('GET', `/GetQuote?id=${id}&symbol=BTCUSD`, { headers: h() });
    const f = await t.req('POST', `/v1/accounts/${id}/faults`, { headers: mgmt(t.managementKey), body: { kind: 'latency', latencyMs: 600 } });
    expect(f.status, f.text).toBe(201);
    const idle = await inflight();
    const c = await rawConnect(t.gw.port);
    c.write(order(id, coid));
    // What follows is written only once the gateway reports the order in flight: its reply is pending.
    while ((await inflight()) <= idle) await new Promise((r) => setTimeout(r, 5));
    return { id, c };
  }

  it('a request sent while a shard-backed reply is pending is answered after it, in order', async () => {
    const { id, c } = await orderInFlight('pending-1');
    c.write(order(id, 'pending-2'));
    const rs = await c.waitFor(2);
    expect(rs.map((r) => r.status)).toEqual([200, 200]);
    expect(rs[1]!.json.ticket).toBeGreaterThan(rs[0]!.json.ticket);
    expect((await tickets(id)).sort()).toEqual([rs[0]!.json.ticket, rs[1]!.json.ticket].sort());
    // The connection stays usable.
    c.write(rawGet(`/AccountSummary?id=${id}`, h()));
    await c.waitFor(3);
    c.write(rawGet('/healthz'));
    const more = await c.waitFor(4);
    expect(more[2]!.json.balance).toBeGreaterThan(0);
    expect(more[3]!.json.status).toBe('ok');
    c.end();
  }, 20_000);

  it('several requests sent together while a reply is pending: that reply is delivered, the orders behind it are not executed', async () => {
    const { id, c } = await orderInFlight('first');
    c.write(order(id, 'behind-1') + order(id, 'behind-2') + rawGet('/healthz'));
    expect(await c.closed).toBe('end');
    expect(c.responses.map((r) => r.status)).toEqual([200]);
    expect(await tickets(id)).toEqual([c.responses[0]!.json.ticket]);
    const again = await t.req('GET', `/OrderSend?id=${id}&symbol=BTCUSD&operation=Buy&volume=0.01&clientOrderId=behind-1`, { headers: h() });
    expect(again.headers.get('idempotent-replay')).toBeNull();
  }, 20_000);

  it('pipelined behind a request still to be answered in the same packet, orders are not executed (uWS closes the connection)', async () => {
    const id = await newAccount();
    const c = await rawConnect(t.gw.port);
    c.write(Array.from({ length: 10 }, (_, i) => order(id, `burst-${i}`)).join(''));
    expect(await c.closed).toBe('end');
    expect(c.responses).toEqual([]);
    expect(await tickets(id)).toEqual([]);
    // None of the ids was used: sent one at a time, each executes now (no replay) and is answered.
    for (let i = 0; i < 10; i++) {
      const r = await t.req('GET', `/OrderSend?id=${id}&symbol=BTCUSD&operation=Buy&volume=0.01&clientOrderId=burst-${i}`, { headers: h() });
      expect(r.status, r.text).toBe(200);
      expect(r.headers.get('idempotent-replay')).toBeNull();
    }
    expect(await tickets(id)).toHaveLength(10);
  }, 20_000);

  it('the same for GETs that change something: /v1/proxy trade operations and GET /ConnectEx', async () => {
    const a = await account(t, 'P5');
    const seats = async () => (await t.req('GET', '/v1/seats', { headers: mgmt(t.managementKey) })).body.seats.length as number;
    const before = await seats();
    const send = rawGet(`/v1/proxy/OrderSendSafe?handle=${a.handle}&symbol=BTCUSD&operation=0&volume=0.01`, { 'x-api-key': a.key });
    const bind = rawGet('/ConnectEx?user=pipe-bound&password=pw&server=Sim-P5-Demo', { 'x-api-key': key });
    for (const first of [send, bind]) {
      const c = await rawConnect(t.gw.port);
      c.write(first + rawGet('/healthz'));
      expect(await c.closed).toBe('end');
      expect(c.responses).toEqual([]);
    }
    // Whatever ran finishes counted in flight: wait for that before looking at what it did.
    while ((await inflight()) > 1) await new Promise((r) => setTimeout(r, 5));
    expect((await t.req('GET', `/OpenedOrdersTickets?id=${a.id}`, { headers: { 'x-api-key': a.key } })).body).toEqual([]);
    expect(await seats()).toBe(before);
  }, 20_000);

  it('a state-changing request last in a pipelined packet is executed and answered after the synchronous ones', async () => {
    const id = await newAccount();
    await t.req('GET', `/GetQuote?id=${id}&symbol=BTCUSD`, { headers: h() });
    const c = await rawConnect(t.gw.port);
    c.write(rawGet('/healthz') + rawGet(`/GetQuote?id=${id}&symbol=BTCUSD`, h()) + order(id, 'last-1'));
    const rs = await c.waitFor(3);
    expect(rs.map((r) => r.status)).toEqual([200, 200, 200]);
    expect(await tickets(id)).toEqual([rs[2]!.json.ticket]);
    c.end();
  });
});
