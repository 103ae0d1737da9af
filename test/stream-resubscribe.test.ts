// Subscribing again to a symbol whose topic sat without subscribers (the shard stopped sending its
// ticks meanwhile): the quote sent after SUBSCRIBED is the current one with its true age, not the
// frame cached when the topic was last live (old tick, ageMs of back then).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mgmt, startTestGateway, type TestGateway } from './helpers/gateway.js';
import { mustOpen } from './stream-helpers.js';

let t: TestGateway;
let key: string;
let id: string;

beforeAll(async () => {
  t = await startTestGateway();
  const h = mgmt(t.managementKey);
  id = (await t.req('POST', '/ConnectEx', { headers: h, body: { user: 'resub', password: 'pw', server: 'Sim-P5-Demo' } })).body.id;
  key = (await t.req('POST', '/v1/keys', { headers: h, body: { label: 'k' } })).body.key;
});
afterAll(async () => {
  await t.stop();
});

describe('subscribing again after a pause', () => {
  it('sends the current quote with its true ageMs', async () => {
    const c = await mustOpen(t.url, { apiKey: key, id, heartbeat: '0' });
    try {
      c.send({ action: 'subscribe', symbol: 'BTCUSD' });
      await c.until((x) => x.of('QUOTE').length >= 2, 10_000, 'quotes');
      c.send({ action: 'unsubscribe', symbol: 'BTCUSD' });
      await c.next('UNSUBSCRIBED');
      await new Promise((r) => setTimeout(r, 1_500)); // BTCUSD ticks ~5/s: many ticks nobody here saw
      const resubAt = Date.now();
      const n = c.frames.length;
      c.send({ action: 'subscribe', symbol: 'BTCUSD' });
      const q = await c.next('QUOTE', n);
      expect(c.frames.slice(n).findIndex((f) => f.type === 'SUBSCRIBED')).toBeLessThan(c.frames.slice(n).indexOf(q));
      // A tick from around now, not from before the pause, and an age that says so.
      expect(q.data.timeMscUtc).toBeGreaterThan(resubAt - 1_000);
      expect(q.data.ageMs).toBeLessThan(1_000);
    } finally {
      await c.close();
    }
  });
});
