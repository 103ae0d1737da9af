// Request bodies over raw sockets (issue 16 item 6): a body over MAX_BODY_BYTES gets a 413 JSON the
// client can read, never a reset, whether it is sent whole, after Expect: 100-continue or chunked;
// a body that trickles in gets a 408 once BODY_TIMEOUT_MS passed (docs/http.md).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_DRAIN_BYTES } from '../../src/http/body.js';
import { mgmt, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { rawConnect, rawGet } from '../helpers/rawHttp.js';

let t: TestGateway;
const MAX = 64 * 1024;
beforeAll(async () => {
  t = await startTestGateway({ maxBodyBytes: MAX, bodyTimeoutMs: 300 });
}, 30_000);
afterAll(async () => {
  await t?.stop();
});

const FOUR_MB = 4 * 1024 * 1024;
const postHead = (headers: Record<string, string>) =>
  `POST /v1/keys HTTP/1.1\r\nHost: t\r\nAuthorization: ${mgmt(t.managementKey).authorization}\r\nContent-Type: application/json\r\n${Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n`;
/** A JSON body of `n` bytes: {"label":"xxxx..."} */
const jsonBody = (n: number) => Buffer.from(`{"label":"${'x'.repeat(n - 12)}"}`);

function expect413(r: { status: number; json: any }) {
  expect(r.status).toBe(413);
  expect(r.json).toMatchObject({ error: 'PAYLOAD_TOO_LARGE' });
  expect(r.json.message).toContain(String(MAX));
}

describe('request bodies', () => {
  it('a 4 MB body sent whole: 413 JSON, no reset, and the connection keeps serving', async () => {
    const c = await rawConnect(t.gw.port);
    const body = jsonBody(FOUR_MB);
    c.write(Buffer.concat([Buffer.from(postHead({ 'Content-Length': String(body.length) })), body]));
    const [r] = await c.waitFor(1);
    expect413(r!);
    c.write(rawGet('/healthz'));
    const rs = await c.waitFor(2);
    expect(rs[1]!.json).toEqual({ status: 'ok' });
    c.end();
    expect(await c.closed).toBe('end');
  });

  it('Expect: 100-continue with a 4 MB Content-Length: 413 before the body; one sent anyway is drained', async () => {
    const c = await rawConnect(t.gw.port);
    const body = jsonBody(FOUR_MB);
    c.write(postHead({ 'Content-Length': String(body.length), Expect: '100-continue' }));
    // uWS answers 100 Continue itself, before the application sees the request; the 413 follows at once.
    const rs = await c.waitFor(2);
    expect(rs[0]!.status).toBe(100);
    expect413(rs[1]!);
    c.write(body);
    c.write(rawGet('/healthz'));
    expect((await c.waitFor(3))[2]!.json).toEqual({ status: 'ok' });
    c.end();
    expect(await c.closed).toBe('end');
  });

  it('a chunked body over the limit is drained to its end, then answered 413', async () => {
    const c = await rawConnect(t.gw.port);
    c.write(postHead({ 'Transfer-Encoding': 'chunked' }));
    const chunk = Buffer.alloc(256 * 1024, 'x');
    for (let i = 0; i < 16; i++) c.write(Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from('\r\n')]));
    c.write('0\r\n\r\n');
    const [r] = await c.waitFor(1);
    expect413(r!);
    c.write(rawGet('/healthz'));
    expect((await c.waitFor(2))[1]!.json).toEqual({ status: 'ok' });
    c.end();
  });

  it('a declared length past what is worth draining: 413, then the connection is closed', async () => {
    const c = await rawConnect(t.gw.port);
    c.write(postHead({ 'Content-Length': String(MAX_DRAIN_BYTES + 1) }));
    const [r] = await c.waitFor(1);
    expect413(r!);
    expect(r!.headers.connection).toBe('close');
    expect(await c.closed).toBe('end');
  });

  it('a body that trickles in: 408 REQUEST_TIMEOUT JSON, then the connection is closed', async () => {
    const c = await rawConnect(t.gw.port);
    c.write(postHead({ 'Content-Length': '100' }) + '{"label":');
    const trickle = setInterval(() => c.socket.writable && c.write('x'), 50);
    try {
      const [r] = await c.waitFor(1);
      expect(r!.status).toBe(408);
      expect(r!.json).toMatchObject({ error: 'REQUEST_TIMEOUT' });
      expect(r!.json.message).toContain('300 ms');
      await c.closed;
    } finally {
      clearInterval(trickle);
    }
    // The process keeps serving.
    expect((await t.req('GET', '/healthz')).status).toBe(200);
  });
});
