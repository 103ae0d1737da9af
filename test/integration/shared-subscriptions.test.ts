// One account, two consumers of the same symbol: a /v1/stream socket and a gateway session.
// Letting go on one side must not stop the other's quotes (the broker subscription is held per owner).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mgmt, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { mustOpen } from '../helpers/stream-helpers.js';

let t: TestGateway;
let key: string;
let account: string;
let handle: string;

beforeAll(async () => {
  t = await startTestGateway();
  key = (await t.req('POST', '/v1/keys', { headers: mgmt(t.managementKey), body: { label: 'k' } })).body.key;
  account = (await t.req('POST', '/ConnectEx', { headers: { 'x-api-key': key }, body: { user: 'sharer', password: 'pw', server: 'Sim-P5-Demo' } })).body.id;
  handle = (await t.req('POST', '/v1/connect', { headers: { 'x-api-key': key }, body: { brokerAccountId: account } })).body.handle;
});
afterAll(async () => {
  await t.stop();
});

const proxy = (op: string, q: string) => t.req('GET', `/v1/proxy/${op}?handle=${handle}&${q}`, { headers: { 'x-api-key': key } });

describe('broker subscriptions shared by /v1/stream and gateway sessions', () => {
  it('a gateway unsubscribe leaves the stream socket its quotes', async () => {
    const ws = await mustOpen(t.url, { apiKey: key, id: account, heartbeat: '0' });
    try {
      ws.send({ action: 'subscribe', symbol: 'BTCUSD' });
      await ws.next('QUOTE');
      expect((await proxy('Subscribe', 'symbol=BTCUSD&interval=0')).status).toBe(200);
      expect((await proxy('UnSubscribe', 'symbol=BTCUSD')).status).toBe(200);
      // Quotes keep arriving on the stream after the gateway let go: wait for two more (ticks come at
      // random times, so a fixed window could hold fewer; `until` fails the test if they never come).
      const mark = ws.frames.length;
      const later = await ws.until((x) => {
        const q = x.frames.slice(mark).filter((f) => f.type === 'QUOTE');
        return q.length >= 2 ? q : undefined;
      }, 10_000, 'two more quotes after the gateway unsubscribed');
      expect(later.length).toBeGreaterThanOrEqual(2);
    } finally {
      ws.ws.close();
    }
  });

  it('a stream unsubscribe leaves the gateway session its quotes on /ws', async () => {
    expect((await proxy('Subscribe', 'symbol=BTCUSD&interval=0')).status).toBe(200);
    const { default: WebSocket } = await import('ws');
    const gws = new WebSocket(`${t.url.replace('http', 'ws')}/ws?handle=${handle}`, { headers: { 'x-api-key': key } });
    const frames: Array<{ type: string }> = [];
    gws.on('message', (m) => frames.push(JSON.parse(String(m)) as { type: string }));
    await new Promise((r, j) => (gws.once('open', r), gws.once('error', j)));
    const ws = await mustOpen(t.url, { apiKey: key, id: account, heartbeat: '0' });
    try {
      ws.send({ action: 'subscribe', symbol: 'BTCUSD' });
      await ws.next('QUOTE');
      ws.send({ action: 'unsubscribe', symbol: 'BTCUSD' });
      await ws.next('UNSUBSCRIBED');
      // The gateway socket keeps getting quotes: two more after the stream let go (polled, not a fixed window).
      const before = frames.filter((f) => f.type === 'QUOTE').length;
      const deadline = Date.now() + 10_000;
      while (frames.filter((f) => f.type === 'QUOTE').length < before + 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      expect(frames.filter((f) => f.type === 'QUOTE').length).toBeGreaterThanOrEqual(before + 2);
    } finally {
      ws.ws.close();
      gws.close();
    }
  });
});
