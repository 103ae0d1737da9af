// The pipelining port (HTTP_PIPELINING_PORT, issue 14 item 1) over raw sockets: every pipelined
// request is answered, in order, whether the main thread or an account's shard answers it, and
// pipelined orders all execute, each once, in the order sent. The client's address reaches the
// failed-auth throttle through the relay, and no client can claim another address; bodies, their
// limits, WebSocket upgrades, shutdown and /metrics hold as on the main port (docs/http.md).
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClientAddress, RELAY_HEADER } from '../../src/http/clientAddress.js';
import { PipeliningRelay } from '../../src/http/pipeliningRelay.js';
import { createLogger } from '../../src/log.js';
import { mgmt, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { rawConnect, rawGet } from '../helpers/rawHttp.js';
import { mustOpen } from '../helpers/stream-helpers.js';
import { until } from '../helpers/until.js';

const AUTH_FAIL_LIMIT = 3;
let t: TestGateway;
let port: number;
let key: string;
let login = 0;
beforeAll(async () => {
  t = await startTestGateway({ pipeliningPort: 0, maxBodyBytes: 64 * 1024, bodyTimeoutMs: 300, authFailLimit: AUTH_FAIL_LIMIT });
  port = t.gw.pipeliningPort!;
  key = (await t.req('POST', '/v1/keys', { headers: mgmt(t.managementKey), body: { label: 'pipe-port' } })).body.key;
}, 30_000);
afterAll(async () => {
  await t?.stop();
});

const h = (extra: Record<string, string> = {}) => ({ 'x-api-key': key, ...extra });
async function newAccount(): Promise<string> {
  const r = await t.req('POST', '/ConnectEx', { headers: h(), body: { user: `pipe-port-${login++}`, password: 'pw', server: 'Sim-P5-Demo' } });
  expect(r.status, r.text).toBe(200);
  return r.body.id as string;
}
const tickets = async (id: string) => ((await t.req('GET', `/OpenedOrdersTickets?id=${id}`, { headers: h() })).body as number[]).sort((a, b) => a - b);
const orderPath = (id: string, coid: string) => `/OrderSend?id=${id}&symbol=BTCUSD&operation=Buy&volume=0.01&clientOrderId=${coid}`;
const metric = async (name: string) => Number(new RegExp(`^${name} (\\d+)`, 'm').exec((await t.req('GET', '/metrics')).text)?.[1] ?? NaN);

describe('the pipelining port', () => {
  it.each([2, 10, 100])('%i pipelined requests, synchronous and shard-backed mixed, all answered in order', async (n) => {
    const id = await newAccount();
    // A cached quote is answered in the request's own tick; the others wait on the account's shard.
    expect((await t.req('GET', `/GetQuote?id=${id}&symbol=BTCUSD`, { headers: h() })).status).toBe(200);
    const kinds = ['healthz', 'quote', 'summary', 'order', 'missing', 'opened'] as const;
    const reqs = Array.from({ length: n }, (_, i) => {
      const kind = kinds[i % kinds.length]!;
      const path = {
        healthz: '/healthz', quote: `/GetQuote?id=${id}&symbol=BTCUSD`, summary: `/AccountSummary?id=${id}`,
        order: orderPath(id, `mix-${n}-${i}`), missing: `/nope-${i}`, opened: `/OpenedOrdersTickets?id=${id}`,
      }[kind];
      return { kind, path, rid: `pipe-${n}-${i}` };
    });
    const before = await metric('tagw_http_pipelining_requests_total');
    const c = await rawConnect(port);
    c.write(reqs.map((r) => rawGet(r.path, h({ 'x-request-id': r.rid }))).join(''));
    const rs = await c.waitFor(n);
    expect(rs.map((r) => r.headers['x-request-id'])).toEqual(reqs.map((r) => r.rid));
    expect(rs.map((r) => r.status)).toEqual(reqs.map((r) => (r.kind === 'missing' ? 404 : 200)));
    rs.forEach((r, i) => {
      const kind = reqs[i]!.kind;
      if (kind === 'summary') expect(r.json.balance).toBeGreaterThan(0);
      if (kind === 'quote') expect(r.json.symbol).toBe('BTCUSD');
      if (kind === 'opened') expect(Array.isArray(r.json)).toBe(true);
      if (kind === 'order') expect(r.json.ticket).toBeGreaterThan(0);
    });
    // The orders ran in the order sent: tickets grow with the request's position.
    const orderTickets = rs.filter((_, i) => reqs[i]!.kind === 'order').map((r) => r.json.ticket as number);
    expect(orderTickets).toEqual([...orderTickets].sort((a, b) => a - b));
    expect(await tickets(id)).toEqual(orderTickets);
    // The connection stays open and serving; /metrics counted every request of the port.
    c.write(rawGet('/healthz'));
    expect((await c.waitFor(n + 1))[n]!.json).toEqual({ status: 'ok' });
    expect(await metric('tagw_http_pipelining_requests_total')).toBe(before + n + 1);
    c.end();
  }, 30_000);

  it('a flood of 3000 pipelined requests in one write: all answered, in order (reading pauses while many wait)', async () => {
    const c = await rawConnect(port);
    c.write(Array.from({ length: 3000 }, (_, i) => rawGet('/healthz', { 'x-request-id': `flood-${i}` })).join(''));
    const rs = await c.waitFor(3000);
    expect(rs.every((r, i) => r.status === 200 && r.headers['x-request-id'] === `flood-${i}`)).toBe(true);
    c.end();
  }, 60_000);

  it('10 pipelined idempotent orders: 10 answers, 10 orders at the broker; the same 10 again are replays', async () => {
    const id = await newAccount();
    const batch = Array.from({ length: 10 }, (_, i) => rawGet(orderPath(id, `idem-${i}`), h())).join('');
    const c = await rawConnect(port);
    c.write(batch);
    const rs = await c.waitFor(10);
    expect(rs.map((r) => r.status)).toEqual(Array(10).fill(200));
    const sent = rs.map((r) => r.json.ticket as number);
    expect(new Set(sent).size).toBe(10);
    expect(await tickets(id)).toEqual([...sent].sort((a, b) => a - b));
    const history = await t.req('GET', `/OrderHistory?id=${id}`, { headers: h() });
    expect(history.status, history.text).toBe(200);
    expect(JSON.stringify(history.body)).toContain(String(sent[9]));
    c.write(batch);
    const again = (await c.waitFor(20)).slice(10);
    expect(again.map((r) => r.headers['idempotent-replay'])).toEqual(Array(10).fill('true'));
    expect(again.map((r) => r.json.ticket)).toEqual(sent);
    expect(await tickets(id)).toHaveLength(10);
    c.end();
  }, 30_000);

  it('pipelined POSTs with bodies are each read whole and answered in order', async () => {
    const post = (i: number) => {
      const body = JSON.stringify({ user: `pipe-post-${i}`, password: 'pw', server: 'Sim-P5-Demo' });
      return `POST /ConnectEx HTTP/1.1\r\nHost: t\r\nx-api-key: ${key}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
    };
    const chunked = (body: string) => `POST /ConnectEx HTTP/1.1\r\nHost: t\r\nx-api-key: ${key}\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`;
    const c = await rawConnect(port);
    c.write(post(1) + rawGet('/healthz') + post(2) + chunked(JSON.stringify({ user: 'pipe-post-3', password: 'pw', server: 'Sim-P5-Demo' })));
    const rs = await c.waitFor(4);
    expect(rs.map((r) => r.status)).toEqual([200, 200, 200, 200]);
    expect(new Set([rs[0]!.json.id, rs[2]!.json.id, rs[3]!.json.id]).size).toBe(3);
    c.end();
  }, 30_000);

  it('body limits hold: 413 over MAX_BODY_BYTES (the connection keeps serving), 408 for a body that trickles in', async () => {
    const big = `{"label":"${'x'.repeat(100 * 1024)}"}`;
    const c = await rawConnect(port);
    c.write(`POST /v1/keys HTTP/1.1\r\nHost: t\r\nauthorization: ${mgmt(t.managementKey).authorization}\r\ncontent-type: application/json\r\ncontent-length: ${big.length}\r\n\r\n${big}${rawGet('/healthz')}`);
    const rs = await c.waitFor(2);
    expect(rs[0]!.status).toBe(413);
    expect(rs[0]!.json).toMatchObject({ error: 'PAYLOAD_TOO_LARGE' });
    expect(rs[1]!.json).toEqual({ status: 'ok' });
    c.end();

    const slow = await rawConnect(port);
    slow.write(`POST /v1/keys HTTP/1.1\r\nHost: t\r\nauthorization: ${mgmt(t.managementKey).authorization}\r\ncontent-type: application/json\r\ncontent-length: 20\r\n\r\n{"lab`);
    const [r] = await slow.waitFor(1);
    expect(r!.status).toBe(408);
    expect(r!.json).toMatchObject({ error: 'REQUEST_TIMEOUT' });
    expect(await slow.closed).toBe('end');
  }, 30_000);

  it('framing: Node refuses what cannot be framed (400 JSON, then the connection closes), an HTTP/1.0 request is answered, one uWS would refuse is 503 unrun', async () => {
    const c = await rawConnect(port);
    c.write(rawGet('/healthz') + 'POST /v1/keys HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}');
    expect(await c.closed).toBe('end');
    expect(c.responses.map((r) => r.status)).toEqual([200, 400]);
    expect(c.responses[1]!.json).toMatchObject({ error: 'BAD_REQUEST' });

    const old = await rawConnect(port);
    old.write('GET /healthz HTTP/1.0\r\n\r\n');
    expect(await old.closed).toBe('end');
    expect(old.responses.map((r) => r.json)).toEqual([{ status: 'ok' }]);

    const dav = await rawConnect(port);
    dav.write(`PROPFIND /healthz HTTP/1.1\r\nHost: t\r\n\r\n${rawGet('/healthz')}`);
    expect(await dav.closed).toBe('end');
    expect(dav.responses.map((r) => [r.status, r.json.error])).toEqual([[503, 'SERVICE_UNAVAILABLE'], [503, 'SERVICE_UNAVAILABLE']]);
    expect(dav.responses[1]!.json.message).toContain('not run');
    // The port's own answers carry a request id as the gateway's do (docs/operations.md: every
    // response); they had none. The client's own where the request was parsed.
    expect(c.responses[1]!.headers['x-request-id']).toMatch(/^[0-9a-f]{8}-/);
    const mine = await rawConnect(port);
    mine.write(`PROPFIND /healthz HTTP/1.1\r\nHost: t\r\nx-request-id: bot-7:dav\r\n\r\n`);
    expect(await mine.closed).toBe('end');
    expect(mine.responses.map((r) => r.headers['x-request-id'])).toEqual(['bot-7:dav']);
  });

  it("the failed-auth throttle sees the relayed client's own address, and a forged relay header is no address", async () => {
    // Two clients on two loopback addresses: the one that fails auth is blocked, the other is not.
    const bad = await rawConnect(port, '127.0.0.1', '127.0.0.2');
    bad.write(Array.from({ length: AUTH_FAIL_LIMIT + 1 }, () => rawGet('/AccountSummary?id=x', { 'x-api-key': 'tagw_wrong' })).join(''));
    const rs = await bad.waitFor(AUTH_FAIL_LIMIT + 1);
    expect(rs.map((r) => r.status)).toEqual([...Array(AUTH_FAIL_LIMIT).fill(401), 429]);
    const good = await rawConnect(port, '127.0.0.1', '127.0.0.3');
    good.write(rawGet('/AccountSummary?id=x', { 'x-api-key': 'tagw_wrong' }));
    expect((await good.waitFor(1))[0]!.status).toBe(401);
    // A client of the blocked address naming another in the relay's header (to the relay, and
    // straight to the main port) is still the blocked address.
    const forged = (peer: string) => ({ 'x-api-key': 'tagw_wrong', [RELAY_HEADER]: `${'A'.repeat(43)} ${peer}` });
    for (const p of [port, t.gw.port]) {
      const f = await rawConnect(p, '127.0.0.1', '127.0.0.2');
      f.write(rawGet('/AccountSummary?id=x', forged('198.51.100.7')));
      expect((await f.waitFor(1))[0]!.status, `port ${p === port ? 'pipelining' : 'main'}`).toBe(429);
      f.end();
    }
    bad.end();
    good.end();
  });

  it('clients that leave mid-request or mid-body: the port keeps serving, nothing stays in flight', async () => {
    const id = await newAccount();
    const f = await t.req('POST', `/v1/accounts/${id}/faults`, { headers: mgmt(t.managementKey), body: { kind: 'latency', latencyMs: 200 } });
    expect(f.status, f.text).toBe(201);
    for (let i = 0; i < 6; i++) {
      const c = await rawConnect(port);
      if (i % 2) c.write(rawGet(`/AccountSummary?id=${id}`, h()) + rawGet('/healthz'));
      else c.write(`POST /v1/keys HTTP/1.1\r\nHost: t\r\nauthorization: ${mgmt(t.managementKey).authorization}\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"la`);
      await new Promise((r) => setTimeout(r, 20 + i * 20));
      if (i % 3 === 0) c.socket.resetAndDestroy();
      else c.socket.destroy();
    }
    await until(async () => (await metric('tagw_http_inflight_requests')) === 1, 'nothing in flight but the /metrics request');
    const c = await rawConnect(port);
    c.write(rawGet('/healthz'));
    expect((await c.waitFor(1))[0]!.json).toEqual({ status: 'ok' });
    c.end();
  }, 20_000);

  it('WebSocket upgrades are relayed: /v1/stream opens and streams', async () => {
    const id = await newAccount();
    const s = await mustOpen(`http://127.0.0.1:${port}`, { id, apiKey: key, heartbeat: '0' });
    await s.until((x) => x.frames.length >= 2, 8_000, 'the snapshot frames');
    expect(s.frames[0]).toMatchObject({ type: 'POSITIONS', data: { snapshot: true } });
    await s.close();
  }, 20_000);
});

describe('the pipelining port behind a trusted proxy (TRUST_PROXY)', () => {
  it('the right-most X-Forwarded-For entry is the client, as on the main port', async () => {
    const g = await startTestGateway({ pipeliningPort: 0, trustProxy: true, authFailLimit: AUTH_FAIL_LIMIT });
    try {
      const bad = (xff: string) => rawGet('/AccountSummary?id=x', { 'x-api-key': 'tagw_wrong', 'x-forwarded-for': xff });
      const c = await rawConnect(g.gw.pipeliningPort!);
      // The proxy appended 192.0.2.1; what the client wrote before it is not its address.
      c.write(Array.from({ length: AUTH_FAIL_LIMIT + 1 }, (_, i) => bad(`10.9.9.${i}, 192.0.2.1`)).join(''));
      expect((await c.waitFor(AUTH_FAIL_LIMIT + 1)).map((r) => r.status)).toEqual([...Array(AUTH_FAIL_LIMIT).fill(401), 429]);
      // Another client behind the same proxy is not blocked, on either port; the blocked one is, on both.
      c.write(bad('192.0.2.2') + bad('192.0.2.1'));
      expect((await c.waitFor(AUTH_FAIL_LIMIT + 3)).slice(-2).map((r) => r.status)).toEqual([401, 429]);
      const m = await rawConnect(g.gw.port);
      m.write(bad('192.0.2.1'));
      expect((await m.waitFor(1))[0]!.status).toBe(429);
      c.end();
      m.end();
    } finally {
      await g.stop();
    }
  }, 30_000);
});

/** A relay in front of a stand-in for the gateway (a Node server on a Unix socket) that calls `handle`. */
async function withRelay(secret: string, handle: http.RequestListener, body: (relay: PipeliningRelay, port: number) => Promise<void>, logLines: string[] = []) {
  const upstream = http.createServer(handle);
  const dir = mkdtempSync(join(tmpdir(), 'tagw-relay-test-'));
  await new Promise<void>((r) => upstream.listen(join(dir, 'up.sock'), r));
  const log = createLogger('debug', {}, (line) => logLines.push(line));
  const relay = new PipeliningRelay({ upstreamPath: join(dir, 'up.sock'), tls: undefined, address: new ClientAddress(false, secret), log });
  try {
    await body(relay, await relay.listen('127.0.0.1', 0));
  } finally {
    await relay.stopAccepting();
    await relay.endConnections();
    upstream.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('the relay alone', () => {
  it("sends one relay header with its secret and the client's address, whatever the client sent under that name; hop-by-hop headers dropped", async () => {
    const seen: http.IncomingHttpHeaders[] = [];
    const secret = ClientAddress.newRelaySecret();
    await withRelay(secret, (req, res) => {
      seen.push(req.headers);
      res.end('{}');
    }, async (relay, relayPort) => {
      const c = await rawConnect(relayPort, '127.0.0.1', '127.0.0.4');
      c.write(rawGet('/a', { [RELAY_HEADER]: `${secret} 203.0.113.9`, 'X-TAGW-RELAY-PEER': 'x 203.0.113.10', 'keep-alive': 'timeout=5', 'x-api-key': 'k' }));
      await c.waitFor(1);
      c.end();
      expect(seen).toHaveLength(1);
      expect(seen[0]![RELAY_HEADER]).toBe(`${secret} 127.0.0.4`);
      expect(seen[0]!['keep-alive']).toBeUndefined();
      expect(seen[0]!['x-api-key']).toBe('k');
      expect(relay.requests).toBe(1);
    });
  });

  it('an upstream that drops the request: 503 JSON, unrun ones behind it said so, and the secret in no log line nor answer', async () => {
    const secret = ClientAddress.newRelaySecret();
    const lines: string[] = [];
    await withRelay(secret, (req) => req.socket.destroy(), async (_relay, relayPort) => {
      const c = await rawConnect(relayPort);
      c.write(rawGet('/a') + rawGet('/b'));
      expect(await c.closed).toBe('end');
      expect(c.responses.map((r) => [r.status, r.json.error])).toEqual([[503, 'SERVICE_UNAVAILABLE'], [503, 'SERVICE_UNAVAILABLE']]);
      expect(c.responses[1]!.json.message).toContain('not run');
      expect(c.responses.map((r) => r.body + JSON.stringify(r.headers)).join('')).not.toContain(secret);
    }, lines);
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.join('\n')).not.toContain(secret);
  });

  it('stops reading a connection while many pipelined requests wait (bounded memory), and answers them all once the gateway does', async () => {
    const held: http.ServerResponse[] = [];
    let holding = true;
    await withRelay(ClientAddress.newRelaySecret(), (_req, res) => {
      if (holding) held.push(res);
      else res.end('{}');
    }, async (relay, relayPort) => {
      const n = 10_000;
      const c = await rawConnect(relayPort);
      c.write(Array.from({ length: n }, () => rawGet('/x')).join(''));
      await until(() => held.length === 1, 'the first request at the stand-in');
      // Parsed requests stop growing well short of what was sent: the limit (256) plus what one
      // read (64 KiB) held, give or take a read.
      let last = -1;
      let since = Date.now();
      await until(() => {
        if (relay.requests !== last) [last, since] = [relay.requests, Date.now()];
        return Date.now() - since > 200;
      }, 'the relay to stop reading');
      expect(relay.requests).toBeLessThan(256 + (2 * 65_536) / rawGet('/x').length);
      holding = false;
      held.shift()!.end('{}');
      expect((await c.waitFor(n)).every((r) => r.status === 200)).toBe(true);
      c.end();
    });
  }, 60_000);
});
