// The claiming request is answered as soon as the broker replies; the record takes the outcome
// and commits it a turn later (accountTrade.ts `outcome`/`flush`). These tests pin what that
// window may and may not change: a same-id retry inside it still gets the original result, a
// host restarted from the disk as it is at the moment of the reply (a crash in the window) asks the
// broker about the record's request id and answers the retry with the original result (or 409 when
// the broker cannot tell), never a second order, and once the turn has passed the result is durable
// and replayed by a restarted host.
import { mkdtempSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import type { BrokerConnection, BrokerCredentials, TradeOptions } from '../../src/broker/types.js';
import { RETCODE_DONE, type OrderRequest, type TradeResult } from '../../src/market/orders.js';
import type { ServerInfo } from '../../src/market/server.js';
import { SecretBox } from '../../src/crypto/secretBox.js';
import { ApiError } from '../../src/errors.js';
import { createLogger } from '../../src/log.js';
import type { TradeReply } from '../../src/runtime/hosts/accountCommands.js';
import { createAccountHost } from '../../src/runtime/hosts/accounts.js';
import type { ActorHost, ShardContext } from '../../src/runtime/hosts/context.js';
import { openDb, type Db } from '../../src/store/db.js';
import { shardSettings } from '../../src/runtime/settings.js';
import { systemClock } from '../../src/util/clock.js';

const server: ServerInfo = { name: 'Fake-P5', platform: 'P5', build: 4620, company: 'Fake', timeZone: { description: 'UTC', standardOffsetMinutes: 0, dst: 'none' } };

/** An upstream that fills every order and counts executions per clientOrderId (no dedup of its own);
 *  it keeps what it did per request id, as a broker does (`remembers = false`: it cannot tell). */
class Upstream {
  executed = new Map<string, number>();
  done = new Map<string, TradeResult>();
  remembers = true;
  ticket = 500;
  conn(c: BrokerCredentials): BrokerConnection {
    const up = this;
    let state = 'disconnected';
    return {
      server, login: c.login,
      get state() { return state; },
      async connect() { state = 'connected'; },
      async disconnect() { state = 'disconnected'; },
      on() { return () => {}; },
      async orderSend(req: OrderRequest, opts?: TradeOptions): Promise<TradeResult> {
        const id = opts?.requestId?.split('/')[1] ?? 'anon';
        up.executed.set(id, (up.executed.get(id) ?? 0) + 1);
        const result: TradeResult = {
          ok: true, retcode: RETCODE_DONE, deals: [],
          order: {
            kind: 'order', ticket: ++up.ticket, symbol: req.symbol, type: req.type, state: 'filled', volume: req.volume, volumeInitial: req.volume,
            openPrice: 1.1, openTimeMsc: 1_700_000_000_000, sl: 0, tp: 0, magic: 0, comment: '', commission: 0, swap: 0, profit: 0, positionId: up.ticket,
          },
        };
        if (opts?.requestId) up.done.set(opts.requestId, result);
        return result;
      },
      async lookupRequest(requestId: string) {
        const result = up.remembers ? up.done.get(requestId) : undefined;
        return result ? { requestId, timeMsc: 1, result } : null;
      },
    } as unknown as BrokerConnection;
  }
}

const accountId = '33333333-3333-4333-8333-333333333333';
const dirs: string[] = [];
const dbs: Db[] = [];
const hosts: ActorHost[] = [];
afterEach(() => {
  for (const h of hosts.splice(0)) h.stop();
  for (const d of dbs.splice(0)) d.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function setup() {
  const dir = mkdtempSync(join(tmpdir(), 'tagw-idem-deferred-'));
  dirs.push(dir);
  const key = randomBytes(32);
  const up = new Upstream();
  /** A host on its own connection to the same database, rehydrated from what is on disk now. */
  const boot = () => {
    const db = openDb(dir);
    dbs.push(db);
    const ctx: ShardContext = { shard: 0, shards: 1, db, log: createLogger('silent'), settings: shardSettings({ secretKeyHex: key.toString('hex') }), clock: systemClock, emit: () => {}, owns: () => true };
    const host = createAccountHost(ctx, { broker: { factory: (c) => up.conn(c), stop: () => {} } });
    hosts.push(host);
    host.rehydrate();
    return host;
  };
  const bind = (host: ActorHost) =>
    host.handlers['account.bind']!({ accountId, customerId: 'c', server: 'Fake-P5', login: '9', passwordEnc: new SecretBox(key).seal('pw', accountId) });
  const send = (host: ActorHost, id: string): Promise<TradeReply> =>
    Promise.resolve(host.handlers['account.trade']!({ accountId, op: 'OrderSend', args: { symbol: 'EURUSD', operation: 'Buy', volume: 0.1 }, clientOrderId: id }));
  return { up, boot, bind, send };
}

const codeOf = (e: unknown) => (e instanceof ApiError ? e.code : `thrown:${String(e)}`);
const turn = () => new Promise((r) => setImmediate(r));

it('a same-id retry right after the reply (before the record has taken the outcome) gets the original result', async () => {
  const t = setup();
  const host = t.boot();
  await t.bind(host);
  const first = await t.send(host, 'r1');
  expect(first).toMatchObject({ status: 200, replay: false });
  // No turn has passed: the record is still taking the outcome.
  const [a, b] = await Promise.all([t.send(host, 'r1'), t.send(host, 'r1')]);
  expect(a).toEqual({ ...first, replay: true });
  expect(b).toEqual({ ...first, replay: true });
  expect(t.up.executed.get('r1')).toBe(1);
});

it.each([
  ['the broker keeps its request ids: the original result', true],
  ['a broker that cannot tell: 409', false],
])('a crash between the reply and the outcome commit: the restarted host asks the broker; %s, never a second order', async (_name, remembers) => {
  const t = setup();
  t.up.remembers = remembers;
  const host = t.boot();
  await t.bind(host);
  const first = await t.send(host, 'c1');
  // "Crash" now: a new host rehydrates from the disk as it is at this moment.
  const restarted = t.boot();
  await t.bind(restarted);
  let retry: TradeReply | string;
  try {
    retry = await t.send(restarted, 'c1');
  } catch (e) {
    retry = codeOf(e);
  }
  expect(retry).toEqual(remembers ? { ...first, replay: true } : 'IDEMPOTENCY_UNCERTAIN');
  expect(t.up.executed.get('c1')).toBe(1);
});

it('once a turn has passed the result is durable: a restarted host replays it', async () => {
  const t = setup();
  const host = t.boot();
  await t.bind(host);
  const first = await t.send(host, 'd1');
  await turn();
  await turn();
  const restarted = t.boot();
  await t.bind(restarted);
  expect(await t.send(restarted, 'd1')).toEqual({ ...first, replay: true });
  expect(t.up.executed.get('d1')).toBe(1);
});

it('a graceful stop right after the reply writes the outcome first', async () => {
  const t = setup();
  const host = t.boot();
  await t.bind(host);
  const first = await t.send(host, 's1');
  host.stop();
  const restarted = t.boot();
  await t.bind(restarted);
  expect(await t.send(restarted, 's1')).toEqual({ ...first, replay: true });
  expect(t.up.executed.get('s1')).toBe(1);
});

it('settled records are let go from memory and answered from their rows: replay, 422, and a free id once expired', async () => {
  const t = setup();
  const host = t.boot();
  await t.bind(host);
  const idle = host.actorCount(); // the account's connection
  const first = new Map<string, TradeReply>();
  for (let i = 0; i < 20; i++) first.set(`m${i}`, await t.send(host, `m${i}`));
  await turn();
  await turn();
  expect(host.actorCount()).toBe(idle);
  // Brought back from its row to answer, and let go again.
  expect(await t.send(host, 'm5')).toEqual({ ...first.get('m5'), replay: true });
  expect(host.actorCount()).toBe(idle);
  const other = host.handlers['account.trade']!({ accountId, op: 'OrderSend', args: { symbol: 'EURUSD', operation: 'Buy', volume: 0.2 }, clientOrderId: 'm5' });
  await expect(Promise.resolve(other)).rejects.toMatchObject({ code: 'IDEMPOTENCY_KEY_REUSED' });
  expect(t.up.executed.get('m5')).toBe(1);
  // An expired row not swept yet: the id is free again (a new order).
  dbs.at(-1)!.prepare("UPDATE idempotency SET expires_at = 1 WHERE client_order_id = 'm7'").run();
  expect(await t.send(host, 'm7')).toMatchObject({ status: 200, replay: false });
  expect(t.up.executed.get('m7')).toBe(2);
});
