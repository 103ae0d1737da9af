// The gateway socket /ws re-checks its API key as /v1/stream does: revoking the key closes it.
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SOCKET_CLOSE } from '../../src/stream/closeCodes.js';
import { mgmt, startTestGateway, type TestGateway } from '../helpers/gateway.js';

let t: TestGateway;

beforeAll(async () => {
  t = await startTestGateway({ streamKeyCheckMs: 100 });
});
afterAll(async () => {
  await t.stop();
});

async function openWs(handle: string, key: string): Promise<{ ws: WebSocket; closed: Promise<number> }> {
  const ws = new WebSocket(`${t.url.replace('http', 'ws')}/ws?handle=${handle}`, { headers: { 'x-api-key': key } });
  const closed = new Promise<number>((r) => ws.once('close', (code) => r(code)));
  await new Promise((r, j) => (ws.once('open', r), ws.once('error', j)));
  return { ws, closed };
}

describe('/ws and key revocation', () => {
  it('a socket opened with a key that is revoked closes with 4001; one of another key stays open', async () => {
    const h = mgmt(t.managementKey);
    const doomed = (await t.req('POST', '/v1/keys', { headers: h, body: { label: 'doomed' } })).body;
    const keeper = (await t.req('POST', '/v1/keys', { headers: h, body: { label: 'keeper' } })).body.key;
    const id = (await t.req('POST', '/ConnectEx', { headers: { 'x-api-key': keeper }, body: { user: 'ws-revoke', password: 'pw', server: 'Sim-P5-Demo' } })).body.id;
    const handle = (await t.req('POST', '/v1/connect', { headers: { 'x-api-key': keeper }, body: { brokerAccountId: id } })).body.handle;
    const a = await openWs(handle, doomed.key);
    const b = await openWs(handle, keeper);
    expect((await t.req('DELETE', `/v1/keys/${doomed.id}`, { headers: h })).status).toBe(200);
    const code = await Promise.race([a.closed, new Promise<number>((r) => setTimeout(() => r(-1), 5_000))]);
    expect(code).toBe(SOCKET_CLOSE.KEY_REVOKED.code);
    await new Promise((r) => setTimeout(r, 300));
    expect(b.ws.readyState).toBe(WebSocket.OPEN);
    b.ws.close();
  });
});
