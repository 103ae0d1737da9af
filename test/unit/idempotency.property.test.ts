// Idempotent trading at the level of the account host (the real host, TradeDesk, idempotency
// actors and SQLite store), over a fake broker that does NOT deduplicate request ids itself, so
// "at most one order per id" has to come from the gateway alone. A "shard kill" stops the host
// mid-order and starts a fresh one on the same database, like the supervisor does.
import fc from 'fast-check';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import type { BrokerConnection, BrokerCredentials, TradeOptions } from '../../src/broker/types.js';
import { BrokerTimeoutError } from '../../src/market/brokerErrors.js';
import { RETCODE_DONE, type OrderRequest, type RequestLookup, type TradeResult } from '../../src/market/orders.js';
import type { ServerInfo } from '../../src/market/server.js';
import { SecretBox } from '../../src/crypto/secretBox.js';
import { ApiError } from '../../src/errors.js';
import { createLogger } from '../../src/log.js';
import type { BrokerSource } from '../../src/runtime/hosts/accountBroker.js';
import type { TradeReply } from '../../src/runtime/hosts/accountCommands.js';
import { createAccountHost } from '../../src/runtime/hosts/accounts.js';
import type { ActorHost, ShardContext } from '../../src/runtime/hosts/context.js';
import { openDb, type Db } from '../../src/store/db.js';
import { shardSettings } from '../../src/runtime/settings.js';
import { systemClock } from '../../src/util/clock.js';

// timeoutFound: the reply is lost, the broker's lookup finds the order. timeoutLost: the reply is
// lost and the lookup fails (the broker cannot be asked then; it can later). timeoutUnknown: the
// reply is lost and the broker does not know the request (a bridge's broker that never logged it).
type Fault = 'none' | 'reject' | 'timeoutFound' | 'timeoutLost' | 'timeoutUnknown' | 'hang';

/** The upstream: survives "shard kills". Counts every order it executed per request id. */
class FakeBroker {
  executed = new Map<string, number>();
  results = new Map<string, RequestLookup>();
  nextFault: Fault = 'none';
  ticket = 1000;
  readonly server: ServerInfo = {
    name: 'Fake-P5', platform: 'P5', build: 4620, company: 'Fake', timeZone: { description: 'UTC', standardOffsetMinutes: 0, dst: 'none' },
  };

  source(): BrokerSource {
    return { factory: (c) => this.conn(c), stop: () => {} };
  }

  conn(c: BrokerCredentials): BrokerConnection {
    const broker = this;
    let state: 'connected' | 'disconnected' = 'disconnected';
    const conn = {
      server: this.server,
      login: c.login,
      get state() { return state; },
      async connect() { state = 'connected'; },
      async disconnect() { state = 'disconnected'; },
      on() { return () => {}; },
      async orderSend(req: OrderRequest, opts?: TradeOptions): Promise<TradeResult> {
        const fault = broker.nextFault;
        broker.nextFault = 'none';
        const requestId = opts?.requestId ?? `anon-${broker.ticket}`;
        // Count per clientOrderId (the gateway's broker request id is "<account>/<clientOrderId>/<record>"),
        // so two records sent for one id would show up as 2 here.
        const id = requestId.split('/')[1] ?? requestId;
        const result: TradeResult = fault === 'reject'
          ? { ok: false, reason: 'NO_MONEY', message: 'not enough money', retcode: 10019 }
          : {
            ok: true, retcode: RETCODE_DONE, deals: [],
            order: {
              kind: 'order', ticket: ++broker.ticket, symbol: req.symbol, type: req.type, state: 'filled', volume: req.volume,
              volumeInitial: req.volume, openPrice: 1.1, openTimeMsc: 1_700_000_000_000, sl: 0, tp: 0, magic: req.magic ?? 0,
              comment: '', commission: 0, swap: 0, profit: 0, positionId: broker.ticket,
            },
          };
        broker.executed.set(id, (broker.executed.get(id) ?? 0) + 1);
        if (fault !== 'timeoutUnknown') broker.results.set(requestId, { requestId, timeMsc: 1, result });
        if (fault === 'timeoutFound' || fault === 'timeoutLost' || fault === 'timeoutUnknown') {
          if (fault === 'timeoutLost') broker.lookupFails = true;
          throw new BrokerTimeoutError(true);
        }
        if (fault === 'hang') return new Promise<TradeResult>(() => {});
        return result;
      },
      async lookupRequest(id: string) {
        if (broker.lookupFails) {
          if (--broker.lookupFailsFor <= 0) broker.lookupFails = false;
          throw new Error('lookup unavailable');
        }
        return broker.results.get(id) ?? null;
      },
    };
    return conn as unknown as BrokerConnection;
  }
  lookupFails = false;
  /** Lookups that fail, once lookupFails is set (then it is cleared). */
  lookupFailsFor = 1;
}

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function harness() {
  const dir = mkdtempSync(join(tmpdir(), 'tagw-idem-'));
  dirs.push(dir);
  const key = randomBytes(32);
  const broker = new FakeBroker();
  const dbs: Db[] = [];
  let host: ActorHost;
  const boot = () => {
    const db = openDb(dir);
    dbs.push(db);
    const ctx: ShardContext = {
      shard: 0, shards: 1, db, log: createLogger('silent'), settings: shardSettings({ secretKeyHex: key.toString('hex') }), clock: systemClock,
      emit: () => {}, owns: () => true,
    };
    host = createAccountHost(ctx, { broker: broker.source() });
    host.rehydrate();
  };
  boot();
  const accountId = '11111111-1111-4111-8111-111111111111';
  const h = {
    broker,
    get host() { return host; },
    async bind() {
      const passwordEnc = new SecretBox(key).seal('pw', accountId);
      await host.handlers['account.bind']!({ accountId, customerId: 'c1', server: 'Fake-P5', login: '7', passwordEnc });
    },
    send(id: string | undefined, volume: number): Promise<TradeReply> {
      return Promise.resolve(host.handlers['account.trade']!({
        accountId, op: 'OrderSend', args: { symbol: 'EURUSD', operation: 'Buy', volume }, ...(id !== undefined ? { clientOrderId: id } : {}),
      }));
    },
    /** Like a worker thread dying: actors and connections gone, SQLite kept; a new host rehydrates. */
    kill() {
      host.stop();
      dbs.pop()!.close();
      boot();
    },
    close() {
      host.stop();
      for (const d of dbs) d.close();
    },
  };
  return h;
}

type Outcome = { kind: 'reply'; reply: TradeReply } | { kind: 'error'; code: string };
const settle = (p: Promise<TradeReply>): Promise<Outcome> =>
  p.then((reply) => ({ kind: 'reply' as const, reply }), (e: unknown) => ({ kind: 'error' as const, code: e instanceof ApiError ? e.code : `thrown:${String(e)}` }));

/** A harness whose shard was killed while the order of `id` hung at the broker (executed there). */
async function killedMidOrder(id: string) {
  const h = harness();
  await h.bind();
  h.broker.nextFault = 'hang';
  const first = settle(h.send(id, 0.1));
  await new Promise((r) => setImmediate(r));
  h.kill();
  expect((await first).kind).toBe('error');
  return h;
}

describe('idempotent OrderSend (host level)', () => {
  it('replays results (rejections too), 422 on changed params, 409 after an uncertain send, concurrent requests execute once', async () => {
    const h = harness();
    await h.bind();
    const a = await h.send('a', 0.1);
    expect(a.status).toBe(200);
    expect(a.replay).toBe(false);
    const a2 = await h.send('a', 0.1);
    expect(a2).toEqual({ ...a, replay: true });
    await expect(h.send('a', 0.2)).rejects.toMatchObject({ code: 'IDEMPOTENCY_KEY_REUSED' });

    h.broker.nextFault = 'reject';
    const r = await h.send('r', 0.1);
    expect(r.status).toBe(400);
    expect(JSON.parse(r.json)).toMatchObject({ error: 'TRADE_REQUEST_ERROR', reason: 'NO_MONEY' });
    expect(await h.send('r', 0.1)).toEqual({ ...r, replay: true });

    // The broker cannot be asked after the lost reply: not known yet. The first answer is 500 as for
    // any lost reply, the retries 409 not final (retry-after) while it cannot be asked, then the
    // order's result, replayed. Before, the retries were 409 final for 24 h.
    h.broker.nextFault = 'timeoutLost';
    h.broker.lookupFailsFor = 2;
    const first = await h.send('l', 0.1).catch((e: unknown) => e);
    expect(first).toMatchObject({ code: 'TERMINAL_ERROR', headers: { 'retry-after': '1' } });
    expect((first as Error).message).toContain('same clientOrderId');
    const notYet = await h.send('l', 0.1).catch((e: unknown) => e);
    expect(notYet).toMatchObject({ code: 'IDEMPOTENCY_UNCERTAIN', details: { final: false, retryAfterMs: 1000 }, headers: { 'retry-after': '1' } });
    const asked = await h.send('l', 0.1);
    expect(asked).toMatchObject({ status: 200, replay: true });
    expect(await h.send('l', 0.1)).toEqual(asked);

    h.broker.nextFault = 'timeoutUnknown';
    await expect(h.send('u', 0.1)).rejects.toMatchObject({ code: 'TERMINAL_ERROR' });
    // Final: the same id answers this for as long as its record lives (no retry-after).
    const final = await h.send('u', 0.1).catch((e: unknown) => e);
    expect(final).toMatchObject({ code: 'IDEMPOTENCY_UNCERTAIN', details: { final: true } });
    expect((final as { headers?: unknown }).headers).toBeUndefined();

    h.broker.nextFault = 'timeoutFound';
    const f = await h.send('f', 0.1);
    expect(f.status).toBe(200);

    const many = await Promise.all([h.send('c', 0.3), h.send('c', 0.3), h.send('c', 0.3)]);
    expect(many.filter((m) => !m.replay)).toHaveLength(1);
    expect(new Set(many.map((m) => m.json)).size).toBe(1);

    await expect(h.send('bad id!', 0.1)).rejects.toMatchObject({ code: 'BAD_REQUEST' });
    await expect(h.send('x'.repeat(65), 0.1)).rejects.toMatchObject({ code: 'BAD_REQUEST' });
    for (const [id, n] of h.broker.executed) expect(n, id).toBe(1);
    h.close();
  });

  it('a shard killed mid-order: after rehydration the retry asks the broker; it executed, so its result is replayed, never sent again', async () => {
    const h = await killedMidOrder('k');
    await h.bind();
    // The broker cannot be asked at first: 409 for now, and the record waits for a later retry.
    h.broker.lookupFails = true;
    // Not final, and says so in fields a bot can act on: the same request again after retry-after.
    await expect(h.send('k', 0.1)).rejects.toMatchObject({
      code: 'IDEMPOTENCY_UNCERTAIN', message: expect.stringContaining('not known yet'),
      details: { final: false, retryAfterMs: 1_000 }, headers: { 'retry-after': '1' },
    });
    const [a, b] = await Promise.all([h.send('k', 0.1), h.send('k', 0.1)]);
    const executed = h.broker.results.get([...h.broker.results.keys()].find((k) => k.split('/')[1] === 'k')!)!.result;
    for (const r of [a, b]) {
      expect(r).toMatchObject({ status: 200, replay: true });
      expect(JSON.parse(r.json)).toMatchObject({ ticket: executed.ok ? executed.order.ticket : -1 });
    }
    await expect(h.send('k', 0.5)).rejects.toMatchObject({ code: 'IDEMPOTENCY_KEY_REUSED' });
    // Durable: another restart replays it without asking.
    h.kill();
    await h.bind();
    h.broker.lookupFails = true;
    expect(await h.send('k', 0.1)).toMatchObject({ status: 200, replay: true });
    expect(h.broker.executed.get('k')).toBe(1);
    h.close();
  });

  it('a shard killed mid-order whose order the broker never saw: the retry answers 409 (it might still be in transit), nothing is sent', async () => {
    const h = await killedMidOrder('k');
    h.broker.results.clear();
    await h.bind();
    await expect(h.send('k', 0.1)).rejects.toMatchObject({ code: 'IDEMPOTENCY_UNCERTAIN' });
    await expect(h.send('k', 0.1)).rejects.toMatchObject({ code: 'IDEMPOTENCY_UNCERTAIN' });
    expect(h.broker.executed.get('k')).toBe(1);
    h.close();
  });

  it('property: any interleaving of sends, retries, changed params, timeouts after send and shard kills → at most one order per id; every answer is the original result, 409 or 422', async () => {
    const step = fc.oneof(
      fc.record({
        t: fc.constant('send' as const),
        id: fc.constantFrom('a', 'b', 'c'),
        v: fc.constantFrom(0.1, 0.2),
        fault: fc.constantFrom<Fault>('none', 'none', 'reject', 'timeoutFound', 'timeoutLost', 'timeoutUnknown', 'hang'),
        copies: fc.integer({ min: 1, max: 3 }),
      }),
      fc.record({ t: fc.constant('kill' as const) }),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 25 }), async (steps) => {
        const h = harness();
        await h.bind();
        // Per id: the params it was first claimed with, and the first final answer seen.
        const model = new Map<string, { v: number; first?: TradeReply; uncertain?: boolean; hangingUntilKill?: boolean }>();
        const hanging: Promise<Outcome>[] = [];
        try {
          for (const s of steps) {
            if (s.t === 'kill') {
              h.kill();
              for (const o of await Promise.all(hanging.splice(0))) expect(o.kind).toBe('error');
              for (const m of model.values()) m.hangingUntilKill = false;
              await h.bind();
              continue;
            }
            const pendingHang = model.get(s.id)?.hangingUntilKill;
            if (pendingHang && s.v === model.get(s.id)!.v) {
              // Same id and params while the first send hangs: these wait for it (and fail at the kill).
              hanging.push(...Array.from({ length: s.copies }, () => settle(h.send(s.id, s.v))));
              continue;
            }
            const known = model.get(s.id);
            const fresh = !known;
            h.broker.nextFault = fresh ? s.fault : 'none';
            const runs = Array.from({ length: s.copies }, () => settle(h.send(s.id, s.v)));
            if (fresh) model.set(s.id, { v: s.v });
            const m = model.get(s.id)!;
            if (fresh && s.fault === 'hang') {
              hanging.push(...runs);
              m.uncertain = true;
              m.hangingUntilKill = true; // until the next kill the copies wait
              await new Promise((r) => setImmediate(r));
              continue;
            }
            // A reply lost and its broker not asked: 409 (not final) until a later request asks.
            if (fresh && s.fault === 'timeoutLost') m.uncertain = true;
            const outs = await Promise.all(runs);
            for (const o of outs) {
              if (o.kind === 'error') {
                if (o.code === 'IDEMPOTENCY_KEY_REUSED') {
                  expect(s.v).not.toBe(m.v);
                } else if (o.code === 'IDEMPOTENCY_UNCERTAIN') {
                  expect(m.uncertain).toBe(true);
                } else {
                  // Only the attempt that actually lost its reply may fail otherwise.
                  expect(fresh && (s.fault === 'timeoutUnknown' || s.fault === 'timeoutLost') && o.code === 'TERMINAL_ERROR').toBe(true);
                  m.uncertain = true;
                }
              } else {
                expect(s.v).toBe(m.v);
                if (!m.first) m.first = { ...o.reply, replay: false };
                expect({ ...o.reply, replay: false }).toEqual(m.first);
              }
            }
          }
          for (const [, n] of h.broker.executed) expect(n).toBeLessThanOrEqual(1);
        } finally {
          h.close();
        }
      }),
      { numRuns: 60 },
    );
  }, 120_000);
});
