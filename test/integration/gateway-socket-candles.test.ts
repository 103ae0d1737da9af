// /ws CANDLE frames: `partial` marks the bar that was already in progress when the subscription
// started (docs/gateway.md). A SubscribeOhlc after an UnsubscribeOhlc is a new subscription: the
// bar it joins mid-way is partial too, whatever an earlier subscription of the same key saw.
// Bars follow the simulator's clock: the shards run it a few seconds before an M1 bar boundary
// (SHARD_CLOCK_OFFSET_MS), so the test waits seconds for the next bar, not up to a minute.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { account, op, openWs } from '../helpers/gateway-helpers.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

/** The simulator's clock: this much ahead of the system clock, so it starts LEAD_MS before a minute.
 *  The test waits out LEAD_MS + 2 s less its setup (gateway, account, socket, first CANDLE: 0.7 s on a
 *  quiet machine). Setup longer than LEAD_MS costs a minute (the next bar), not a failure. */
const LEAD_MS = 6_000;
const offsetMs = ((60_000 - (Date.now() % 60_000) - LEAD_MS) % 60_000 + 60_000) % 60_000;
const simNow = () => Date.now() + offsetMs;

let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway({ shardClockOffsetMs: offsetMs });
});
afterAll(async () => {
  await t?.stop();
});

it('a SubscribeOhlc after an UnsubscribeOhlc marks the bar it joins mid-way partial:true', async () => {
  const a = await account(t, 'P5');
  const c = await openWs(t, a.handle, a.key);
  expect((await op(t, a, 'SubscribeOhlc', { symbol: 'BTCUSD', timeframe: 1 })).status).toBe(200);
  const first = await c.waitFor((f) => f.type === 'CANDLE');
  expect(first.data.partial).toBe(true);
  expect((await op(t, a, 'UnsubscribeOhlc', { symbol: 'BTCUSD', timeframe: 1 })).status).toBe(200);

  // Into the next bar by 2 s: BTCUSD ticks several times a second, so that bar has begun without us.
  const joinAt = (first.data.timeUtc + 60) * 1000 + 2_000;
  await new Promise((r) => setTimeout(r, Math.max(0, joinAt - simNow())));
  const n = c.frames.length;
  expect((await op(t, a, 'SubscribeOhlc', { symbol: 'BTCUSD', timeframe: 1 })).status).toBe(200);
  const again = await c.waitFor((f) => c.frames.indexOf(f) >= n && f.type === 'CANDLE' && f.data.timeUtc > first.data.timeUtc);
  expect(again.data.ticks).toBeGreaterThan(1);
  expect(again.data.partial).toBe(true);
  c.ws.close();
}, 90_000);
