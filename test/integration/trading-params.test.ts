// Unknown parameters on trading routes (issue 14 item 2): a misspelt `stopLoss=` used to answer 200
// and open a position without its stop-loss. Every route that trades refuses a parameter it does not
// take (400 INVALID_PARAMETER naming it, nothing sent); read routes stay lenient; `comment` has a
// length limit. Real gateway, real sockets.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { COMMENT_MAX } from '../../src/http/schemas.js';
import { mgmt, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { account, op, type Acct } from '../helpers/gateway-helpers.js';

let t: TestGateway;
let key: string;
let id: string;
let gw5: Acct;
const api = (path: string) => t.req('GET', path, { headers: { 'x-api-key': key } });
const opened = async () => (await api(`/OpenedOrders?id=${id}`)).body as Array<{ ticket: number; sl: number; tp: number; comment: string }>;

beforeAll(async () => {
  t = await startTestGateway();
  key = (await t.req('POST', '/v1/keys', { headers: mgmt(t.managementKey), body: { label: 'bot' } })).body.key;
  const c = await t.req('POST', '/ConnectEx', { headers: { 'x-api-key': key }, body: { user: 'params-p5', password: 'pw', server: 'Sim-P5-Demo' } });
  expect(c.status, c.text).toBe(200);
  id = c.body.id;
  gw5 = await account(t, 'P5');
}, 60_000);
afterAll(async () => {
  await t?.stop();
});

describe('classic trading routes refuse parameters they do not take', () => {
  it('/OrderSend with stopLoss/takeProfit (for stoploss/takeprofit) is 400 INVALID_PARAMETER naming them, and opens nothing', async () => {
    const q = (await api(`/GetQuote?id=${id}&symbol=BTCUSD&cached=0`)).body as { bid: number; ask: number };
    const sl = Math.round(q.bid * 0.9);
    const tp = Math.round(q.ask * 1.1);
    const r = await api(`/OrderSend?id=${id}&symbol=BTCUSD&operation=Buy&volume=0.01&stopLoss=${sl}&takeProfit=${tp}&clientOrderId=misspelt-1`);
    expect(r.status, r.text).toBe(400);
    expect(r.body).toMatchObject({ error: 'INVALID_PARAMETER', parameters: ['stopLoss', 'takeProfit'] });
    expect(r.body.message).toContain("unknown parameter 'stopLoss' (did you mean 'stoploss'?)");
    expect(r.body.message).toContain("unknown parameter 'takeProfit' (did you mean 'takeprofit'?)");
    expect(await opened()).toEqual([]);
    // The id was not claimed: the corrected order may use it, and gets its stop-loss.
    const ok = await api(`/OrderSend?id=${id}&symbol=BTCUSD&operation=Buy&volume=0.01&stoploss=${sl}&takeprofit=${tp}&clientOrderId=misspelt-1`);
    expect(ok.status, ok.text).toBe(200);
    expect((await opened()).map((p) => [p.sl, p.tp])).toEqual([[sl, tp]]);
  });

  it('/OrderModify with stopLoss is 400 and changes nothing', async () => {
    const [pos] = await opened();
    const r = await api(`/OrderModify?id=${id}&ticket=${pos!.ticket}&stopLoss=1`);
    expect(r.status, r.text).toBe(400);
    expect(r.body).toMatchObject({ error: 'INVALID_PARAMETER', parameters: ['stopLoss'] });
    expect((await opened())[0]).toMatchObject({ sl: pos!.sl, tp: pos!.tp });
  });

  it('every route that trades answers 400 INVALID_PARAMETER to an unknown parameter', async () => {
    const trading = t.gw.routes.filter((r) => r.trading);
    expect(trading.map((r) => r.path).sort()).toEqual(['/OrderClose', '/OrderCloseBy', '/OrderDelete', '/OrderModify', '/OrderSend']);
    const valid: Record<string, string> = {
      '/OrderSend': 'symbol=BTCUSD&operation=Buy&volume=0.01', '/OrderModify': 'ticket=1&stoploss=1', '/OrderClose': 'ticket=1',
      '/OrderDelete': 'ticket=1', '/OrderCloseBy': 'ticket=1&byTicket=2',
    };
    for (const r of trading) {
      const res = await api(`${r.path}?id=${id}&${valid[r.path]}&bogus=1`);
      expect(res.status, `${r.path}: ${res.text}`).toBe(400);
      expect(res.body, r.path).toMatchObject({ error: 'INVALID_PARAMETER', parameters: ['bogus'] });
    }
    // The documented parameters and aliases are all still taken (lots for volume, stoplimit for stopLimitPrice).
    const lots = await api(`/OrderSend?id=${id}&symbol=BTCUSD&operation=Sell&lots=0.01&slippage=10&magic=7&comment=ok`);
    expect(lots.status, lots.text).toBe(200);
    expect((await opened()).length).toBe(2);
  });

  it('read routes stay lenient: an unknown parameter is ignored', async () => {
    const r = await api(`/AccountSummary?id=${id}&cacheBuster=123`);
    expect(r.status, r.text).toBe(200);
  });

  it(`comment: up to ${COMMENT_MAX} characters; longer is 400 naming it, nothing sent`, async () => {
    const before = (await opened()).length;
    const long = await api(`/OrderSend?id=${id}&symbol=BTCUSD&operation=Buy&volume=0.01&comment=${'x'.repeat(COMMENT_MAX + 1)}`);
    expect(long.status, long.text).toBe(400);
    expect(long.body.error).toBe('BAD_REQUEST');
    expect(long.body.message).toContain("'comment'");
    expect(long.body.message).toContain(`at most ${COMMENT_MAX}`);
    expect((await opened()).length).toBe(before);
    const max = await api(`/OrderSend?id=${id}&symbol=BTCUSD&operation=Buy&volume=0.01&comment=${'y'.repeat(COMMENT_MAX)}`);
    expect(max.status, max.text).toBe(200);
    expect((await opened()).some((p) => p.comment === 'y'.repeat(COMMENT_MAX))).toBe(true);
    const [pos] = await opened();
    const close = await api(`/OrderClose?id=${id}&ticket=${pos!.ticket}&comment=${'z'.repeat(COMMENT_MAX + 1)}`);
    expect(close.status).toBe(400);
    expect(close.body.message).toContain("'comment'");
  });
});

describe('/v1/proxy operations use the same rule', () => {
  it('OrderSendSafe with stopLoss: 400 INVALID_PARAMETER with the suggestion; a long comment is 400', async () => {
    const r = await op(t, gw5, 'OrderSendSafe', { symbol: 'BTCUSD', operation: 0, volume: 0.01, stopLoss: 1 });
    expect(r.status, r.text).toBe(400);
    expect(r.body).toMatchObject({ error: 'INVALID_PARAMETER', parameters: ['stopLoss'], message: "unknown parameter 'stopLoss' (did you mean 'stoploss'?)" });
    const c = await op(t, gw5, 'OrderSendSafe', { symbol: 'BTCUSD', operation: 0, volume: 0.01, comment: 'c'.repeat(COMMENT_MAX + 1) });
    expect(c.status).toBe(400);
    expect(c.body.message).toContain("'comment'");
    expect((await op(t, gw5, 'OpenedOrdersTickets')).body).toEqual([]);
  });
});

describe('a required parameter or body field left out is said to be required', () => {
  it("names it as required with its type, not zod's 'Invalid input: expected number, received undefined'", async () => {
    const q = await op(t, gw5, 'OpenedOrder');
    expect(q.status).toBe(400);
    expect(q.body.message).toBe("parameter 'ticket': required (a number)");
    const classic = await api(`/OrderSend?id=${id}&symbol=BTCUSD&volume=0.01`);
    expect(classic.body.message).toBe("parameter 'operation': required (a string)");
    const body = await t.req('POST', '/v1/keys', { headers: mgmt(t.managementKey), body: {} });
    expect(body.body).toMatchObject({ error: 'BAD_REQUEST', message: "body field 'label': required (a string)" });
  });
});
