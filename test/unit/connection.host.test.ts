// The account host's rolling upgrade, with a fake upstream that counts live connections and lets
// the test hold a request in flight: the old connection stays up until that request finished,
// requests arriving meanwhile are served by the replacement, and two connections are never live.
import { mkdtempSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import type { BrokerConnection, BrokerCredentials } from '../../src/broker/types.js';
import type { AccountSummary } from '../../src/market/account.js';
import type { ServerInfo } from '../../src/market/server.js';
import { SecretBox } from '../../src/crypto/secretBox.js';
import { createLogger } from '../../src/log.js';
import { createAccountHost } from '../../src/runtime/hosts/accounts.js';
import type { AccountEvent } from '../../src/runtime/hosts/accountRegistry.js';
import type { ShardContext } from '../../src/runtime/hosts/context.js';
import { openDb, type Db } from '../../src/store/db.js';
import { shardSettings } from '../../src/runtime/settings.js';
import { systemClock } from '../../src/util/clock.js';
import { until } from '../helpers/until.js';

const server: ServerInfo = { name: 'Fake-P5', platform: 'P5', build: 4620, company: 'Fake', timeZone: { description: 'UTC', standardOffsetMinutes: 0, dst: 'none' } };

class Upstream {
  live = 0;
  maxLive = 0;
  made = 0;
  log: string[] = [];
  hold: Promise<void> | null = null;
  /** Listeners of positions/orders/deal per connection (index = connection number). */
  accountListeners: number[] = [];
  conn(_c: BrokerCredentials): BrokerConnection {
    const n = ++this.made;
    const up = this;
    let state = 'disconnected';
    return {
      server, login: 'l',
      get state() { return state; },
      async connect() { state = 'connected'; up.live++; up.maxLive = Math.max(up.maxLive, up.live); up.log.push(`connect#${n}`); },
      async disconnect() { if (state === 'connected') up.live--; state = 'disconnected'; up.log.push(`disconnect#${n}`); },
      on(event: string) {
        if (event !== 'positions' && event !== 'orders' && event !== 'deal') return () => {};
        up.accountListeners[n] = (up.accountListeners[n] ?? 0) + 1;
        return () => { up.accountListeners[n]!--; };
      },
      async accountSummary(): Promise<AccountSummary> {
        if (up.hold) await up.hold;
        up.log.push(`summary#${n}`);
        return { balance: n, credit: 0, equity: n, profit: 0, margin: 0, freeMargin: n, marginLevel: 0, leverage: 100, currency: 'USD' };
      },
      async subscribe() {},
    } as unknown as BrokerConnection;
  }
}

let dir = '';
let db: Db | undefined;
afterEach(() => {
  db?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** An account host over a fake upstream in a temp database, with account `id` bound. */
async function bound(id: string) {
  dir = mkdtempSync(join(tmpdir(), 'tagw-host-'));
  db = openDb(dir);
  const key = randomBytes(32);
  const up = new Upstream();
  const ctx: ShardContext = { shard: 0, shards: 1, db, log: createLogger('silent'), settings: shardSettings({ secretKeyHex: key.toString('hex') }), clock: systemClock, emit: () => {}, owns: () => true };
  const host = createAccountHost(ctx, { broker: { factory: (c) => up.conn(c), stop: () => {} } });
  await host.handlers['account.bind']!({ accountId: id, customerId: 'c', server: 'Fake-P5', login: 'l', passwordEnc: new SecretBox(key).seal('pw', id) });
  return { up, ctx, host, id };
}

it('rolling upgrade: in-flight work finishes on the old connection, then the new one connects; never two live', async () => {
  const { up, ctx, host, id } = await bound('22222222-2222-4222-8222-222222222222');
  const phases: string[] = [];
  (await ctx.accounts!.ensure(id)).on((e: AccountEvent) => { if (e.type === 'phase') phases.push(e.phase); });
  up.log = [];

  let release!: () => void;
  up.hold = new Promise<void>((r) => (release = r));
  const inflight = Promise.resolve(host.handlers['account.op']!({ accountId: id, op: 'AccountSummary', args: {} }));
  await new Promise((r) => setImmediate(r));
  const upgrade = Promise.resolve(host.handlers['account.upgrade']!({ accountId: id, build: 4000 }));
  // Until the replacement is made (the old slot set aside): from then on a request waits for it. After
  // a 20 ms sleep instead, a loaded machine could send `during` to the old connection still in use.
  await until(() => up.made === 3, 'the replacement connection to be made');
  // The old connection is still up: its request has not finished.
  expect(up.log).toEqual([]);
  const during = Promise.resolve(host.handlers['account.op']!({ accountId: id, op: 'AccountSummary', args: {} }));
  up.hold = null;
  release();
  const first = (await inflight) as AccountSummary & { synced: boolean };
  const st = await upgrade;
  const second = (await during) as AccountSummary;
  expect(first.balance).toBe(2); // served by the connection made at bind (#2; #1 was the credential probe)
  expect(second.balance).toBe(3); // the replacement
  expect(st).toMatchObject({ build: 4000, generation: 1, phase: 'connected' });
  expect(up.log.indexOf('summary#2')).toBeLessThan(up.log.indexOf('disconnect#2'));
  expect(up.log.indexOf('disconnect#2')).toBeLessThan(up.log.indexOf('connect#3'));
  expect(up.maxLive).toBe(1);
  expect(up.live).toBe(1);
  host.stop();
});

it('positions, orders and deals are subscribed at the broker only while the account has listeners, on the replacement too', async () => {
  const { up, ctx, host, id } = await bound('33333333-3333-4333-8333-333333333333');
  const rt = await ctx.accounts!.ensure(id);
  const live = () => up.made; // the connection made last is the live one
  expect(up.accountListeners[live()] ?? 0).toBe(0);
  const off = rt.on(() => undefined);
  const off2 = rt.on(() => undefined);
  expect(up.accountListeners[live()]).toBe(3);
  off2();
  expect(up.accountListeners[live()]).toBe(3);
  const before = live();
  await host.handlers['account.upgrade']!({ accountId: id, build: 4000 });
  expect(live()).toBe(before + 1);
  expect(up.accountListeners[before]).toBe(0); // the old connection let go
  expect(up.accountListeners[live()]).toBe(3);
  off();
  expect(up.accountListeners[live()]).toBe(0);
  host.stop();
});

it('a restart restores bound accounts in slices after the shard is ready; one asked for before its turn starts at once', async () => {
  const ids = Array.from({ length: 600 }, (_, i) => `44444444-4444-4444-8444-${String(i).padStart(12, '0')}`);
  dir = mkdtempSync(join(tmpdir(), 'tagw-host-'));
  db = openDb(dir);
  const key = randomBytes(32);
  const box = new SecretBox(key);
  const first = new Upstream();
  const ctx: ShardContext = { shard: 0, shards: 1, db, log: createLogger('silent'), settings: shardSettings({ secretKeyHex: key.toString('hex') }), clock: systemClock, emit: () => {}, owns: () => true };
  const before = createAccountHost(ctx, { broker: { factory: (c) => first.conn(c), stop: () => {} } });
  db.prepare("INSERT INTO customers (id, name, created_at) VALUES ('c', 'c', 0)").run();
  const seat = db.prepare('INSERT INTO seats (id, customer_id, private_hosting, created_at) VALUES (?, ?, 0, 0)');
  for (const id of ids) await before.handlers['account.bind']!({ accountId: id, customerId: 'c', server: 'Fake-P5', login: id, passwordEnc: box.seal('pw', id), waitMs: 0 });
  for (const id of ids) seat.run(id, 'c');
  before.stop();

  const up = new Upstream();
  const host = createAccountHost({ ...ctx }, { broker: { factory: (c) => up.conn(c), stop: () => {} } });
  // Nothing read nor started yet (the bindings are read a page per slice): the shard can answer
  // ("ready") before any account connects; what rehydrate counts is idempotency records with work left.
  expect(host.rehydrate()).toBe(0);
  expect(up.made).toBe(0);
  const last = ids[ids.length - 1]!;
  const st = (await host.handlers['account.status']!({ accountId: last })) as { accountId: string };
  expect(st.accountId).toBe(last);
  expect(up.made).toBeGreaterThanOrEqual(1);
  expect(up.made).toBeLessThan(ids.length);
  for (let i = 0; i < 20 && up.made < ids.length; i++) await new Promise((r) => setImmediate(r));
  // Every account exactly once: the one started on demand is not started again by its slice.
  expect(up.made).toBe(ids.length);
  expect(host.actorCount()).toBe(ids.length);
  host.stop();
});
