// SIM_START and /v1/stream HEARTBEATs (docs/simulator.md, "Starting the market at a fixed instant"):
// a heartbeat's lastQuoteAgeMs is measured on the market's clock, as a QUOTE's ageMs is. Before, it was
// the gateway's wall clock minus the tick's market time: with SIM_START 73 days back every quote looked
// 73 days old (found benchmarking a bot: 853,900,433 ms with SIM_START=2026-11-18T12:00:00Z on the 28th),
// and a bot watching it for a stale feed (a `mute`) could not tell a live feed from a dead one.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { mustOpen, type StreamClient } from '../helpers/stream-helpers.js';
import { keyAndAccount } from '../helpers/simStart.js';

const START = '2026-09-16T12:00:00.000Z'; // a Wednesday: forex open, 73 days before this file was written

let t: TestGateway;
let c: StreamClient | undefined;

beforeAll(async () => {
  t = await startTestGateway({ simStart: START, streamHeartbeatMs: 100 });
}, 60_000);
afterAll(async () => {
  await c?.close();
  await t?.stop();
});

describe('HEARTBEAT under SIM_START', () => {
  it("lastQuoteAgeMs is the quote's age on the market clock, not the offset to the wall clock", async () => {
    const { key, id } = await keyAndAccount(t, 'hb');
    c = await mustOpen(t.url, { apiKey: key, id });
    c.send({ action: 'subscribe', symbol: 'BTCUSD' });
    const hb = await c.until((x) => x.frames.find((f) => f.type === 'HEARTBEAT' && f.data.symbols[0]?.lastTickTimeMscUtc != null), 10_000, 'a heartbeat with a tick');
    const sym = hb.data.symbols[0];
    expect(sym.lastTickTimeMscUtc).toBeGreaterThanOrEqual(Date.parse(START));
    // BTCUSD ticks 4 times a second: its last quote is well under 10 s old (before: ~73 days).
    expect(sym.lastQuoteAgeMs).toBeGreaterThanOrEqual(0);
    expect(sym.lastQuoteAgeMs).toBeLessThan(10_000);
    // The heartbeat's own time is the gateway's clock (docs: the gateway's own timing keeps the real clock).
    expect(Math.abs(hb.data.timeMscUtc - Date.now())).toBeLessThan(60_000);
  });
});
