// The SDK's route list against a running gateway's route table: a route added to the server (or
// removed) without its SDK method fails here, naming it. Classic and gateway operations are also
// checked by the type checker (src/client/routes.ts is typed against the server's own tables).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sdkRoutes } from '../../src/client/routes.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

/** Server routes the SDK does not wrap, and why. */
const NOT_IN_SDK = new Map<string, string>([
  ['GET /healthz', 'operators and load balancers, not bots'],
  ['GET /readyz', 'operators and load balancers, not bots'],
  ['GET /metrics', 'Prometheus text for scrapers'],
  ['GET /openapi.json', 'the machine-readable API itself'],
  ['ANY /v1/proxy/:operation', 'the 404/405 catch-all of unknown gateway operations'],
  // /ConnectEx answers every method (SPEC §4.2 "any"); the SDK binds with POST.
  ['GET /ConnectEx', 'same operation as POST /ConnectEx'],
  ['PUT /ConnectEx', 'same operation as POST /ConnectEx'],
  ['PATCH /ConnectEx', 'same operation as POST /ConnectEx'],
  ['DELETE /ConnectEx', 'same operation as POST /ConnectEx'],
]);

let g: TestGateway;
beforeAll(async () => {
  g = await startTestGateway();
});
afterAll(async () => {
  await g?.stop();
});

describe('SDK route list', () => {
  it('has a method for every route of the server, and calls no route the server lacks', () => {
    const server = new Set(g.gw.routes.map((r) => `${r.method.toUpperCase()} ${r.path}`));
    const sdk = new Set(sdkRoutes().map((r) => `${r.method} ${r.path}`));
    const missing = [...server].filter((r) => !sdk.has(r) && !NOT_IN_SDK.has(r));
    const extra = [...sdk].filter((r) => !server.has(r));
    expect(missing, `server routes without an SDK method: add them to src/client/routes.ts and client.ts`).toEqual([]);
    expect(extra, 'SDK routes the server does not have').toEqual([]);
    const stale = [...NOT_IN_SDK.keys()].filter((r) => !server.has(r));
    expect(stale, 'NOT_IN_SDK names routes the server no longer has').toEqual([]);
  });
});
