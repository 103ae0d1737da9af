// /ws QUOTE `ageMs` is the quote's age when the frame is written (docs/gateway.md). With an
// `interval`, the quote pushed at the end of an interval is the latest one held back, and it was
// already that old: its ageMs tells so (it used to say how old it was when it arrived, ~0).
import { afterAll, beforeAll, expect, it } from 'vitest';
import { account, op, openWs } from '../helpers/gateway-helpers.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway();
});
afterAll(async () => {
  await t?.stop();
});

it('a quote held back by the interval says its age at the push, not at its arrival', async () => {
  const a = await account(t, 'P5');
  const c = await openWs(t, a.handle, a.key);
  // When each frame arrived here (the frame's own time + ageMs should be about that).
  const arrived: number[] = [];
  c.ws.on('message', () => arrived.push(Date.now()));
  // BTCUSD ticks about five times a second, around the clock (forex quotes stop at the weekend): the
  // quote pushed at each interval's end is typically 0-200 ms old by then (half-second intervals: most
  // hold a tick back, and 8 pushes take ~4 s).
  expect((await op(t, a, 'Subscribe', { symbol: 'BTCUSD', interval: 500 })).status).toBe(200);
  await c.waitFor(() => c.frames.filter((f) => f.type === 'QUOTE').length >= 8, 15_000);
  const gaps: number[] = [];
  c.frames.forEach((f, i) => {
    if (f.type === 'QUOTE') gaps.push(arrived[i]! - (f.data.timeMscUtc + f.data.ageMs));
  });
  // The first push is immediate; the rest come at interval ends. Written-to-arrived is loopback
  // delivery, a few ms (the median tolerates a stall of this busy machine).
  const later = gaps.slice(1).sort((x, y) => x - y);
  expect(later[later.length >> 1], JSON.stringify(gaps)).toBeLessThan(60);
  c.ws.close();
}, 30_000);
