import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MIN_BUILD } from '../../src/runtime/hosts/accountOps.js';
import { mgmt, startTestGateway, type TestGateway } from '../helpers/gateway.js';

let t: TestGateway;
beforeAll(async () => {
  // Two shards: /readyz counts them and says whether all are up.
  t = await startTestGateway({ shards: 2 });
});
afterAll(async () => {
  await t.stop();
});

describe('ops routes', () => {
  it('healthz and readyz', async () => {
    expect((await t.req('GET', '/healthz')).body).toEqual({ status: 'ok' });
    const r = await t.req('GET', '/readyz');
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ ready: true, store: true, shards: 2, shardsUp: true });
  });

  it('openapi.json documents every mounted route with its parameters and error schema', async () => {
    const r = await t.req('GET', '/openapi.json');
    expect(r.status).toBe(200);
    const doc = r.body;
    expect(doc.openapi).toBe('3.0.3');
    expect(doc.info.version).toBe('1.0.0');
    for (const route of t.gw.routes) {
      const path = route.path.replace(/:([A-Za-z]+)/g, '{$1}');
      const method = route.method === 'any' ? 'get' : route.method;
      expect(doc.paths[path]?.[method], `${method} ${path}`).toBeDefined();
    }
    const create = doc.paths['/v1/seats'].post;
    expect(create.requestBody.content['application/json'].schema.properties).toHaveProperty('privateHosting');
    expect(create.responses['201']).toBeDefined();
    expect(create.responses['401'].content['application/json'].schema.$ref).toBe('#/components/schemas/Error');
    expect(doc.paths['/v1/seats/{id}'].get.parameters[0]).toMatchObject({ name: 'id', in: 'path', required: true });
    // Every success a route can answer: a login already bound answers 200 with its account.
    expect(Object.keys(doc.paths['/v1/broker-accounts'].post.responses)).toEqual(expect.arrayContaining(['200', '201']));
    // The proxy's catch-all only ever answers 404 / 405: no success is promised.
    const catchAll = Object.keys(doc.paths['/v1/proxy/{operation}'].get.responses);
    expect(catchAll).toEqual(expect.arrayContaining(['404', '405']));
    expect(catchAll.filter((st) => st.startsWith('2'))).toEqual([]);
    // Statuses every route of a kind can answer: 413 where there is a body (MAX_BODY_BYTES), 400
    // where a path parameter can be malformed percent-encoding, 501 where a build lacks the endpoint.
    for (const route of t.gw.routes) {
      const path = route.path.replace(/:([A-Za-z]+)/g, '{$1}');
      const responses = doc.paths[path][route.method === 'any' ? 'get' : route.method].responses;
      if (route.body) expect(responses['413'], `413 of ${route.method} ${path}`).toBeDefined();
      if (path.includes('{')) expect(responses['400'], `400 of ${route.method} ${path}`).toBeDefined();
    }
    for (const op of Object.keys(MIN_BUILD)) expect(doc.paths[`/${op}`].get.responses['501'], `501 of /${op}`).toBeDefined();
  });

  it('openapi.json: every $ref resolves inside the document (named schemas live in components.schemas)', async () => {
    const doc = (await t.req('GET', '/openapi.json')).body;
    const refs = new Set(JSON.stringify(doc).match(/"\$ref":"[^"]*"/g)?.map((m) => m.slice(8, -1)) ?? []);
    expect(refs.size).toBeGreaterThan(1);
    for (const ref of refs) {
      expect(ref, ref).toMatch(/^#\/components\/schemas\//);
      const target = ref.slice(2).split('/').reduce<any>((o, k) => o?.[k], doc);
      expect(target, ref).toBeTypeOf('object');
      expect(target.$ref, `${ref} is itself a reference`).toBeUndefined();
    }
    expect(doc.components.schemas.Error).toMatchObject({ type: 'object', required: ['error', 'message'] });
    expect(doc.components.schemas.Seat).toMatchObject({ type: 'object' });
  });

  it('metrics count requests per family and status with latency histograms', async () => {
    await t.req('GET', '/v1/seats', { headers: mgmt(t.managementKey) });
    await t.req('GET', '/v1/seats');
    const r = await t.req('GET', '/metrics');
    expect(r.headers.get('content-type')).toContain('text/plain');
    expect(r.text).toMatch(/tagw_http_requests_total\{family="provisioning",status="200"\} [1-9]/);
    expect(r.text).toMatch(/tagw_http_requests_total\{family="provisioning",status="401"\} [1-9]/);
    expect(r.text).toMatch(/tagw_http_request_duration_seconds_bucket\{family="provisioning",le="\+Inf"\} [1-9]/);
    expect(r.text).toContain('tagw_http_request_duration_seconds_count{family="provisioning"}');
    // Types follow the names: `_total` is a counter, nothing else is.
    const types = [...r.text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => [m[1]!, m[2]!] as const);
    expect(types).toContainEqual(['tagw_shard_restarts_total', 'counter']);
    expect(types).toContainEqual(['tagw_stream_ticks_in_total', 'counter']);
    expect(types).toContainEqual(['tagw_stream_sockets', 'gauge']);
    // (Ours: prom-client's own nodejs_active_*_total are gauges.)
    for (const [name, type] of types) if (type !== 'histogram' && name.startsWith('tagw_')) expect(type, name).toBe(name.endsWith('_total') ? 'counter' : 'gauge');
  });
});

describe('malformed requests', () => {
  it('a path parameter that is not valid percent-encoding is a 400, before auth, and the server keeps serving', async () => {
    for (const [method, path] of [['GET', '/v1/seats/%ZZ'], ['GET', '/v1/proxy/%ZZ?handle=x'], ['POST', '/v1/seats/%E2%82/keys']] as const) {
      const r = await t.req(method, path);
      expect(r.status, path).toBe(400);
      expect(r.body).toMatchObject({ error: 'BAD_REQUEST', message: expect.stringContaining('percent-encoding') });
    }
    expect((await t.req('GET', '/healthz')).status).toBe(200);
  });

  it('a HEAD request is answered without a body, so the next response on the keep-alive connection stays intact', async () => {
    // Two requests pipelined on one connection: the bytes after the HEAD answer's header block must
    // be the GET answer (RFC 9110 §9.3.2: a HEAD response has no content).
    const port = new URL(t.url).port;
    for (const path of ['/healthz', '/no-such-route', '/v1/proxy/AccountSummary?handle=x', '/v1/proxy/Nope?handle=x']) {
      const raw = await new Promise<string>((resolve, reject) => {
        const sock = connect(Number(port), '127.0.0.1', () => {
          sock.write(`HEAD ${path} HTTP/1.1\r\nHost: x\r\nx-api-key: tagw_k_0000000000000000_x\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n`);
        });
        let out = '';
        sock.on('data', (d) => {
          out += d.toString('latin1');
          if (out.endsWith('{"status":"ok"}')) { sock.destroy(); resolve(out); }
        });
        sock.on('error', reject);
        setTimeout(() => { sock.destroy(); resolve(out); }, 2_000);
      });
      const headEnd = raw.indexOf('\r\n\r\n');
      expect(raw.slice(0, 12), path).toMatch(/^HTTP\/1\.1 \d{3}/);
      expect(raw.slice(headEnd + 4, headEnd + 4 + 9), `${path}: ${raw}`).toBe('HTTP/1.1 ');
      expect(raw.endsWith('{"status":"ok"}')).toBe(true);
    }
  });
});

describe('openapi for the gateway proxy', () => {
  it('documents each operation\'s parameters (handler-validated, per platform)', async () => {
    const doc = (await t.req('GET', '/openapi.json')).body;
    const names = (op: string) => (doc.paths[`/v1/proxy/${op}`].get.parameters as Array<{ name: string; required: boolean }>);
    const send = names('OrderSendSafe');
    expect(send.find((p) => p.name === 'symbol')?.required).toBe(true);
    expect(send.find((p) => p.name === 'stopLimitPrice')?.required).toBe(false);
    const many = names('SubscribeMany');
    // P5 has force, P4 has replace: both are listed, neither required.
    expect(many.map((p) => p.name)).toEqual(expect.arrayContaining(['symbols', 'interval', 'force', 'replace']));
    expect(names('QuoteHistory').find((p) => p.name === 'count')?.required).toBe(true);
    // A parameter one platform requires says which.
    const hist = names('OrderHistory') as Array<{ name: string; required: boolean; description?: string }>;
    expect(hist.find((p) => p.name === 'to')).toMatchObject({ required: false, description: expect.stringContaining('Required on P5') });
  });

  it('shows what a client sends: date-times as strings; an API key as Bearer on connection routes', async () => {
    const doc = (await t.req('GET', '/openapi.json')).body;
    const expiration = (doc.paths['/OrderSend'].get.parameters as Array<{ name: string; schema: { type: string } }>).find((p) => p.name === 'expiration');
    expect(expiration?.schema.type).toBe('string');
    expect(doc.paths['/ConnectEx'].post.security).toContainEqual({ apiKeyBearer: [] });
    expect(doc.paths['/v1/connect'].post.security).toContainEqual({ apiKeyBearer: [] });
  });
});
