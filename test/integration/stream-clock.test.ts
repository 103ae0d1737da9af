// The stream edge reads time from the gateway's injected clock (src/util/clock.ts), not the system's:
// heartbeat times, quote ages in HEARTBEAT and QUOTE frames. The clock here stands still until the test
// moves it an hour on; the shards' market keeps real time, so quotes look an hour old afterwards.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock, mgmt, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { mustOpen, type StreamClient } from '../helpers/stream-helpers.js';

const HOUR = 3_600_000;
const clock = new ManualClock();
let t: TestGateway;
let c: StreamClient | undefined;

beforeAll(async () => {
  t = await startTestGateway({ streamHeartbeatMs: 100 }, { clock });
});
afterAll(async () => {
  await c?.close();
  await t?.stop();
});

describe('stream time from the injected clock', () => {
  it('heartbeats carry its time, and quote ages are measured on it', async () => {
    const h = mgmt(t.managementKey);
    const a = await t.req('POST', '/ConnectEx', { headers: h, body: { user: 'clock-p5', password: 'pw', server: 'Sim-P5-Demo' } });
    expect(a.status).toBe(200);
    const key = (await t.req('POST', '/v1/keys', { headers: h, body: { label: 'clock' } })).body.key as string;
    c = await mustOpen(t.url, { apiKey: key, id: a.body.id });
    c.send({ action: 'subscribe', symbol: 'BTCUSD' });
    await c.next('SUBSCRIBED', 0);
    const ticked = (x: StreamClient, after: number) => x.frames.slice(after).find((f) => f.type === 'HEARTBEAT' && f.data.symbols[0]?.lastTickTimeMscUtc != null);
    const before = await c.until((x) => ticked(x, 0), 10_000, 'a heartbeat with a tick');
    expect(before.data.timeMscUtc).toBe(clock.t);

    clock.advance(HOUR);
    const n = c.frames.length;
    const after = await c.until((x) => ticked(x, n), 10_000, 'a heartbeat after the clock moved');
    expect(after.data.timeMscUtc).toBe(clock.t);
    // The last tick is real time (seconds after the clock stood still), so about an hour old now.
    expect(after.data.symbols[0].lastQuoteAgeMs).toBeGreaterThan(HOUR - 60_000);
    const m = c.frames.length;
    const quote = await c.until((x) => x.frames.slice(m).find((f) => f.type === 'QUOTE'), 10_000, 'a QUOTE after the clock moved');
    expect(quote.data.ageMs).toBeGreaterThan(HOUR - 60_000);
  });
});
