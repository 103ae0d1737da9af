// The SDK's HTTP side against a real gateway: typed calls per family, one error class, retries that
// never place an order twice (a lost answer to /OrderSend is retried with the same clientOrderId and
// replayed), 409 IDEMPOTENCY_UNCERTAIN as its own error, the gateway session renewing its handle.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IdempotencyUncertainError, TagwClient, TagwError } from '../../src/client/index.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { startTcpProxy } from '../helpers/tcpProxy.js';

let g: TestGateway;
let mgmt: TagwClient;
let key: string;
let id: string;
/** Every request the SDK made: method, path and query; and the gateway's request id of each answer. */
const seen: Array<{ method: string; url: URL }> = [];
const requestIds: string[] = [];
const recordingFetch: typeof fetch = async (input, init) => {
  seen.push({ method: init?.method ?? 'GET', url: new URL(String(input)) });
  const res = await fetch(input, init);
  requestIds.push(res.headers.get('x-request-id') ?? '');
  return res;
};
const client = (o: Partial<ConstructorParameters<typeof TagwClient>[0]> = {}) =>
  new TagwClient({ baseUrl: g.url, apiKey: key, fetch: recordingFetch, retry: { baseMs: 1, maxMs: 5 }, ...o });

beforeAll(async () => {
  // A seat's build outlasts the file (the default 300 ms passed before the create's answer at load ~25,
  // and the answer said ACTIVE): the test reads a building seat, not how fast the machine is.
  g = await startTestGateway({ seatBuildMs: 600_000 });
  mgmt = new TagwClient({ baseUrl: g.url, managementKey: g.managementKey });
  key = (await mgmt.keys.create({ label: 'sdk-test' })).key;
  id = (await client().connectEx({ user: 'sdk-http', password: 'pw', server: 'Sim-P5-Demo' })).id;
});
afterAll(async () => {
  await g?.stop();
});

describe('typed calls', () => {
  it('classic reads, news, provisioning', async () => {
    const acct = client().account(id);
    const summary = await acct.AccountSummary();
    expect(summary.balance).toBe(10_000);
    const q = await acct.GetQuote({ symbol: 'BTCUSD' });
    expect(q.ask).toBeGreaterThan(q.bid);
    const many = await acct.GetQuoteMany({ symbols: ['BTCUSD', 'EURUSD'] });
    expect(JSON.stringify(many)).toContain('EURUSD');
    expect(Array.isArray(await client().news({ impact: ['High'] }))).toBe(true);
    const seat = await mgmt.seats.create({ privateHosting: true, region: 'us-east' });
    expect(seat.status).toBe('BUILDING_SERVER');
    expect((await mgmt.seats.get(seat.id)).id).toBe(seat.id);
    const scoped = await mgmt.seats.createKey(seat.id, { label: 'browser', readOnly: true, accountScoped: true });
    expect(scoped.readOnly).toBe(true);
    expect((await new TagwClient({ baseUrl: g.url, apiKey: scoped.key }).whoami()).seatId).toBe(seat.id);
  });

  it('a bot with many calls in flight at once: answered, and no listener warning from Node', async () => {
    const warnings: string[] = [];
    const onWarning = (w: Error) => void warnings.push(`${w.name}: ${w.message}`);
    process.on('warning', onWarning);
    try {
      const acct = client().account(id);
      const answers = await Promise.all(Array.from({ length: 40 }, (_, i) => (i % 2 ? acct.GetQuote({ symbol: 'BTCUSD' }) : acct.AccountSummary())));
      expect(answers).toHaveLength(40);
      await new Promise((r) => setImmediate(r)); // warnings are emitted on the next tick
    } finally {
      process.off('warning', onWarning);
    }
    expect(warnings.filter((w) => w.includes('MaxListeners'))).toEqual([]);
  });

  it('errors are TagwError with code, status and requestId; a 4xx is not retried', async () => {
    seen.length = 0;
    const err = await client().account(id).GetQuote({ symbol: 'NOPE' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TagwError);
    expect(err).toMatchObject({ code: 'BAD_REQUEST', status: 400 });
    // The gateway's id of the request (in its logs), as its x-request-id header said.
    expect((err as TagwError).requestId).toBe(requestIds.at(-1));
    expect((err as TagwError).requestId).not.toBe('');
    expect(seen).toHaveLength(1);
    seen.length = 0;
    const bad = await client({ apiKey: 'tagw_api_nope_nope' }).account(id).AccountSummary().catch((e: unknown) => e);
    expect(bad).toMatchObject({ code: 'INVALID_API_KEY', status: 401 });
    expect(seen).toHaveLength(1);
  });
});

describe('trading retries', () => {
  it('a lost answer to OrderSend is retried with the same clientOrderId: one order, replayed', async () => {
    const before = (await client().account(id).OpenedOrders()).length;
    const sent: string[] = [];
    let lose = true;
    const losingFetch: typeof fetch = async (input, init) => {
      const url = new URL(String(input));
      if (url.pathname === '/OrderSend') sent.push(url.searchParams.get('clientOrderId')!);
      const res = await fetch(input, init);
      if (url.pathname === '/OrderSend' && lose) {
        lose = false;
        await res.text();
        throw new TypeError('fetch failed: connection reset'); // the order went through, the answer did not
      }
      return res;
    };
    const r = await client({ fetch: losingFetch }).account(id).OrderSend({ symbol: 'BTCUSD', operation: 'Buy', volume: 0.01 });
    expect(r.state).toBe('filled');
    expect(sent).toHaveLength(2);
    expect(sent[0]).toBe(sent[1]);
    expect(sent[0]).toMatch(/^sdk-/);
    expect((await client().account(id).OpenedOrders()).length).toBe(before + 1);
  });

  it('withMeta tells a replayed answer from a first one (Idempotent-Replay), for results and for a replayed rejection', async () => {
    const acct = client().account(id);
    const order = { symbol: 'BTCUSD', operation: 'Buy', volume: 0.01, clientOrderId: 'sdk-meta-1' } as const;
    const first = await acct.withMeta.OrderSend(order);
    expect(first).toMatchObject({ replayed: false, clientOrderId: 'sdk-meta-1', tries: 1 });
    expect(first.result.state).toBe('filled');
    expect(first.requestId).toMatch(/./);
    const again = await acct.withMeta.OrderSend(order);
    expect(again.replayed).toBe(true);
    expect(again.result.ticket).toBe(first.result.ticket);
    // The plain method answers the same result, without the flag.
    expect((await acct.OrderSend(order)).ticket).toBe(first.result.ticket);
    // The SDK's own retry after a lost answer is a replay too: nothing was sent twice.
    let lose = true;
    const losingFetch: typeof fetch = async (input, init) => {
      const res = await fetch(input, init);
      if (new URL(String(input)).pathname === '/OrderSend' && lose) {
        lose = false;
        await res.text();
        throw new TypeError('fetch failed: connection reset');
      }
      return res;
    };
    const lost = await client({ fetch: losingFetch }).account(id).withMeta.OrderSend({ symbol: 'BTCUSD', operation: 'Buy', volume: 0.01 });
    expect(lost).toMatchObject({ replayed: true, tries: 2 });
    expect(lost.clientOrderId).toMatch(/^sdk-/);
    // A proxy that drops x-request-id: the answer still names an id, the SDK's own (as its errors do).
    const stripping: typeof fetch = async (input, init) => {
      const res = await fetch(input, init);
      const headers = new Headers(res.headers);
      headers.delete('x-request-id');
      return new Response(await res.text(), { status: res.status, headers });
    };
    const stripped = await client({ fetch: stripping }).account(id).withMeta.OrderSend({ symbol: 'BTCUSD', operation: 'Buy', volume: 0.01 });
    expect(stripped.requestId).toMatch(/^req-/);
    expect(first.requestId).not.toMatch(/^req-/);
    // A broker rejection is final and replayed for its id: the error says which one this is.
    const bad = { symbol: 'BTCUSD', operation: 'Buy', volume: 99_999, clientOrderId: 'sdk-meta-2' } as const;
    const e1 = (await acct.OrderSend(bad).catch((e: unknown) => e)) as TagwError;
    expect(e1).toMatchObject({ code: 'TRADE_REQUEST_ERROR', replayed: false });
    const e2 = (await acct.withMeta.OrderSend(bad).catch((e: unknown) => e)) as TagwError;
    expect(e2).toMatchObject({ code: 'TRADE_REQUEST_ERROR', replayed: true, reason: e1.reason });
  });

  it('an order whose answers were all lost: the error names the clientOrderId the SDK made, and sending it again places nothing twice', async () => {
    const proxy = await startTcpProxy(Number(new URL(g.url).port));
    try {
      let lose = true;
      // The gateway's answers do not come back (the orders reach it): a route that drops one way.
      proxy.watch((dir) => (dir === 'down' && lose ? 'drop' : undefined));
      const before = (await client().account(id).OpenedOrders()).length;
      const acct = new TagwClient({ baseUrl: proxy.url, apiKey: key, timeoutMs: 300, retry: { attempts: 2, baseMs: 1, maxMs: 5 } }).account(id);
      const err = await acct.OrderSend({ symbol: 'BTCUSD', operation: 'Buy', volume: 0.01 }).catch((e: unknown) => e);
      expect(err).toMatchObject({ code: 'TIMEOUT', status: 0 });
      const clientOrderId = (err as TagwError).clientOrderId;
      expect(clientOrderId).toMatch(/^sdk-/);
      lose = false;
      // Sent again with the SDK's usual timeout: 300 ms (to lose the first answers fast) is too short for
      // an answer on a machine loaded by the rest of the suite (CI: TIMEOUT here at load 12-15).
      const patient = new TagwClient({ baseUrl: proxy.url, apiKey: key }).account(id);
      const again = await patient.OrderSend({ symbol: 'BTCUSD', operation: 'Buy', volume: 0.01, clientOrderId });
      expect(again.state).toBe('filled');
      expect((await client().account(id).OpenedOrders()).length).toBe(before + 1);
      // Every refusal of a trading call names it too.
      const refused = await patient.OrderSend({ symbol: 'NOPE', operation: 'Buy', volume: 0.01 }).catch((e: unknown) => e);
      expect((refused as TagwError).clientOrderId).toMatch(/^sdk-/);
    } finally {
      await proxy.close();
    }
  });

  it("429 RATE_LIMITED: retryAfter is the body's exact wait (the header rounds it up to whole seconds), and the retries wait that long", async () => {
    const limited = (await mgmt.keys.create({ label: 'sdk-429' }));
    await mgmt.keys.setLimits(limited.id, { requestsPerSec: null, ordersPerSec: 2 });
    const waits: number[] = [];
    const sleep = (ms: number) => {
      waits.push(ms);
      return new Promise<void>((r) => setTimeout(r, ms));
    };
    const acct = (attempts: number) => new TagwClient({ baseUrl: g.url, apiKey: limited.key, sleep, retry: { attempts, baseMs: 1, maxMs: 2 } }).account(id);
    const burst = (attempts: number) => Promise.allSettled(Array.from({ length: 4 }, () => acct(attempts).OrderSend({ symbol: 'BTCUSD', operation: 'Buy', volume: 0.01 })));
    const once = await burst(1);
    const refusals = once.flatMap((r) => (r.status === 'rejected' ? [r.reason as TagwError] : []));
    expect(refusals.length).toBeGreaterThan(0);
    for (const e of refusals) {
      expect(e).toMatchObject({ code: 'RATE_LIMITED', status: 429 });
      expect(e.retryAfter).toBe(e.body?.retryAfterMs);
      expect(e.retryAfter).toBeLessThan(1000);
    }
    const retried = await burst(20);
    expect(retried.every((r) => r.status === 'fulfilled')).toBe(true);
    expect(waits.length).toBeGreaterThan(0);
    expect(Math.max(...waits)).toBeLessThan(1000);
  });

  it('409 IDEMPOTENCY_UNCERTAIN is its own error, naming the clientOrderId and what to do; never retried', async () => {
    // The embedded simulator resolves a lost broker answer by itself (its request log), so the
    // gateway's 409 is given here by a fetch that answers what the gateway answers in bridge mode.
    let calls = 0;
    const uncertain: typeof fetch = async () => {
      calls++;
      return new Response(JSON.stringify({ error: 'IDEMPOTENCY_UNCERTAIN', message: 'the first attempt timed out once sent' }), { status: 409, headers: { 'content-type': 'application/json' } });
    };
    const err = await client({ fetch: uncertain }).account(id).OrderSend({ symbol: 'BTCUSD', operation: 'Buy', volume: 0.01, clientOrderId: 'sdk-uncertain-1' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(IdempotencyUncertainError);
    expect(err).toMatchObject({ code: 'IDEMPOTENCY_UNCERTAIN', status: 409, clientOrderId: 'sdk-uncertain-1' });
    expect((err as IdempotencyUncertainError).nextStep).toContain('/OpenedOrders');
    expect((err as IdempotencyUncertainError).final).toBe(true);
    expect(calls).toBe(1);
  });

  it('409 IDEMPOTENCY_UNCERTAIN that is not final (the broker could not be asked after a restart) is sent again with the same id after its wait, which settles it', async () => {
    // The gateway's answer while a record restored in `sent` cannot ask the broker
    // (idempotency.property.test.ts), then the replayed result once it can.
    const sent: string[] = [];
    const waits: number[] = [];
    const recovering: typeof fetch = async (input) => {
      sent.push(new URL(String(input)).searchParams.get('clientOrderId') ?? '');
      if (sent.length === 1) {
        return new Response(JSON.stringify({ error: 'IDEMPOTENCY_UNCERTAIN', message: 'not known yet', final: false, retryAfterMs: 40 }), { status: 409, headers: { 'content-type': 'application/json', 'retry-after': '1' } });
      }
      return new Response(JSON.stringify({ ticket: 7 }), { status: 200, headers: { 'content-type': 'application/json', 'idempotent-replay': 'true' } });
    };
    const c = new TagwClient({ baseUrl: g.url, apiKey: key, fetch: recovering, sleep: async (ms) => void waits.push(ms) });
    expect(await c.account(id).OrderSend({ symbol: 'BTCUSD', operation: 'Buy', volume: 0.01, clientOrderId: 'sdk-recovering-1' })).toMatchObject({ ticket: 7 });
    expect(sent).toEqual(['sdk-recovering-1', 'sdk-recovering-1']);
    expect(waits.length).toBe(1);
    expect(waits[0]).toBeGreaterThanOrEqual(40); // the body's exact wait, not the header's whole second
    expect(waits[0]).toBeLessThan(1_000);
    // Its tries used up, the bot gets it, saying what to do.
    const never: typeof fetch = async () => new Response(JSON.stringify({ error: 'IDEMPOTENCY_UNCERTAIN', message: 'not known yet', final: false, retryAfterMs: 1 }), { status: 409, headers: { 'content-type': 'application/json' } });
    const err = await new TagwClient({ baseUrl: g.url, apiKey: key, fetch: never, sleep: async () => {}, retry: { attempts: 2 } }).account(id).OrderSend({ symbol: 'BTCUSD', operation: 'Buy', volume: 0.01, clientOrderId: 'sdk-recovering-2' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(IdempotencyUncertainError);
    expect(err).toMatchObject({ final: false, retryAfter: 1, clientOrderId: 'sdk-recovering-2' });
    expect((err as IdempotencyUncertainError).nextStep).toContain('same clientOrderId');
  });

  it("a call's own signal ends it, retries included: ABORTED naming the clientOrderId, no further try", async () => {
    // Bot walk: an order refused 503 NOT_CONNECTED (the broker connection down) was retried for some
    // 10 s (each try held 2 s by the gateway, then retry-after 1 s) and placed then, at a price the bot
    // no longer wanted; nothing but client.close() could end one call. Now each call takes { signal }.
    const away = (await client().connectEx({ user: 'sdk-http-signal', password: 'pw', server: 'Sim-P5-Demo' })).id;
    const acct = client().account(away);
    await acct.AccountSummary();
    seen.length = 0;
    const before = await acct.OrderSend({ symbol: 'BTCUSD', operation: 'Buy', volume: 0.01 }, { signal: AbortSignal.abort() }).catch((e: unknown) => e);
    expect(before).toBeInstanceOf(TagwError);
    expect(before).toMatchObject({ code: 'ABORTED', status: 0 });
    expect((before as TagwError).clientOrderId).toMatch(/^sdk-/);
    expect(seen).toHaveLength(0);
    expect(await acct.AccountSummary({}, { signal: AbortSignal.abort() }).catch((e: unknown) => e)).toMatchObject({ code: 'ABORTED', status: 0 });
    const session = await client().connect(away);
    expect(await session.op.GetQuote({ symbol: 'BTCUSD' }, { signal: AbortSignal.abort() }).catch((e: unknown) => e)).toMatchObject({ code: 'ABORTED', status: 0 });

    await g.gw.services.shards.call(away, 'account.fault', { accountId: away, fault: { kind: 'drop', durationMs: 8_000 } });
    seen.length = 0;
    const ctrl = new AbortController();
    const during = acct.withMeta.OrderSend({ symbol: 'BTCUSD', operation: 'Buy', volume: 0.01, clientOrderId: 'sdk-signal-1' }, { signal: ctrl.signal }).catch((e: unknown) => e);
    await new Promise((r) => setTimeout(r, 200)); // the first try in flight (the gateway waits for the broker) or its retry wait
    ctrl.abort();
    const err = await during;
    expect(err).toMatchObject({ code: 'ABORTED', status: 0, clientOrderId: 'sdk-signal-1' });
    expect(seen.filter((r) => r.url.pathname === '/OrderSend')).toHaveLength(1);
  }, 20_000);

  it('an unsafe call is not retried after a lost answer', async () => {
    seen.length = 0;
    let calls = 0;
    const failing: typeof fetch = async () => {
      calls++;
      throw new TypeError('fetch failed');
    };
    const err = await new TagwClient({ baseUrl: g.url, managementKey: g.managementKey, fetch: failing, retry: { baseMs: 1, maxMs: 2 } }).seats.create({}).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'NETWORK_ERROR', status: 0 });
    expect(calls).toBe(1);
  });
});

describe('parameters as the server takes them', () => {
  // Bot walk: the SDK typed a parameter by what the server parses it to, so `timeFrame: 1` (minutes,
  // which the server takes) did not compile. The types now say what the schemas accept
  // (test/unit/client-param-types.test.ts); these calls show the server takes them.
  it('a timeframe in minutes, an order type by code, a side by code', async () => {
    const session = await client().connect(id);
    const to = new Date();
    const from = new Date(to.getTime() - 3_600_000);
    const byMinutes = await session.op.PriceHistoryV2({ symbol: 'BTCUSD', from, to, timeFrame: 1 });
    const byName = await session.op.PriceHistoryV2({ symbol: 'BTCUSD', from, to, timeFrame: 'M1' });
    expect(Array.isArray(byMinutes)).toBe(true);
    expect((byMinutes as unknown[]).length).toBeGreaterThan(0);
    expect((byMinutes as unknown[]).length).toBe((byName as unknown[]).length);
    expect(await session.op.SubscribeOhlc({ symbol: 'BTCUSD', timeframe: 60 })).toBeTruthy();
    expect(await session.op.UnsubscribeOhlc({ symbol: 'BTCUSD', timeframe: 'h1' })).toBeTruthy();
    expect(await session.op.RequiredMargin({ symbol: 'BTCUSD', lots: 0.01, type: 1 })).toMatchObject({ type: 'Sell' });
    const acct = client().account(id);
    expect(await acct.RequiredMargin({ symbol: 'BTCUSD', lots: 0.01, operation: 1 })).toMatchObject({ type: 'Sell' });
    const order = await acct.OrderSend({ symbol: 'BTCUSD', operation: 0, volume: 0.01 });
    expect(order.state).toBe('filled');
    expect(order.type).toBe('Buy');
  });
});

describe('gateway session', () => {
  it('connect -> handle -> proxy calls; a disconnected handle is renewed', async () => {
    const session = await client().connect(id);
    expect(session.handle).toMatch(/^gwh_/);
    const summary = (await session.op.AccountSummary()) as { balance: number };
    expect(summary.balance).toBeGreaterThan(0);
    const first = session.handle;
    await session.op.Disconnect();
    const q = (await session.op.GetQuote({ symbol: 'BTCUSD' })) as { symbol: string };
    expect(q.symbol).toBe('BTCUSD');
    expect(session.handle).not.toBe(first);
  });
});
