// The OpenAPI document as a client generator uses it (issue 14 item 8): valid by a third-party
// validator, a server entry, an operationId on every operation, schemas for every success the
// gateway routes answer, the idempotency headers, 405 with Allow, tickets typed alike.
import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { checkResponse } from '../helpers/openapiCheck.js';

let t: TestGateway;
let doc: any;
beforeAll(async () => {
  t = await startTestGateway();
  doc = (await t.req('GET', '/openapi.json')).body;
});
afterAll(async () => {
  await t?.stop();
});

type Op = { operationId?: string; parameters?: Array<{ name: string; in: string; schema: any }>; responses: Record<string, any> };
const operations = (): Array<[string, string, Op]> =>
  Object.entries(doc.paths as Record<string, Record<string, Op>>).flatMap(([path, item]) => Object.entries(item).map(([method, op]) => [method, path, op] as [string, string, Op]));

describe('/openapi.json', () => {
  it('is a valid OpenAPI 3.0 document (@seriousme/openapi-schema-validator)', async () => {
    const v = new Validator();
    const res = await v.validate(structuredClone(doc));
    expect(res.errors ?? [], JSON.stringify(res.errors ?? []).slice(0, 2000)).toEqual([]);
    expect(res.valid).toBe(true);
  });

  it('has a server entry and a unique operationId on every operation (orderSend, proxyOrderSend, ...)', () => {
    expect(doc.servers).toEqual([expect.objectContaining({ url: '/' })]);
    const ids = operations().map(([m, p, op]) => op.operationId ?? `missing on ${m} ${p}`);
    expect(ids.filter((id) => id.startsWith('missing'))).toEqual([]);
    expect(new Set(ids).size).toBe(ids.length);
    expect(doc.paths['/OrderSend'].get.operationId).toBe('orderSend');
    expect(doc.paths['/v1/proxy/OrderSend'].get.operationId).toBe('proxyOrderSend');
    expect(doc.paths['/v1/proxy/OrderSendSafe'].get.operationId).toBe('proxyOrderSendSafe');
    expect(doc.paths['/v1/seats/{id}'].get.operationId).toBe('getSeatsById');
  });

  it('every /v1/proxy operation documents the body of its success', () => {
    const untyped = operations().filter(([, p, op]) => p.startsWith('/v1/proxy/') && op.responses['200'] && !op.responses['200'].content);
    expect(untyped.map(([m, p]) => `${m} ${p}`)).toEqual([]);
  });

  it('trading routes declare the Idempotency-Key header and the Idempotent-Replay answer; 429/503 declare retry-after', () => {
    for (const path of ['/OrderSend', '/OrderModify', '/OrderClose', '/OrderDelete', '/OrderCloseBy']) {
      const op = doc.paths[path].get as Op;
      expect(op.parameters!.find((p) => p.in === 'header' && p.name === 'Idempotency-Key'), path).toBeDefined();
      expect(op.responses['200'].headers, path).toHaveProperty('Idempotent-Replay');
      expect(op.responses['503'].headers, path).toHaveProperty('retry-after');
      expect(op.responses['429'].headers, path).toHaveProperty('retry-after');
    }
  });

  it('405 with Allow where another method on the path is refused', async () => {
    const r = await t.req('POST', '/OrderSend');
    expect(r.status).toBe(405);
    expect(doc.paths['/OrderSend'].get.responses['405'].headers).toHaveProperty('allow');
    expect(doc.paths['/v1/seats'].post.responses['405']).toBeDefined();
  });

  it('ticket is typed the same (integer) on every route that takes it', () => {
    const types = new Set<string>();
    for (const [m, p, op] of operations()) {
      for (const param of op.parameters ?? []) if (param.name === 'ticket' || param.name === 'byTicket') types.add(`${param.schema.type}:${m} ${p}`.split(':')[0]!);
    }
    expect([...types]).toEqual(['integer']);
  });
});

describe('the response check of the integration tests (helpers/openapiCheck.ts)', () => {
  it('fails loudly for a route missing from the document, an undocumented status and a body off its schema', () => {
    const json = 'application/json';
    // Every answer the test gateway's request helper got so far was checked; these are not the document's.
    expect(() => checkResponse(doc, 'GET', '/v1/not-documented', 200, json, '{}')).toThrow(/no GET operation for this path/);
    expect(() => checkResponse(doc, 'GET', '/OrderSend?id=x', 418, json, '{"error":"X","message":"m"}')).toThrow(/a status orderSend does not document/);
    expect(() => checkResponse(doc, 'GET', '/v1/proxy/GetQuote', 200, json, '{"symbol":"EURUSD","bid":"1.1"}')).toThrow(/does not match proxyGetQuote's 200 schema/);
    expect(() => checkResponse(doc, 'GET', '/OrderSend', 400, json, '{"nope":1}')).toThrow(/not the Error schema|does not match/);
    // What the fallback answers for a path no route serves is the Error schema.
    expect(() => checkResponse(doc, 'GET', '/nowhere', 404, json, '{"error":"ROUTE_NOT_FOUND","message":"no route"}')).not.toThrow();
    expect(() => checkResponse(doc, 'GET', '/v1/proxy/GetQuote', 200, json, '{"symbol":"EURUSD","bid":1.1,"ask":1.2,"time":"2026-01-01T00:00:00.000","timeMsc":1}')).not.toThrow();
  });
});
