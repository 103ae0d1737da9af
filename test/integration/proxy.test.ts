// Every operation of SPEC §4.4 on a P5 session and of §4.5 on a P4 session, over real HTTP, with
// valid and invalid parameters. Trades use BTCUSD, which the simulator quotes around the clock.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { account, apiKey, op, serverTime, type Acct } from '../helpers/gateway-helpers.js';

let t: TestGateway;
let p5: Acct;
let p4: Acct;
beforeAll(async () => {
  t = await startTestGateway();
  [p5, p4] = await Promise.all([account(t, 'P5'), account(t, 'P4')]);
});
afterAll(async () => {
  await t?.stop();
});

const HOUR = 3_600_000;
/** Offset of the simulator's servers from UTC now: both run UTC+2 standard time, +3 in their DST. */
async function offsetOf(a: Acct): Promise<number> {
  const q = await op(t, a, a === p5 ? 'GetQuote' : 'Quote', { symbol: 'BTCUSD' });
  return Math.round((q.body.timeMsc - Date.now()) / HOUR);
}

async function bad(a: Acct, name: string, query: Record<string, string | number | boolean | string[]>, field?: string) {
  const r = await op(t, a, name, query);
  expect(r.status, `${name} ${JSON.stringify(query)} -> ${r.text}`).toBe(400);
  // A parameter the operation does not take is INVALID_PARAMETER; a bad value of one it takes, BAD_REQUEST.
  expect(r.body.error).toBe(/^unknown parameter/.test(r.body.message) ? 'INVALID_PARAMETER' : 'BAD_REQUEST');
  if (field) expect(r.body.message).toContain(field);
}

describe('P5 operations (§4.4)', () => {
  it('connection operations', async () => {
    expect((await op(t, p5, 'CheckConnect')).body).toMatchObject({ connected: true, phase: 'connected', platform: 'P5' });
    expect((await op(t, p5, 'ConnectionStatus')).body).toMatchObject({ connected: true });
    await bad(p5, 'CheckConnect', { extra: 1 }, 'extra');
  });

  it('account operations; /Account has the personal profile, AccountDetails not', async () => {
    const acc = await op(t, p5, 'Account');
    expect(acc.status).toBe(200);
    expect(acc.body).toHaveProperty('email');
    const det = await op(t, p5, 'AccountDetails');
    expect(det.body).toMatchObject({ platform: 'P5', server: 'Sim-P5-Demo' });
    expect(det.body).not.toHaveProperty('email');
    const sum = await op(t, p5, 'AccountSummary');
    expect(sum.body).toMatchObject({ balance: expect.any(Number), equity: expect.any(Number), synced: true });
  });

  it('symbols', async () => {
    const list = await op(t, p5, 'SymbolList');
    expect(list.body).toContain('BTCUSD');
    const all = await op(t, p5, 'Symbols');
    expect(all.body.length).toBe(list.body.length);
    expect(all.body[0]).toHaveProperty('digits');
    const one = await op(t, p5, 'SymbolParams', { symbol: 'XAUUSD' });
    expect(one.body.symbolInfo).toMatchObject({ name: 'XAUUSD', stopsLevel: 20, limitPoints: 20, freezeLevel: 10 });
    await bad(p5, 'SymbolParams', {}, 'symbol');
    await bad(p5, 'SymbolParams', { symbol: 'NOPE' }, 'NOPE');
    const many = await op(t, p5, 'SymbolParamsMany', { symbols: ['EURUSD', 'BTCUSD'], filter: 'digits,stopsLevel' });
    expect(many.body).toEqual([
      { name: 'EURUSD', digits: 5, stopsLevel: expect.any(Number) },
      { name: 'BTCUSD', digits: 2, stopsLevel: 1000 },
    ]);
    expect((await op(t, p5, 'SymbolParamsMany', { symbol: 'EURUSD,USDJPY' })).body.map((s: { name: string }) => s.name)).toEqual(['EURUSD', 'USDJPY']);
    const over = await op(t, p5, 'SymbolParamsMany', { limit: 2 });
    expect(over.status).toBe(400);
    expect(over.body).toMatchObject({ limit: 2, count: list.body.length });
    expect((await op(t, p5, 'SymbolParamsMany', { limit: 100 })).body.length).toBe(list.body.length);
    await bad(p5, 'SymbolParamsMany', { filter: 'nope' }, 'filter');
    await bad(p5, 'SymbolParamsMany', { limit: 0 }, 'limit');
  });

  it('quotes in broker server time; msNotOlder waits for a newer tick', async () => {
    const q = await op(t, p5, 'GetQuote', { symbol: 'BTCUSD' });
    expect(q.body).toMatchObject({ symbol: 'BTCUSD', bid: expect.any(Number), ask: expect.any(Number) });
    expect([2, 3]).toContain(await offsetOf(p5));
    expect(q.body.time).toBe(new Date(q.body.timeMsc).toISOString().slice(0, 23));
    const fresh = await op(t, p5, 'GetQuote', { symbol: 'BTCUSD', msNotOlder: 1 });
    expect(fresh.status).toBe(200);
    expect(fresh.body.timeMsc).toBeGreaterThan(q.body.timeMsc);
    await bad(p5, 'GetQuote', { symbol: 'BTCUSD', msNotOlder: -1 }, 'msNotOlder');
    await bad(p5, 'GetQuote', { symbol: 'BTCUSD', msNotOlder: 'soon' }, 'msNotOlder');
    const many = await op(t, p5, 'GetQuoteMany', { symbols: ['BTCUSD', 'XAUUSD'] });
    expect(many.body.map((x: { symbol: string }) => x.symbol)).toEqual(['BTCUSD', 'XAUUSD']);
    await bad(p5, 'GetQuoteMany', {}, 'symbols');
    const mw = await op(t, p5, 'MarketWatchMany', { symbols: 'BTCUSD' });
    expect(mw.body[0]).toMatchObject({ symbol: 'BTCUSD', digits: 2, spread: expect.any(Number) });
    await bad(p5, 'MarketWatchMany', {}, 'symbols');
  });

  it('RequiredMargin is validated by the gateway', async () => {
    const m = await op(t, p5, 'RequiredMargin', { symbol: 'BTCUSD', lots: 0.1, type: 'Buy' });
    expect(m.body).toMatchObject({ symbol: 'BTCUSD', margin: expect.any(Number), currency: 'USD' });
    expect(m.body.margin).toBeGreaterThan(0);
    expect((await op(t, p5, 'RequiredMargin', { symbol: 'BTCUSD', lots: 0.1, type: 1 })).status).toBe(200);
    await bad(p5, 'RequiredMargin', { symbol: 'BTCUSD', lots: 0 }, 'lots');
    await bad(p5, 'RequiredMargin', { symbol: 'BTCUSD', lots: 0.1, type: 'Hold' }, 'type');
    await bad(p5, 'RequiredMargin', { symbol: 'BTCUSD', lots: 0.1, price: -3 }, 'price');
    await bad(p5, 'RequiredMargin', { lots: 0.1 }, 'symbol');
    await bad(p5, 'RequiredMargin', { symbol: 'BTCUSD', lots: 0.015 }, 'step');
  });

  it('trading: OrderSendSafe (codes, stop-limit), OrderModifySafe, OrderCloseSafe, opened/closed orders, history', async () => {
    const q = (await op(t, p5, 'GetQuote', { symbol: 'BTCUSD' })).body;
    // invalid orders never reach the broker
    await bad(p5, 'OrderSendSafe', { symbol: 'BTCUSD', operation: 9, volume: 0.01 }, 'operation');
    await bad(p5, 'OrderSendSafe', { symbol: 'BTCUSD', operation: 'Buy', volume: 0.01 }, 'operation');
    await bad(p5, 'OrderSendSafe', { symbol: 'BTCUSD', operation: 2, volume: 0.01 }, 'price');
    // price=0 is MT's "no price": absent for a market order (below), still missing for a pending one.
    await bad(p5, 'OrderSendSafe', { symbol: 'BTCUSD', operation: 2, volume: 0.01, price: 0 }, 'price');
    await bad(p5, 'OrderSendSafe', { symbol: 'BTCUSD', operation: 0, volume: 0.01, price: -1 }, 'price');
    await bad(p5, 'OrderSendSafe', { symbol: 'BTCUSD', operation: 0, volume: -1 }, 'volume');
    await bad(p5, 'OrderSendSafe', { symbol: 'BTCUSD', operation: 6, volume: 0.01, price: q.ask * 1.05 }, 'stopLimitPrice');
    await bad(p5, 'OrderSendSafe', { symbol: 'BTCUSD', operation: 6, volume: 0.01, price: q.ask * 1.05, stopLimitPrice: q.ask * 1.06 }, 'stopLimitPrice');
    await bad(p5, 'OrderSendSafe', { symbol: 'BTCUSD', operation: 0, volume: 0.01, stopLimitPrice: 1 }, 'stopLimitPrice');
    await bad(p5, 'OrderSendSafe', { symbol: 'BTCUSD', operation: 2, volume: 0.01, price: q.bid * 0.9, stoploss: q.bid }, 'stoploss');
    await bad(p5, 'OrderSendSafe', { symbol: 'BTCUSD', operation: 0, volume: 0.01, stopLoss: 1 }, 'stopLoss');
    await bad(p5, 'OrderSendSafe', { symbol: 'NOPE', operation: 0, volume: 0.01 }, 'NOPE');
    expect((await op(t, p5, 'OpenedOrdersTickets')).body).toEqual([]);

    const buy = await op(t, p5, 'OrderSendSafe', { symbol: 'BTCUSD', operation: 0, volume: 0.01, price: 0, comment: 'gw-test' });
    expect(buy.status, buy.text).toBe(200);
    expect(buy.body).toMatchObject({ ticket: expect.any(Number), state: expect.any(String), symbol: 'BTCUSD', type: 'Buy' });
    const ticket = buy.body.ticket as number;
    const stopLimit = await op(t, p5, 'OrderSendSafe', {
      symbol: 'BTCUSD', operation: 6, volume: 0.01, price: Math.round(q.ask * 1.05), stopLimitPrice: Math.round(q.ask * 1.04),
    });
    expect(stopLimit.status, stopLimit.text).toBe(200);
    expect(stopLimit.body).toMatchObject({ type: 'BuyStopLimit', state: 'placed' });

    // expirationType, MT5's codes (0 good till cancelled, 1 the end of today, 2 the time given, 3 the end of
    // the day given, days on the server calendar): it was taken and dropped, so a DAY order never expired.
    const DAY = 86_400_000;
    const far = Math.round(q.bid * 0.5);
    const nextMidnight = (serverMs: number) => (Math.floor(serverMs / DAY) + 1) * DAY;
    const daily = await op(t, p5, 'OrderSendSafe', { symbol: 'BTCUSD', operation: 2, volume: 0.01, price: far, expirationType: 1 });
    expect(daily.status, daily.text).toBe(200);
    const serverNow = Date.now() + (await offsetOf(p5)) * HOUR;
    expect([nextMidnight(serverNow - 5_000), nextMidnight(serverNow)]).toContain(daily.body.expirationMsc);
    const dayOf = await op(t, p5, 'OrderSendSafe', { symbol: 'BTCUSD', operation: 2, volume: 0.01, price: far, expirationType: 3, expiration: '2030-01-01T10:30:00' });
    expect(dayOf.body.expiration, dayOf.text).toBe('2030-01-02T00:00:00.000');
    const gtc = await op(t, p5, 'OrderModifySafe', { ticket: dayOf.body.ticket, stoploss: 0, takeprofit: 0, expirationType: 0 });
    expect(gtc.status, gtc.text).toBe(200);
    expect(gtc.body.expiration).toBeUndefined();
    await bad(p5, 'OrderSendSafe', { symbol: 'BTCUSD', operation: 2, volume: 0.01, price: far, expirationType: 2 }, 'expiration');
    await bad(p5, 'OrderSendSafe', { symbol: 'BTCUSD', operation: 2, volume: 0.01, price: far, expirationType: 0, expiration: '2030-01-01T10:30:00' }, 'expirationType');
    await bad(p5, 'OrderSendSafe', { symbol: 'BTCUSD', operation: 0, volume: 0.01, expirationType: 1 }, 'expirationType');
    await bad(p5, 'OrderModifySafe', { ticket: dayOf.body.ticket, stoploss: 0, takeprofit: 0, expirationType: 3 }, 'expiration');
    for (const tk of [daily.body.ticket, dayOf.body.ticket]) expect((await op(t, p5, 'OrderCloseSafe', { ticket: tk })).status).toBe(200);

    const opened = await op(t, p5, 'OpenedOrders', { sort: 0, ascending: false });
    expect(opened.body.map((o: { ticket: number }) => o.ticket)).toEqual(expect.arrayContaining([ticket, stopLimit.body.ticket]));
    await bad(p5, 'OpenedOrders', { sort: 7 }, 'sort');
    const tickets = await op(t, p5, 'OpenedOrdersTickets');
    expect(tickets.body).toEqual(expect.arrayContaining([ticket, stopLimit.body.ticket]));
    const one = await op(t, p5, 'OpenedOrder', { ticket });
    expect(one.body).toMatchObject({ ticket, kind: 'position', openTime: expect.any(String) });
    await bad(p5, 'OpenedOrder', { ticket: 'abc' }, 'ticket');
    expect((await op(t, p5, 'OpenedOrder', { ticket: 999999999 })).status).toBe(400);

    const sl = Math.round(q.bid * 0.8);
    const mod = await op(t, p5, 'OrderModifySafe', { ticket, stoploss: sl, takeprofit: 0 });
    expect(mod.status, mod.text).toBe(200);
    expect((await op(t, p5, 'OpenedOrder', { ticket })).body.sl).toBe(sl);
    await bad(p5, 'OrderModifySafe', { ticket, takeprofit: 0 }, 'stoploss');

    await bad(p5, 'OrderCloseSafe', { ticket, lots: -1 }, 'lots');
    await bad(p5, 'OrderCloseSafe', { ticket, lots: 0.02 }, 'lots');
    const close = await op(t, p5, 'OrderCloseSafe', { ticket, price: 0 });
    expect(close.status, close.text).toBe(200);
    expect((await op(t, p5, 'OpenedOrdersTickets')).body).not.toContain(ticket);

    const closed = await op(t, p5, 'ClosedOrders');
    expect(closed.status).toBe(200);
    expect(closed.body.length).toBeLessThanOrEqual(100);
    expect(closed.body.some((o: { positionId: number }) => o.positionId === ticket)).toBe(true);

    const off = await offsetOf(p5);
    const hist = await op(t, p5, 'OrderHistory', { from: serverTime(Date.now() - HOUR, off), to: serverTime(Date.now() + 60_000, off), ascending: false });
    expect(hist.status, hist.text).toBe(200);
    expect(hist.body.deals.some((d: { position: number }) => d.position === ticket)).toBe(true);
    await bad(p5, 'OrderHistory', { from: 'yesterday', to: serverTime(Date.now(), off) }, 'from');
    await bad(p5, 'OrderHistory', { from: serverTime(Date.now(), off) }, 'to');
  });

  it('price and equity history', async () => {
    const off = await offsetOf(p5);
    const from = serverTime(Date.now() - 3 * HOUR, off);
    const to = serverTime(Date.now(), off);
    const h = await op(t, p5, 'PriceHistory', { symbol: 'BTCUSD', from, to, timeFrame: 60 });
    expect(h.status, h.text).toBe(200);
    expect(h.body.length).toBeGreaterThanOrEqual(2);
    expect(h.body[0]).toMatchObject({ open: expect.any(Number), high: expect.any(Number), low: expect.any(Number), close: expect.any(Number) });
    // Bars open on the hour of the server clock.
    expect(h.body[0].time).toMatch(/T\d{2}:00:00\.000$/);
    const v2 = await op(t, p5, 'PriceHistoryV2', { symbol: 'BTCUSD', from: new Date(Date.now() - 3 * HOUR).toISOString(), to: new Date().toISOString(), timeFrame: 60 });
    expect(v2.status, v2.text).toBe(200);
    expect(v2.body.map((b: { time: string }) => b.time)).toEqual(h.body.map((b: { time: string }) => b.time));
    await bad(p5, 'PriceHistory', { symbol: 'BTCUSD', from, to, timeFrame: 7 }, 'timeFrame');
    await bad(p5, 'PriceHistory', { symbol: 'BTCUSD', from, timeFrame: 60 }, 'to');
    await bad(p5, 'PriceHistoryV2', { symbol: 'BTCUSD', from: '2026-13-01T00:00:00Z', to, timeFrame: 60 }, 'from');
    await bad(p5, 'PriceHistory', { symbol: 'BTCUSD', from, to, timeFrame: 60, timeoutSeconds: 0 }, 'timeoutSeconds');
    const eq = await op(t, p5, 'EquityHistory', { from: serverTime(Date.now() - 2 * HOUR, off), excludeSameBars: true });
    expect(eq.status, eq.text).toBe(200);
    for (let i = 1; i < eq.body.length; i++) expect(eq.body[i].equity).not.toBe(eq.body[i - 1].equity);
    await bad(p5, 'EquityHistory', {}, 'from');
    await bad(p5, 'EquityHistory', { from, excludeSameBars: 'maybe' }, 'excludeSameBars');
  });

  it('subscription operations validate their parameters', async () => {
    expect((await op(t, p5, 'SubscribeMany', { symbols: 'BTCUSD', force: true, interval: 100 })).status).toBe(200);
    await bad(p5, 'SubscribeMany', { interval: 100 }, 'symbols');
    await bad(p5, 'SubscribeMany', { symbols: 'BTCUSD', replace: true }, 'replace');
    await bad(p5, 'SubscribeOhlc', { symbol: 'BTCUSD', timeframe: 7 }, 'timeframe');
    await bad(p5, 'SubscribeOrderBook', {}, 'symbols');
    await bad(p5, 'UnSubscribe', {}, 'symbol');
    // One symbol means one: a repeated symbol is refused (it used to subscribe the last one only).
    await bad(p5, 'Subscribe', { symbol: ['USDJPY', 'XAUUSD'] }, 'symbol');
    expect((await op(t, p5, 'Subscribe', { symbol: ['XAUUSD', 'XAUUSD'] })).status).toBe(200);
    expect((await op(t, p5, 'UnSubscribeMany')).status).toBe(200);
    expect((await op(t, p5, 'SubscribedSymbols')).body.quotes).toEqual([]);
  });

  it('P4 operations answer 404 naming the P5 one', async () => {
    for (const [name, alt] of [['OrderSend', 'OrderSendSafe'], ['Quote', 'GetQuote'], ['QuoteHistory', 'PriceHistoryV2'], ['OrderDelete', 'OrderCloseSafe']] as const) {
      const r = await op(t, p5, name, { symbol: 'BTCUSD' });
      expect(r.status).toBe(404);
      expect(r.body.error).toBe('OPERATION_NOT_ON_PLATFORM');
      expect(r.body.message).toContain(alt);
    }
  });
});

describe('P4 operations (§4.5)', () => {
  it('connection, account and symbol operations', async () => {
    expect((await op(t, p4, 'CheckConnect')).body).toMatchObject({ connected: true, platform: 'P4' });
    expect((await op(t, p4, 'ConnectionStatus')).status).toBe(200);
    expect((await op(t, p4, 'AccountSummary')).body).toHaveProperty('balance');
    expect((await op(t, p4, 'AccountDetails')).body).toMatchObject({ platform: 'P4', server: 'Sim-P4-Demo' });
    expect((await op(t, p4, 'SymbolList')).body).toContain('BTCUSD');
    expect((await op(t, p4, 'SymbolParams', { symbol: 'BTCUSD' })).body.symbolInfo.name).toBe('BTCUSD');
    expect((await op(t, p4, 'SymbolParamsMany', { symbols: 'BTCUSD,EURUSD' })).body).toHaveLength(2);
    await bad(p4, 'SymbolParamsMany', { limit: 2 }, 'limit'); // P5-only parameter
    expect((await op(t, p4, 'SubscribedSymbols')).status).toBe(200);
  });

  it('Quote and GetQuoteMany, in server time', async () => {
    const q = await op(t, p4, 'Quote', { symbol: 'BTCUSD', msNotOlder: 0 });
    expect(q.body).toMatchObject({ symbol: 'BTCUSD' });
    expect([2, 3]).toContain(await offsetOf(p4));
    expect((await op(t, p4, 'GetQuoteMany', { symbols: ['BTCUSD', 'XAUUSD'], msNotOlder: 1 })).body).toHaveLength(2);
    await bad(p4, 'Quote', {}, 'symbol');
  });

  it('RequiredMargin takes "Buy"/"Sell" only', async () => {
    expect((await op(t, p4, 'RequiredMargin', { symbol: 'BTCUSD', lots: 0.1, type: 'Sell' })).body.margin).toBeGreaterThan(0);
    await bad(p4, 'RequiredMargin', { symbol: 'BTCUSD', lots: 0.1, type: 1 }, 'type');
    await bad(p4, 'RequiredMargin', { symbol: 'BTCUSD' }, 'lots');
  });

  it('trading: OrderSend (names, magic), OrderModify, OrderClose, OrderDelete, history', async () => {
    const q = (await op(t, p4, 'Quote', { symbol: 'BTCUSD' })).body;
    await bad(p4, 'OrderSend', { symbol: 'BTCUSD', operation: 0, volume: 0.01 }, 'operation');
    await bad(p4, 'OrderSend', { symbol: 'BTCUSD', operation: 'BuyStopLimit', volume: 0.01, price: 1 }, 'operation');
    await bad(p4, 'OrderSend', { symbol: 'BTCUSD', operation: 'Buy', volume: 0.01, magic: -1 }, 'magic');
    await bad(p4, 'OrderSend', { symbol: 'BTCUSD', operation: 'SellLimit', volume: 0.01 }, 'price');
    await bad(p4, 'OrderSend', { symbol: 'BTCUSD', operation: 'Buy', volume: 0.01, stopLimitPrice: 5 }, 'stopLimitPrice');
    const buy = await op(t, p4, 'OrderSend', { symbol: 'BTCUSD', operation: 'Buy', volume: 0.01, magic: 4242, comment: 'p4' });
    expect(buy.status, buy.text).toBe(200);
    expect(buy.body).toMatchObject({ ticket: expect.any(Number), magic: 4242, expertId: 4242 });
    const ticket = buy.body.ticket as number;
    expect((await op(t, p4, 'OpenedOrder', { ticket })).body.ticket).toBe(ticket);
    await bad(p4, 'OpenedOrder', {}, 'ticket');
    expect((await op(t, p4, 'OpenedOrders')).body.map((o: { ticket: number }) => o.ticket)).toContain(ticket);
    await bad(p4, 'OpenedOrders', { sort: 0 }, 'sort'); // no sort on P4
    expect((await op(t, p4, 'OpenedOrdersTickets')).body).toContain(ticket);
    const tp = Math.round(q.ask * 1.2);
    expect((await op(t, p4, 'OrderModify', { ticket, stoploss: 0, takeprofit: tp })).status).toBe(200);
    await bad(p4, 'OrderModify', { ticket, stoploss: 0, takeprofit: tp, stoplimit: 3 }, 'stoplimit');
    const close = await op(t, p4, 'OrderClose', { ticket, slippage: 1000, price: 0 });
    expect(close.status, close.text).toBe(200);
    await bad(p4, 'OrderClose', { ticket, comment: 'x' }, 'comment'); // no comment on P4 OrderClose

    const limit = await op(t, p4, 'OrderSend', { symbol: 'BTCUSD', operation: 'BuyLimit', volume: 0.01, price: Math.round(q.bid * 0.7) });
    expect(limit.status, limit.text).toBe(200);
    expect(limit.body.state).toBe('placed');
    const del = await op(t, p4, 'OrderDelete', { ticket: limit.body.ticket });
    expect(del.status, del.text).toBe(200);
    await bad(p4, 'OrderDelete', { ticket: 0 }, 'ticket');
    const again = await op(t, p4, 'OrderDelete', { ticket: limit.body.ticket });
    expect(again.status).toBe(400);
    expect(again.body.error).toBe('TRADE_REQUEST_ERROR');

    const off = await offsetOf(p4);
    const hist = await op(t, p4, 'OrderHistory', { from: serverTime(Date.now() - HOUR, off) });
    expect(hist.status, hist.text).toBe(200);
    expect(hist.body.orders.length).toBeGreaterThan(0);
    await bad(p4, 'OrderHistory', {}, 'from');
  });

  it('QuoteHistory (count bars back) and EquityHistory', async () => {
    const off = await offsetOf(p4);
    const h = await op(t, p4, 'QuoteHistory', { symbol: 'BTCUSD', timeframe: 'H1', from: serverTime(Date.now(), off), count: 5 });
    expect(h.status, h.text).toBe(200);
    expect(h.body).toHaveLength(5);
    await bad(p4, 'QuoteHistory', { symbol: 'BTCUSD', timeframe: 'H2', from: serverTime(Date.now(), off), count: 5 }, 'timeframe');
    await bad(p4, 'QuoteHistory', { symbol: 'BTCUSD', timeframe: 'H1', from: serverTime(Date.now(), off) }, 'count');
    const eq = await op(t, p4, 'EquityHistory', { from: serverTime(Date.now() - HOUR, off) });
    expect(eq.status).toBe(200);
    expect(Array.isArray(eq.body)).toBe(true);
  });

  it('subscriptions: SubscribeMany with replace and without symbols, UnSubscribeMany of all, SubscribeOhlc by minutes string', async () => {
    expect((await op(t, p4, 'Subscribe', { symbol: 'BTCUSD' })).status).toBe(200);
    expect((await op(t, p4, 'SubscribeMany', { symbols: 'XAUUSD', replace: true })).body.quotes.map((x: { symbol: string }) => x.symbol)).toEqual(['XAUUSD']);
    const all = await op(t, p4, 'SubscribeMany', {});
    expect(all.body.quotes.length).toBe((await op(t, p4, 'SymbolList')).body.length);
    expect((await op(t, p4, 'UnSubscribeMany')).body.quotes).toEqual([]);
    expect((await op(t, p4, 'SubscribeOhlc', { symbol: 'BTCUSD', timeframe: '5', interval: 2 })).body.ohlc).toEqual([{ symbol: 'BTCUSD', timeframe: 'M5', interval: 2 }]);
    expect((await op(t, p4, 'UnsubscribeOhlc', { symbol: 'BTCUSD', timeframe: '5' })).body.ohlc).toEqual([]);
    await bad(p4, 'SubscribeMany', { symbols: 'BTCUSD', force: true }, 'force');
  });

  it('P5-only operations answer 404', async () => {
    for (const name of ['OrderSendSafe', 'GetQuote', 'PriceHistoryV2', 'PriceHistory', 'Symbols', 'Account', 'MarketWatchMany', 'SubscribeOrderBook', 'ClosedOrders']) {
      const r = await op(t, p4, name);
      expect(r.status, name).toBe(404);
      expect(r.body.error).toBe('OPERATION_NOT_ON_PLATFORM');
    }
  });
});

describe('idempotency ids on the gateway trade operations', () => {
  // §4.4/§4.5 give OrderSendSafe/OrderSend no idempotency id. The header used to be ignored, so a bot
  // retrying with the same Idempotency-Key got a second order; it is refused before anything is sent.
  it('an Idempotency-Key header on a trade operation is 400 and sends nothing, on both platforms', async () => {
    const [a5, a4] = await Promise.all([account(t, 'P5'), account(t, 'P4')]);
    const send = (a: Acct, name: string, query: Record<string, string | number>) => {
      const qs = new URLSearchParams({ handle: a.handle, ...Object.fromEntries(Object.entries(query).map(([k, v]) => [k, String(v)])) });
      return t.req('GET', `/v1/proxy/${name}?${qs}`, { headers: { 'x-api-key': a.key, 'idempotency-key': 'gw-retry-1' } });
    };
    for (let i = 0; i < 2; i++) {
      const r5 = await send(a5, 'OrderSendSafe', { symbol: 'BTCUSD', operation: 0, volume: 0.01 });
      expect(r5.status, r5.text).toBe(400);
      expect(r5.body).toMatchObject({ error: 'BAD_REQUEST', message: expect.stringContaining('Idempotency-Key') });
      const r4 = await send(a4, 'OrderSend', { symbol: 'BTCUSD', operation: 'Buy', volume: 0.01 });
      expect(r4.status, r4.text).toBe(400);
      expect(r4.body.message).toContain('Idempotency-Key');
    }
    expect((await op(t, a5, 'OpenedOrdersTickets')).body).toEqual([]);
    expect((await op(t, a4, 'OpenedOrdersTickets')).body).toEqual([]);
    // the query form was already refused as an unknown parameter
    await bad(a5, 'OrderSendSafe', { symbol: 'BTCUSD', operation: 0, volume: 0.01, clientOrderId: 'gw-retry-2' }, 'clientOrderId');
    // read-only keys still get their 403 first (§5.5)
    const ro = await apiKey(t, a5.id, { readOnly: true });
    const r = await t.req('GET', `/v1/proxy/OrderSendSafe?handle=${a5.handle}&symbol=BTCUSD&operation=0&volume=0.01`, { headers: { 'x-api-key': ro, 'idempotency-key': 'gw-retry-3' } });
    expect(r.status).toBe(403);
  });
});

// Every key of the customer shares the account's one session (SPEC §3, §4.4: "a subscription lasts
// until unsubscribed or the session ends"). A read-only key streams (SPEC §2: "data and streaming"),
// so it may add subscriptions; ending or changing one would stop or slow the pushes of the key that
// trades (as Disconnect would, which it may not do either).
describe('read-only keys and the shared session subscriptions', () => {
  it('a read-only key adds subscriptions, but cannot end or change those the session has', async () => {
    const a = await account(t, 'P5');
    const ro = await apiKey(t, a.id, { readOnly: true });
    expect((await op(t, a, 'Subscribe', { symbol: 'EURUSD', interval: 0 })).status).toBe(200);
    expect((await op(t, a, 'SubscribeOhlc', { symbol: 'BTCUSD', timeframe: 1 })).status).toBe(200);
    expect((await op(t, a, 'SubscribeOrderBook', { symbols: 'EURUSD' })).status).toBe(200);
    const before = (await op(t, a, 'SubscribedSymbols')).body;
    for (const [name, query] of [
      ['UnSubscribe', { symbol: 'EURUSD' }], ['UnSubscribeMany', {}], ['UnSubscribeMany', { symbols: 'EURUSD' }],
      ['UnsubscribeOhlc', { symbol: 'BTCUSD' }], ['UnsubscribeOrderBook', { symbols: 'EURUSD' }],
      // the same subscription at another interval: it would space the trading key's pushes
      ['Subscribe', { symbol: 'EURUSD', interval: 60_000 }], ['SubscribeMany', { symbols: 'XAUUSD,EURUSD', interval: 60_000 }],
      ['SubscribeOhlc', { symbol: 'BTCUSD', timeframe: 1, interval: 60 }], ['SubscribeOrderBook', { symbols: 'EURUSD', interval: 500 }],
    ] as const) {
      const r = await op(t, a, name, query, ro);
      expect([r.status, r.body.error], `${name} ${JSON.stringify(query)}: ${r.text}`).toEqual([403, 'READ_ONLY_KEY']);
    }
    // Nothing changed, not even XAUUSD of the refused SubscribeMany.
    expect((await op(t, a, 'SubscribedSymbols', {}, ro)).body).toEqual(before);
    // Subscribing what the session has, as it has it, and adding a symbol: allowed.
    expect((await op(t, a, 'Subscribe', { symbol: 'EURUSD', interval: 0 }, ro)).status).toBe(200);
    const added = await op(t, a, 'SubscribeMany', { symbols: 'XAUUSD,EURUSD' }, ro);
    expect(added.status, added.text).toBe(200);
    expect(added.body.quotes).toEqual([{ symbol: 'EURUSD', interval: 0 }, { symbol: 'XAUUSD', interval: 0 }]);
    // The key that trades still manages them.
    expect((await op(t, a, 'UnSubscribeMany')).body.quotes).toEqual([]);
  });

  it('P4: a read-only SubscribeMany with replace (it ends the other subscriptions) is refused', async () => {
    const a = await account(t, 'P4');
    const ro = await apiKey(t, a.id, { readOnly: true });
    expect((await op(t, a, 'Subscribe', { symbol: 'BTCUSD' })).status).toBe(200);
    const r = await op(t, a, 'SubscribeMany', { symbols: 'XAUUSD', replace: true }, ro);
    expect([r.status, r.body.error], r.text).toEqual([403, 'READ_ONLY_KEY']);
    expect((await op(t, a, 'SubscribedSymbols')).body.quotes).toEqual([{ symbol: 'BTCUSD', interval: 0 }]);
    expect((await op(t, a, 'SubscribeMany', { symbols: 'XAUUSD' }, ro)).status).toBe(200);
  });
});
