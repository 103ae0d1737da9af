// Gateway routes (SPEC §4.4) over real HTTP: P5 OrderCloseSafe cancels a pending order (P5 has no
// OrderDelete), and a broker outage answers promptly (last-known AccountSummary with synced:false,
// 503 within the classic routes' short budget, CheckConnect/ConnectionStatus without blocking).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { account, op, type Acct } from '../helpers/gateway-helpers.js';

// The waits are set here so each bound below is decided by which wait a route took, never by how
// fast this machine answers: an answer "at once" is bounded by the wait it must not take (a route
// that took it cannot be faster), a budgeted one by the old, longer wait it replaced.
const BROKER_WAIT_MS = 4_000;
const CHECK_WAIT_MS = 2_000;
let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway({ brokerWaitMs: BROKER_WAIT_MS, checkWaitMs: CHECK_WAIT_MS });
});
afterAll(async () => {
  await t?.stop();
});

async function timed<T>(f: () => Promise<T>): Promise<{ r: T; ms: number }> {
  const t0 = Date.now();
  const r = await f();
  return { r, ms: Date.now() - t0 };
}

describe('P5 OrderCloseSafe on a pending order', () => {
  it('cancels the pending order through orderDelete; a position ticket still closes the position', async () => {
    const a = await account(t, 'P5');
    const q = (await op(t, a, 'GetQuote', { symbol: 'BTCUSD' })).body;

    // P5 has no OrderDelete: the hint names OrderCloseSafe and says it cancels pending orders.
    const del = await op(t, a, 'OrderDelete', { ticket: 1 });
    expect(del.status).toBe(404);
    expect(del.body.error).toBe('OPERATION_NOT_ON_PLATFORM');
    expect(del.body.message).toContain('OrderCloseSafe');
    expect(del.body.message).toMatch(/pending/i);

    const limit = await op(t, a, 'OrderSendSafe', { symbol: 'BTCUSD', operation: 2, volume: 0.01, price: Math.round(q.bid * 0.7) });
    expect(limit.status, limit.text).toBe(200);
    expect(limit.body.state).toBe('placed');
    const pending = limit.body.ticket as number;
    expect((await op(t, a, 'OpenedOrder', { ticket: pending })).body).toMatchObject({ ticket: pending, kind: 'order' });

    // A partial close has no meaning for a pending order: 400 before anything is sent.
    const partial = await op(t, a, 'OrderCloseSafe', { ticket: pending, lots: 0.01 });
    expect(partial.status, partial.text).toBe(400);
    expect(partial.body.error).toBe('BAD_REQUEST');
    expect(partial.body.message).toContain('lots');
    expect((await op(t, a, 'OpenedOrdersTickets')).body).toContain(pending);

    const cancel = await op(t, a, 'OrderCloseSafe', { ticket: pending });
    expect(cancel.status, cancel.text).toBe(200);
    expect(cancel.body).toMatchObject({ ticket: pending, kind: 'order', type: 'BuyLimit' });
    expect(cancel.body.state).not.toBe('placed');
    // Broker server time on /v1 (SPEC §9): `time`-like strings without a zone.
    expect(cancel.body.openTime).toBe(new Date(cancel.body.openTimeMsc).toISOString().slice(0, 23));
    expect((await op(t, a, 'OpenedOrdersTickets')).body).not.toContain(pending);

    // Cancelled already: the broker's rejection, as for any unknown ticket.
    const again = await op(t, a, 'OrderCloseSafe', { ticket: pending });
    expect(again.status).toBe(400);
    expect(again.body.error).toBe('TRADE_REQUEST_ERROR');

    // Positions close as before.
    const buy = await op(t, a, 'OrderSendSafe', { symbol: 'BTCUSD', operation: 0, volume: 0.01 });
    expect(buy.status, buy.text).toBe(200);
    const pos = buy.body.ticket as number;
    const close = await op(t, a, 'OrderCloseSafe', { ticket: pos });
    expect(close.status, close.text).toBe(200);
    expect((await op(t, a, 'OpenedOrdersTickets')).body).toEqual([]);
  });
});

describe('gateway routes during a broker outage', () => {
  let a: Acct;
  let before: { balance: number; equity: number; currency: string };

  beforeAll(async () => {
    a = await account(t, 'P5');
    // Values read while connected: what the outage answers as last-known.
    before = (await op(t, a, 'AccountSummary')).body;
    expect(before).toMatchObject({ balance: expect.any(Number), synced: true });
    await t.gw.services.shards.call(a.id, 'account.fault', { accountId: a.id, fault: { kind: 'drop', durationMs: 30_000 } });
    // Wait until the account knows it is down (ConnectionStatus reports without waiting).
    const deadline = Date.now() + 8_000;
    for (;;) {
      const s = await op(t, a, 'ConnectionStatus');
      expect(s.status, s.text).toBe(200);
      if (s.body.connected === false) break;
      if (Date.now() > deadline) throw new Error('the account never left connected');
      await new Promise((r) => setTimeout(r, 50));
    }
  });

  it('AccountSummary answers at once with the last-known values and synced: false', async () => {
    const { r, ms } = await timed(() => op(t, a, 'AccountSummary'));
    expect(r.status, r.text).toBe(200);
    expect(r.body).toMatchObject({ balance: before.balance, equity: before.equity, currency: before.currency, synced: false });
    expect(ms, 'not after the broker wait').toBeLessThan(BROKER_WAIT_MS);
    const classic = await t.req('GET', `/AccountSummary?id=${a.id}`, { headers: { 'x-api-key': a.key } });
    expect(classic.status).toBe(200);
    expect(classic.body).toMatchObject({ balance: before.balance, synced: false });
  });

  it('operations that need the broker answer 503 within the classic budget, not after 10 s', async () => {
    const calls: Array<[string, Record<string, string | number>]> = [
      ['SymbolList', {}], ['OpenedOrders', {}], ['GetQuote', { symbol: 'BTCUSD' }], ['Subscribe', { symbol: 'BTCUSD' }],
      ['OrderSendSafe', { symbol: 'BTCUSD', operation: 0, volume: 0.01 }],
    ];
    const answers = await Promise.all(calls.map(([name, query]) => timed(() => op(t, a, name, query))));
    answers.forEach(({ r, ms }, i) => {
      const name = calls[i]![0];
      expect(r.status, `${name}: ${r.text}`).toBe(503);
      expect(r.body.error, name).toBe('NOT_CONNECTED');
      expect(ms, `${name}: within the broker wait, not the 10 s of old`).toBeLessThan(10_000);
    });
  });

  it('CheckConnect and ConnectionStatus report promptly', async () => {
    const check = await timed(() => op(t, a, 'CheckConnect'));
    expect(check.r.status, check.r.text).toBe(200);
    expect(check.r.body).toMatchObject({ connected: false, platform: 'P5' });
    expect(check.r.body.phase).not.toBe('connected');
    expect(check.ms, 'the check wait, not the 5 s of old').toBeLessThan(5_000);
    const status = await timed(() => op(t, a, 'ConnectionStatus'));
    expect(status.r.body).toMatchObject({ connected: false });
    expect(status.ms, 'without the check wait').toBeLessThan(CHECK_WAIT_MS);
  });
});
