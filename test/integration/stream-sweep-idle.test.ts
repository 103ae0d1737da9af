// The backpressure sweeps of /v1/stream and /ws run only while something streams (issue 19: an
// idle node is not woken every streamSweepMs): not armed with connected accounts and no sockets,
// armed by a socket (or a publish, on /ws), and disarmed again once nothing is left to check.
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { handleHash } from '../../src/http/routes/gateway.js';
import { GATEWAY_EVENT } from '../../src/runtime/hosts/gatewayCommands.js';
import { mgmt, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { mustOpen } from '../helpers/stream-helpers.js';
import { until } from '../helpers/until.js';

let t: TestGateway;
let id: string;
let key: string;

beforeAll(async () => {
  // A short hold after the last socket, so the account's stream state leaves within the test.
  t = await startTestGateway({ streamSweepMs: 5, streamHistoryMaxAgeMs: 200 });
  const h = mgmt(t.managementKey);
  key = (await t.req('POST', '/v1/keys', { headers: h, body: { label: 'sweep' } })).body.key;
  id = (await t.req('POST', '/ConnectEx', { headers: { 'x-api-key': key }, body: { user: 'sweep-idle', password: 'pw', server: 'Sim-P5-Demo' } })).body.id;
});
afterAll(async () => {
  await t?.stop();
});

describe('backpressure sweeps on demand', () => {
  it('/v1/stream: idle with a connected account, armed while a socket streams, idle again after', async () => {
    expect(t.gw.stream.sweeping).toBe(false);
    const c = await mustOpen(t.url, { id, apiKey: key, heartbeat: '0' });
    expect(t.gw.stream.sweeping).toBe(true);
    c.send({ action: 'subscribe', symbol: 'BTCUSD' });
    await c.next('SUBSCRIBED', 0);
    expect(t.gw.stream.sweeping).toBe(true);
    await c.close();
    await until(() => t.gw.stream.stats().accounts === 0, 'the account stream released after its hold');
    await until(() => !t.gw.stream.sweeping, 'the sweep disarmed');
  });

  it('/ws: a publish arms the check, which disarms once it ran', async () => {
    const gs = t.gw.gatewaySocket;
    expect(gs.sweeping).toBe(false);
    const handle = (await t.req('POST', '/v1/connect', { headers: { 'x-api-key': key }, body: { brokerAccountId: id } })).body.handle as string;
    const ws = new WebSocket(`${t.url.replace('http', 'ws')}/ws?handle=${handle}`, { headers: { 'x-api-key': key } });
    await new Promise((r, j) => (ws.once('open', r), ws.once('error', j)));
    const got = new Promise<string>((r) => ws.once('message', (m) => r(String(m))));
    gs.onShardEvent({ kind: GATEWAY_EVENT.frame, key: handleHash(handle), data: { type: 'QUOTE', json: '{"symbol":"X"}' } });
    expect(gs.sweeping).toBe(true);
    expect(JSON.parse(await got)).toEqual({ type: 'QUOTE', data: { symbol: 'X' } });
    await until(() => !gs.sweeping, 'the /ws check disarmed after it ran');
    ws.close();
  });
});
