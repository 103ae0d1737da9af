// The 409 IDEMPOTENCY_UNCERTAIN that is not final, provoked on one node with the simulator's
// `unknownAfterSend` fault, and the SDK's documented handling of it end to end. Bot walk: a bot
// could not test this path at all (it needed a gateway restart while an order was at a broker that
// then could not be asked); the SDK's tests gave the 409 from a stand-in fetch.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IdempotencyUncertainError, TagwClient } from '../../src/client/index.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

let g: TestGateway;
let mgmt: TagwClient;
let key: string;
let id: string;
const order = { symbol: 'BTCUSD', operation: 'Buy', volume: 0.01 } as const;

beforeAll(async () => {
  g = await startTestGateway();
  mgmt = new TagwClient({ baseUrl: g.url, managementKey: g.managementKey });
  key = (await mgmt.keys.create({ label: 'uncertain' })).key;
  id = (await new TagwClient({ baseUrl: g.url, apiKey: key }).connectEx({ user: 'uncertain-1', password: 'pw', server: 'Sim-P5-Demo' })).id;
});
afterAll(async () => {
  await g?.stop();
});

const positions = async () => (await new TagwClient({ baseUrl: g.url, apiKey: key }).account(id).OpenedOrdersTickets()) as number[];

describe('unknownAfterSend: the order executes, its reply is lost, the broker cannot be asked for lookupFailMs', () => {
  it('over raw HTTP: 500 to the first request, 409 final:false with retry-after to the same id while the broker cannot be asked, then the one order, replayed', async () => {
    const before = await positions();
    await mgmt.accounts.addFault(id, { kind: 'unknownAfterSend', count: 1, lookupFailMs: 60_000 });
    const url = `${g.url}/OrderSend?id=${id}&symbol=BTCUSD&operation=Buy&volume=0.01&clientOrderId=raw-unknown-1`;
    const send = () => fetch(url, { headers: { 'x-api-key': key } });
    const first = await send();
    expect(first.status).toBe(500);
    expect(first.headers.get('retry-after')).toBe('1');
    expect(await first.json()).toMatchObject({ error: 'TERMINAL_ERROR', message: expect.stringContaining('same clientOrderId') });
    for (let i = 0; i < 2; i++) {
      const r = await send();
      expect(r.status).toBe(409);
      expect(r.headers.get('retry-after')).toBe('1');
      expect(await r.json()).toMatchObject({ error: 'IDEMPOTENCY_UNCERTAIN', final: false, retryAfterMs: 1000 });
    }
    // The order executed once at the simulator, whatever the answers said.
    const placed = (await positions()).filter((t) => !before.includes(t));
    expect(placed).toHaveLength(1);
    // Clearing the account's faults ends the broker's silence: the same id answers the order.
    await new TagwClient({ baseUrl: g.url, apiKey: key }).accounts.clearFaults(id);
    const r = await send();
    expect(r.status).toBe(200);
    expect(r.headers.get('idempotent-replay')).toBe('true');
    expect(((await r.json()) as { ticket: number }).ticket).toBe(placed[0]);
    expect((await positions()).filter((t) => !before.includes(t))).toEqual(placed);
  });

  it('the SDK sends it again with the same id after retry-after, which settles it once the broker can be asked', async () => {
    const before = await positions();
    // Asked again after ~1 s (retry-after), then ~2 s: the broker is back by then.
    await mgmt.accounts.addFault(id, { kind: 'unknownAfterSend', count: 1, lookupFailMs: 1_500 });
    const sent: string[] = [];
    const recording: typeof fetch = (input, init) => {
      if (new URL(String(input)).pathname === '/OrderSend') sent.push(new URL(String(input)).searchParams.get('clientOrderId')!);
      return fetch(input, init);
    };
    const acct = new TagwClient({ baseUrl: g.url, apiKey: key, fetch: recording }).account(id);
    const a = await acct.withMeta.OrderSend(order);
    expect(a.replayed).toBe(true);
    expect(a.tries).toBeGreaterThan(1);
    expect(new Set(sent)).toEqual(new Set([a.clientOrderId]));
    expect((await positions()).filter((t) => !before.includes(t))).toEqual([a.result.ticket]);
  });

  it('its tries used up, the bot gets IdempotencyUncertainError final:false; the same id later answers the one order', async () => {
    const before = await positions();
    await mgmt.accounts.addFault(id, { kind: 'unknownAfterSend', count: 1, lookupFailMs: 60_000 });
    const acct = new TagwClient({ baseUrl: g.url, apiKey: key, retry: { attempts: 2 } }).account(id);
    const err = await acct.OrderSend(order).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(IdempotencyUncertainError);
    const e = err as IdempotencyUncertainError;
    expect(e).toMatchObject({ code: 'IDEMPOTENCY_UNCERTAIN', status: 409, final: false, retryAfter: 1000 });
    expect(e.clientOrderId).toMatch(/^sdk-/);
    expect(e.nextStep).toContain('same clientOrderId');
    await new TagwClient({ baseUrl: g.url, apiKey: key }).accounts.clearFaults(id);
    const again = await acct.withMeta.OrderSend({ ...order, clientOrderId: e.clientOrderId! });
    expect(again.replayed).toBe(true);
    expect((await positions()).filter((t) => !before.includes(t))).toEqual([again.result.ticket]);
  });
});
