// History ranges over real HTTP: the classic routes of one family treat `from`/`to` the same way.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mgmt, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { account, op, type Acct } from '../helpers/gateway-helpers.js';

let t: TestGateway;
let key: string;
let p5: string;
let g5: Acct;
const api = (path: string) => t.req('GET', path, { headers: { 'x-api-key': key } });

beforeAll(async () => {
  t = await startTestGateway({ seatBuildMs: 600_000 });
  key = (await t.req('POST', '/v1/keys', { headers: mgmt(t.managementKey), body: { label: 'time' } })).body.key;
  const a = await t.req('POST', '/ConnectEx', { headers: { 'x-api-key': key }, body: { user: 'time-p5', password: 'pw5', server: 'Sim-P5-Demo' } });
  expect(a.status).toBe(200);
  p5 = a.body.id;
  g5 = await account(t, 'P5');
}, 60_000);
afterAll(async () => {
  await t?.stop();
});

describe('classic history ranges', () => {
  it('/BalanceHistory refuses `to` before `from` (400 BAD_REQUEST), as /OrderHistory does', async () => {
    const range = '&from=2026-03-05T00:00:00Z&to=2026-03-04T00:00:00Z';
    const o = await api(`/OrderHistory?id=${p5}${range}`);
    expect(o.status, o.text).toBe(400);
    const b = await api(`/BalanceHistory?id=${p5}${range}`);
    expect(b.status, b.text).toBe(400);
    expect(b.body.error).toBe('BAD_REQUEST');
  });

  it('/BalanceHistory with from == to is the empty range [from, to), not an error', async () => {
    const b = await api(`/BalanceHistory?id=${p5}&from=2026-03-04T00:00:00Z&to=2026-03-04T00:00:00Z`);
    expect(b.status, b.text).toBe(200);
  });
});

describe('/v1 ISO 8601 zone offsets', () => {
  it('PriceHistoryV2 refuses an offset no clock has (+99:00, +02:60), as the classic routes do; +23:59 and -01:00 are read', async () => {
    const to = '2026-11-18T12:00:00Z';
    for (const from of ['2026-11-18T10:00:00+99:00', '2026-11-18T10:00:00+02:60', '2026-11-18T10:00:00+24:00']) {
      const r = await op(t, g5, 'PriceHistoryV2', { symbol: 'BTCUSD', from, to, timeFrame: 60 });
      expect(r.status, `${from}: ${r.text.slice(0, 200)}`).toBe(400);
      expect(r.text).toContain('from');
      // The classic family refuses the same string.
      const c = await api(`/OrderHistory?id=${p5}&from=${encodeURIComponent(from)}`);
      expect(c.status, c.text).toBe(400);
    }
    for (const from of ['2026-11-18T10:00:00+23:59', '2026-11-18T10:00:00-01:00']) {
      const r = await op(t, g5, 'PriceHistoryV2', { symbol: 'BTCUSD', from, to, timeFrame: 60 });
      expect(r.status, `${from}: ${r.text.slice(0, 200)}`).not.toBe(400);
    }
  });
});
