// One login, one copy of its simulated account in a process. Each shard thread runs a simulator
// over the one SQLite file, and accounts land on shards by their random ids: the accounts a login is
// bound to over time (a seat removed and the login bound again, an account re-bound to another
// login, a bind's probe) can sit in different shards. A copy left in one shard (it kept it for its
// open orders) and a copy loaded by another both act on the market: a pending order filled by
// both, the second copy's journal row refused (the same sequence number) and its store stopped for
// good (the shard restarts, every account on it with it). Two account hosts over one database, as
// two shards.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { SimBrokerConnection } from '../../src/broker/sim.js';
import { SecretBox } from '../../src/crypto/secretBox.js';
import { createLogger } from '../../src/log.js';
import { createAccountHost } from '../../src/runtime/hosts/accounts.js';
import type { TradeReply } from '../../src/runtime/hosts/accountCommands.js';
import { shardSettings } from '../../src/runtime/settings.js';
import { ManualClock, Simulator } from '../../src/sim/simulator.js';
import { openDb } from '../../src/store/db.js';
import { SqliteSimStore } from '../../src/store/simStore.js';
import { T0, testConfig } from '../helpers/sim-helpers.js';
import { tempDir, useCleanup } from '../helpers/tradingHost.js';

const c = useCleanup();
const key = randomBytes(32);
const box = new SecretBox(key);
const SERVER = 'Sim-P5-Demo';
const LOGIN = 'one-copy-1';

function shards(n: number) {
  const dir = tempDir(c, 'tagw-sim-one-copy-');
  const clock = new ManualClock(T0);
  return Array.from({ length: n }, (_, shard) => {
    const db = openDb(dir);
    c.dbs.push(db);
    const store = new SqliteSimStore(db, { checkpointMs: 0 });
    const sim = new Simulator({ config: testConfig(), store, clock });
    const letGone: string[] = [];
    const source = {
      factory: (cr: ConstructorParameters<typeof SimBrokerConnection>[1]) => new SimBrokerConnection(sim, cr), stop: () => sim.stop(),
      letGo: (s: string, l: string) => {
        letGone.push(l);
        return sim.server(s)?.forget(l) ?? true;
      },
    };
    const host = createAccountHost({
      shard, shards: n, db, log: createLogger('silent'), settings: shardSettings({ secretKeyHex: key.toString('hex') }), clock, emit: () => {}, owns: () => true,
    }, { broker: source });
    c.hosts.push(host);
    host.rehydrate();
    const held = () => sim.server(SERVER)!.accounts.has(LOGIN);
    const bind = (accountId: string, login = LOGIN) => host.handlers['account.bind']!({ accountId, customerId: 'c', server: SERVER, login, passwordEnc: box.seal('pw', accountId) });
    const trade = async (accountId: string, op: 'OrderSend', args: Record<string, unknown>, clientOrderId: string) => {
      const r = (await host.handlers['account.trade']!({ accountId, op, args, clientOrderId })) as TradeReply;
      expect(r.status, r.json).toBe(200);
      return JSON.parse(r.json) as { ticket: number };
    };
    const read = (accountId: string, op: string, args: Record<string, unknown> = {}) => Promise.resolve(host.handlers['account.op']!({ accountId, op, args })) as Promise<Record<string, unknown>>;
    return { db, store, sim, host, held, bind, trade, read, clock, letGone };
  });
}

type Shard = ReturnType<typeof shards>[number];

/** A turn or three: the group commit, then the checkpoint pass after it. */
const turn = async () => {
  for (let i = 0; i < 3; i++) await new Promise((r) => setImmediate(r));
};

/** A buy limit below the market, on `accountId`: filled later by the market's own moves. */
async function pendingBuy(s: Shard, accountId: string) {
  const q = (await s.read(accountId, 'GetQuote', { symbol: 'BTCUSD' })) as { ask: number };
  return s.trade(accountId, 'OrderSend', { symbol: 'BTCUSD', operation: 'BuyLimit', volume: 0.01, price: +(q.ask * 0.9995).toFixed(2) }, `limit-${accountId}`);
}

/** The market moves on every shard (each simulator shows the same one) until `done`. */
async function runMarket(all: ReturnType<typeof shards>, done: () => Promise<boolean>) {
  for (let i = 0; i < 3000 && !(await done()); i++) {
    all[0]!.clock.advance(1000);
    for (const s of all) s.sim.advance();
    await turn();
  }
}

/** The shard whose account has the login still trades (its store did not stop on a refused write). */
async function stillTrades(s: Shard, accountId: string) {
  await s.trade(accountId, 'OrderSend', { symbol: 'BTCUSD', operation: 'Buy', volume: 0.01 }, `after-${accountId}`);
  await turn();
  await s.trade(accountId, 'OrderSend', { symbol: 'BTCUSD', operation: 'Buy', volume: 0.01 }, `after2-${accountId}`);
}

/** The market runs on every shard of `all` until `order` fills on `s`: it filled once (one copy
 *  of the login acted on it), and `s`, whose account `accountId` has the login, still trades. */
async function fillsOnce(all: Shard[], s: Shard, accountId: string, order: number) {
  await runMarket(all, async () => fills(s, order).length > 0);
  await turn();
  expect(fills(s, order)).toHaveLength(1);
  await stillTrades(s, accountId);
}

/** Fills of `order` in the login's journal (every shard's store writes the same tables). */
function fills(s: Shard, order: number) {
  return s.store.deals(SERVER, LOGIN, 0, Number.MAX_SAFE_INTEGER).filter((d) => d.order === order);
}

describe('a login has one copy of its simulated account in a process', () => {
  it('a removed seat with an order open leaves no copy in its shard: bound again on another shard, the order fills once', async () => {
    const [a, b] = shards(2) as [Shard, Shard];
    const first = '11111111-1111-4111-8111-111111111111';
    await a.bind(first);
    const limit = await pendingBuy(a, first);
    await turn();
    a.host.handlers['account.remove']!({ accountId: first });
    expect(a.held()).toBe(false);

    const second = '22222222-2222-4222-8222-222222222222';
    await b.bind(second);
    expect(b.held()).toBe(true);
    expect(((await b.read(second, 'OpenedOrders')) as unknown as { ticket: number }[]).map((o) => o.ticket)).toContain(limit.ticket);
    await fillsOnce([a, b], b, second, limit.ticket);
    expect(a.held()).toBe(false);
  });

  it('an account bound to another login lets the old one go: bound on another shard, its order fills once', async () => {
    const [a, b] = shards(2) as [Shard, Shard];
    const first = '33333333-3333-4333-8333-333333333333';
    await a.bind(first);
    const limit = await pendingBuy(a, first);
    await turn();
    await a.bind(first, 'one-copy-other');
    expect(a.held()).toBe(false);

    const second = '44444444-4444-4444-8444-444444444444';
    await b.bind(second);
    await fillsOnce([a, b], b, second, limit.ticket);
  });

  it('a probe of a login bound to an account of the same shard leaves its copy, order and all', async () => {
    const [a] = shards(2) as [Shard];
    const first = '88888888-8888-4888-8888-888888888888';
    // Its seat, as the gateway has one (the host finds the login's account by its live seat).
    a.db.exec(`INSERT INTO customers (id, name, created_at) VALUES ('c', 'c', 0); INSERT INTO seats (id, customer_id, private_hosting, created_at) VALUES ('${first}', 'c', 0, 0)`);
    await a.bind(first);
    const limit = await pendingBuy(a, first);
    await turn();
    const other = '99999999-9999-4999-8999-999999999999';
    a.letGone.length = 0; // the bind's own probe came before its account ran here
    expect(await a.host.handlers['account.probe']!({ accountId: other, server: SERVER, login: LOGIN, passwordEnc: box.seal('pw', other) })).toEqual({ reached: true });
    expect(a.held()).toBe(true);
    expect(a.letGone).toEqual([]);
    await fillsOnce([a], a, first, limit.ticket);
  });

  it("a bind's probe with a wrong password loads nothing for good: the bind on another shard fills its order once", async () => {
    const [a, b] = shards(2) as [Shard, Shard];
    const first = '55555555-5555-4555-8555-555555555555';
    await b.bind(first);
    const limit = await pendingBuy(b, first);
    await turn();
    b.host.handlers['account.remove']!({ accountId: first });
    // Shard a tries the login with a wrong password (a bind refused), then with the right one as a probe only.
    const wrong = '66666666-6666-4666-8666-666666666666';
    await expect(Promise.resolve(a.host.handlers['account.bind']!({ accountId: wrong, customerId: 'c', server: SERVER, login: LOGIN, passwordEnc: box.seal('nope', wrong) }))).rejects.toMatchObject({ code: 'BROKER_AUTH_FAILED' });
    expect(a.held()).toBe(false);
    expect(await a.host.handlers['account.probe']!({ accountId: wrong, server: SERVER, login: LOGIN, passwordEnc: box.seal('pw', wrong) })).toEqual({ reached: true });
    expect(a.held()).toBe(false);

    const second = '77777777-7777-4777-8777-777777777777';
    await b.bind(second);
    await fillsOnce([a, b], b, second, limit.ticket);
  });
});
