// A quiet market: the heartbeat says `connected` while the symbol's lastQuoteAgeMs grows (SPEC §3,
// §6). The gateway runs on its own simulator servers file (SIM_SERVERS_FILE) with a symbol whose
// quote session closed 30 minutes ago (server clock) and stays closed for the next hour and a half,
// so the test does not depend on the time of day it runs at.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toServerTime } from '../../src/market/serverClock.js';
import { DEFAULT_CONFIG_PATH, loadSimConfig } from '../../src/sim/config.js';
import { MINUTES_PER_WEEK, minuteOfWeek } from '../../src/sim/sessions.js';
import { mgmt, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { mustOpen, type StreamClient } from '../helpers/stream-helpers.js';

const HB_MS = 250;
let t: TestGateway;
let id: string;
let key: string;
let c: StreamClient | undefined;
let dir: string;

/** Weekly sessions open all week except `closedMinutes` minutes of week (server clock). */
function weekWithout(closedMinutes: Set<number>): Array<Array<{ fromMin: number; toMin: number }>> {
  const days: Array<Array<{ fromMin: number; toMin: number }>> = [];
  for (let d = 0; d < 7; d++) {
    const windows: Array<{ fromMin: number; toMin: number }> = [];
    let from = -1;
    for (let m = 0; m <= 1440; m++) {
      const open = m < 1440 && !closedMinutes.has(d * 1440 + m);
      if (open && from < 0) from = m;
      if (!open && from >= 0) {
        windows.push({ fromMin: from, toMin: m });
        from = -1;
      }
    }
    days.push(windows);
  }
  return days;
}

beforeAll(async () => {
  const cfg = loadSimConfig(DEFAULT_CONFIG_PATH);
  const p5 = cfg.servers.find((s) => s.name === 'Sim-P5-Demo')!;
  const nowMin = minuteOfWeek(toServerTime(Date.now(), p5.timeZone));
  const closed = new Set<number>();
  for (let m = -30; m < 90; m++) closed.add((nowMin + m + MINUTES_PER_WEEK) % MINUTES_PER_WEEK);
  const btc = p5.symbols.find((s) => s.name === 'BTCUSD')!;
  p5.symbols.push({ ...btc, name: 'QUIETUSD', description: 'quote session closed around now', quoteSessions: weekWithout(closed), tradeSessions: weekWithout(closed) });
  dir = mkdtempSync(join(tmpdir(), 'tagw-quiet-'));
  const file = join(dir, 'servers.json');
  writeFileSync(file, JSON.stringify(cfg));
  t = await startTestGateway({ streamHeartbeatMs: HB_MS, simServersFile: file }, { dataDir: join(dir, 'data') });
  const h = mgmt(t.managementKey);
  const a = await t.req('POST', '/ConnectEx', { headers: h, body: { user: 'quiet-p5', password: 'pw', server: 'Sim-P5-Demo' } });
  expect(a.status).toBe(200);
  id = a.body.id;
  key = (await t.req('POST', '/v1/keys', { headers: h, body: { label: 'quiet' } })).body.key;
});
afterAll(async () => {
  await c?.close();
  await t?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('a quiet market', () => {
  it('the servers file is the one the gateway runs: the extra symbol is listed and out of its quote session', async () => {
    const r = await t.req('GET', `/IsQuoteSession?id=${id}&symbol=QUIETUSD`, { headers: { 'x-api-key': key } });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ symbol: 'QUIETUSD', open: false });
  });

  it('heartbeats show connected with a growing lastQuoteAgeMs and an unchanged last tick', async () => {
    c = await mustOpen(t.url, { apiKey: key, id });
    c.send({ action: 'subscribe', symbol: 'QUIETUSD' });
    await c.next('SUBSCRIBED', 0);
    const beats = await c.until((x) => {
      const hb = x.of('HEARTBEAT').filter((f) => f.data.symbols.length === 1);
      return hb.length >= 3 ? hb : undefined;
    }, 8_000, 'three heartbeats');
    const [a, b] = [beats[1]!, beats[2]!];
    expect(a.data.connection).toBe('connected');
    expect(b.data.connection).toBe('connected');
    const sa = a.data.symbols[0];
    const sb = b.data.symbols[0];
    expect(sa.symbol).toBe('QUIETUSD');
    // The last quote before the session closed (the subscribe fetched it), at least 30 minutes old.
    expect(sa.lastTickTimeMscUtc).not.toBeNull();
    expect(sa.lastQuoteAgeMs).toBeGreaterThanOrEqual(30 * 60_000 - 1_000);
    expect(sb.lastTickTimeMscUtc).toBe(sa.lastTickTimeMscUtc);
    expect(sb.lastQuoteAgeMs).toBe(sa.lastQuoteAgeMs + (b.data.timeMscUtc - a.data.timeMscUtc));
    expect(sb.lastQuoteAgeMs).toBeGreaterThan(sa.lastQuoteAgeMs);
    // A subscriber is given the last known quote at once; nothing newer follows.
    const quotes = c.of('QUOTE').filter((f) => f.data.symbol === 'QUIETUSD');
    expect(quotes.length).toBeLessThanOrEqual(1);
    for (const q of quotes) expect(q.data.timeMscUtc).toBe(sa.lastTickTimeMscUtc);
  });
});
