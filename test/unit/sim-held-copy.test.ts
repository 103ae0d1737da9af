// A login whose simulated copy a shard cannot let go is loaded by no other shard (docs/simulator.md
// "one copy of a login", src/http/routes/heldCopies.ts). Two shards (account hosts) over one SQLite
// file, and the main thread's bind (bindBroker) over them: a login with an open position on shard A,
// A's disk full (its writes refused as a full disk refuses them: the equity point of the clock waits
// in memory), its seat removed: A's copy cannot be checkpointed, so it stays. Before, the login bound
// on shard B was loaded there from the older state on disk, and once the disk had room the two
// copies' journal rows collided (the same sequence numbers): the later refused, that shard's store
// stopped (the shard restarts, every account on it). Now B's bind answers 503 STORAGE_UNAVAILABLE
// with retry-after and loads nothing until A has written and let go its copy, then binds the latest state.
import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SimBrokerConnection } from '../../src/broker/sim.js';
import { SecretBox } from '../../src/crypto/secretBox.js';
import { ApiError } from '../../src/errors.js';
import { bindBroker } from '../../src/http/routes/classicBinding.js';
import { clearHeldCopy, HeldCopies, noteHeldCopy } from '../../src/http/routes/heldCopies.js';
import type { Services } from '../../src/http/services.js';
import { createLogger } from '../../src/log.js';
import type { TradeReply } from '../../src/runtime/hosts/accountCommands.js';
import { createAccountHost } from '../../src/runtime/hosts/accounts.js';
import type { ActorHost } from '../../src/runtime/hosts/context.js';
import { shardSettings } from '../../src/runtime/settings.js';
import { ManualClock, Simulator } from '../../src/sim/simulator.js';
import { AccountStore } from '../../src/store/accounts.js';
import { openDb } from '../../src/store/db.js';
import { FullDisk } from '../../src/store/fullDisk.js';
import { SqliteSimStore } from '../../src/store/simStore.js';
import { T0, testConfig } from '../helpers/sim-helpers.js';
import { tempDir, useCleanup } from '../helpers/tradingHost.js';
import { until } from '../helpers/until.js';

const c = useCleanup();
const key = randomBytes(32);
const SERVER = 'Sim-P5-Demo';
const LOGIN = 'held-copy-1';
const FIRST = '11111111-1111-4111-8111-111111111111';
const SECOND = '22222222-2222-4222-8222-222222222222';

/** A turn or three: the group commit, then the checkpoint pass after it. */
const turn = async () => {
  for (let i = 0; i < 3; i++) await new Promise((r) => setImmediate(r));
};

/** Two shards over one file, and the main thread's services over them (accounts routed by `route`). */
function gateway(route: Record<string, number>) {
  const dir = tempDir(c, 'tagw-sim-held-copy-');
  const clock = new ManualClock(T0);
  const shards = [0, 1].map((shard) => {
    const db = openDb(dir);
    c.dbs.push(db);
    // This shard's writes of the simulator's journal and checkpoints fail as a full disk fails them, while `full` holds.
    const disk = { full: false };
    db.function('full_now', { deterministic: false }, () => {
      if (disk.full) throw Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' });
      return 0;
    });
    const fatal: unknown[] = [];
    const store = new SqliteSimStore(db, { checkpointMs: 0, clock, onError: (err) => fatal.push(err), fullDisk: new FullDisk({ log: createLogger('silent'), retryMs: 10 }) });
    for (const [name, table, op] of [['j', 'sim_journal', 'INSERT'], ['si', 'sim_state', 'INSERT'], ['su', 'sim_state', 'UPDATE']]) {
      db.exec(`CREATE TEMP TRIGGER full_${name} BEFORE ${op} ON ${table} WHEN full_now() BEGIN SELECT 1; END`);
    }
    const sim = new Simulator({ config: testConfig(), store, clock });
    const source = {
      factory: (cr: ConstructorParameters<typeof SimBrokerConnection>[1]) => new SimBrokerConnection(sim, cr), stop: () => sim.stop(),
      letGo: (s: string, l: string) => sim.server(s)?.forget(l) ?? true,
    };
    const host: ActorHost = createAccountHost({
      shard, shards: 2, db, log: createLogger('silent'), settings: shardSettings({ secretKeyHex: key.toString('hex') }), clock, emit: () => {}, owns: () => true,
    }, { broker: source });
    c.hosts.push(host);
    host.rehydrate();
    const held = () => sim.server(SERVER)!.accounts.has(LOGIN);
    return { db, store, sim, host, disk, fatal, held };
  });
  const call = (shard: number, op: string, args: unknown) => Promise.resolve((shards[shard]!.host.handlers as Record<string, (a: unknown) => unknown>)[op]!(args));
  const s = {
    secretBox: new SecretBox(key), clock, tenancyWrites: { clustered: false },
    shards: { shardFor: (id: string) => route[id]!, callShard: call, call: (id: string, op: string, args: unknown) => call(route[id]!, op, args) },
  } as unknown as Services;
  const bind = (accountId: string) => bindBroker(s, { accountId, customerId: 'c', server: SERVER, user: LOGIN, password: 'pw' });
  /** DELETE /v1/seats/{id}: its shard stops its account and lets the login go (management.ts). */
  const remove = async (accountId: string) => noteHeldCopy(s, accountId, await s.shards.call(accountId, 'account.remove', { accountId }));
  const trade = async (accountId: string, args: Record<string, unknown>, clientOrderId: string) => {
    const r = (await s.shards.call(accountId, 'account.trade', { accountId, op: 'OrderSend', args, clientOrderId })) as TradeReply;
    expect(r.status, r.json).toBe(200);
    return JSON.parse(r.json) as { ticket: number };
  };
  const read = (accountId: string, op: string, args: Record<string, unknown> = {}) => s.shards.call(accountId, 'account.op', { accountId, op, args }) as Promise<unknown>;
  /** The clock's next minute on every shard: an equity point of each open position (a background write). */
  const minute = async () => {
    clock.advance(60_000);
    for (const sh of shards) sh.sim.advance();
    await turn();
  };
  return { s, shards, bind, remove, trade, read, minute, clock };
}

const positions = async (g: ReturnType<typeof gateway>, accountId: string) =>
  ((await g.read(accountId, 'OpenedOrders')) as { ticket: number; type: string }[]).filter((o) => /Buy|Sell/.test(o.type) && !/Limit|Stop/.test(o.type)).map((o) => o.ticket);
const equityPoints = (g: ReturnType<typeof gateway>, shard: number) => g.shards[shard]!.store.equity(SERVER, LOGIN, 0).length;

/** The login bound on FIRST with a position open (the ticket returned), then FIRST's shard's disk
 *  full: the clock's next equity point waits in its memory. `before`: the equity points on disk. */
async function positionThenFull(g: ReturnType<typeof gateway>) {
  await g.bind(FIRST);
  const buy = await g.trade(FIRST, { symbol: 'BTCUSD', operation: 'Buy', volume: 0.01 }, 'buy-1');
  await g.minute();
  const before = equityPoints(g, 0);
  g.shards[g.s.shards.shardFor(FIRST)]!.disk.full = true;
  await g.minute();
  return { buy, before };
}

describe('a login whose copy a shard could not let go (a full disk) is loaded by no other shard', () => {
  it("a removed seat's login bound on another shard: 503 STORAGE_UNAVAILABLE until the disk frees, then the latest state, no fail-stop", async () => {
    const g = gateway({ [FIRST]: 0, [SECOND]: 1 });
    const [a, b] = g.shards as [(typeof g.shards)[0], (typeof g.shards)[0]];
    const { buy, before } = await positionThenFull(g);
    expect(a.store.pendingCommit()).not.toBeNull();
    expect(await g.remove(FIRST)).toEqual({ stopped: true });
    expect(a.held()).toBe(true); // its checkpoint could not be written: the copy stays
    expect(b.held()).toBe(false);

    // Bound on shard b meanwhile: refused, nothing loaded there, and again while the disk stays full.
    for (let i = 0; i < 2; i++) {
      const err = await g.bind(SECOND).then(() => undefined, (e: unknown) => e);
      expect(err).toBeInstanceOf(ApiError);
      expect(err).toMatchObject({ code: 'STORAGE_UNAVAILABLE', status: 503, headers: { 'retry-after': '5' } });
      expect(b.held()).toBe(false);
      expect(new AccountStore(b.db).get(SECOND)).toBeUndefined(); // nothing bound
      await g.minute();
    }

    // Room again: the bind has shard a write and let go of its copy, and binds the latest state on b.
    a.disk.full = false;
    const status = await g.bind(SECOND);
    expect(status).toMatchObject({ accountId: SECOND });
    expect(status).not.toHaveProperty('heldCopy');
    expect(a.held()).toBe(false);
    expect(b.held()).toBe(true);
    expect(await positions(g, SECOND)).toContain(buy.ticket);
    expect(equityPoints(g, 1)).toBeGreaterThan(before);

    // Both shards write on: no collision, no store stopped.
    for (let i = 0; i < 3; i++) {
      await g.minute();
      await g.trade(SECOND, { symbol: 'BTCUSD', operation: 'Buy', volume: 0.01 }, `after-${i}`);
    }
    await until(() => a.store.pendingCommit() === null && b.store.pendingCommit() === null, 'every row written');
    expect(a.fatal).toEqual([]);
    expect(b.fatal).toEqual([]);
  });

  it('an account re-bound to another login on a full disk: the login it left is refused on another shard until its copy is written', async () => {
    const g = gateway({ [FIRST]: 0, [SECOND]: 1 });
    const [a, b] = g.shards as [(typeof g.shards)[0], (typeof g.shards)[0]];
    // The login it is re-bound to exists already (made on a full disk, it could not be: the bind would wait for its connection).
    const other = new SimBrokerConnection(a.sim, { server: SERVER, login: 'held-copy-other', password: 'pw' });
    await other.connect();
    await other.disconnect();
    const { buy } = await positionThenFull(g);
    // Re-bound to another login: the one it leaves cannot be checkpointed.
    const rebound = await bindBroker(g.s, { accountId: FIRST, customerId: 'c', server: SERVER, user: 'held-copy-other', password: 'pw' })
      .then((st) => st, (e: unknown) => e);
    expect(rebound).toMatchObject({ accountId: FIRST });
    expect(rebound).not.toHaveProperty('heldCopy');
    expect(a.held()).toBe(true);
    await expect(g.bind(SECOND)).rejects.toMatchObject({ code: 'STORAGE_UNAVAILABLE' });
    expect(b.held()).toBe(false);
    a.disk.full = false;
    await g.bind(SECOND);
    expect(a.held()).toBe(false);
    expect(await positions(g, SECOND)).toContain(buy.ticket);
    await g.trade(SECOND, { symbol: 'BTCUSD', operation: 'Buy', volume: 0.01 }, 'after');
    await g.minute();
    await until(() => a.store.pendingCommit() === null && b.store.pendingCommit() === null, 'every row written');
    expect([...a.fatal, ...b.fatal]).toEqual([]);
  });

  it('the holder binding the login again takes its own copy up, with no wait; a restarted holder holds nothing', async () => {
    const g = gateway({ [FIRST]: 0, [SECOND]: 0 });
    const [a] = g.shards;
    const { buy } = await positionThenFull(g);
    await g.remove(FIRST);
    expect(a!.held()).toBe(true);
    await g.bind(SECOND); // same shard: its own copy, as it was
    expect(await positions(g, SECOND)).toContain(buy.ticket);
    a!.disk.full = false;
    await until(() => a!.store.pendingCommit() === null, 'the waiting row written');
    expect(a!.fatal).toEqual([]);

    // A holder whose thread restarted holds nothing: asked, it says so, and the bind goes on.
    const t = new HeldCopies();
    t.held({ server: SERVER, login: LOGIN }, 0);
    await t.clearFor({ server: SERVER, login: LOGIN }, 1, () => Promise.resolve(false));
    expect(t.size).toBe(0);
  });
});

// The table as a state machine, against a model of the shards: each may hold the login's copy (told
// to the table by its reply, as account.remove / a re-bind tell it) and can let it go only while its
// disk has room. Whatever the sequence of removals, binds on any shard, disks filling and freeing,
// holders letting go by themselves (their next minute) and restarts: a bind never goes on while
// another shard holds a copy, and a bind with every disk free always goes on.
describe('HeldCopies', () => {
  it('never lets a second shard load a held login; with room, never refuses', async () => {
    const N = 3;
    const op = fc.oneof(
      fc.record({ k: fc.constant('bind' as const), shard: fc.nat(N - 1) }),
      fc.record({ k: fc.constant('unbind' as const) }),
      fc.record({ k: fc.constant('disk' as const), shard: fc.nat(N - 1), full: fc.boolean() }),
      fc.record({ k: fc.constant('tick' as const), shard: fc.nat(N - 1) }),
      fc.record({ k: fc.constant('restart' as const), shard: fc.nat(N - 1) }),
    );
    await fc.assert(fc.asyncProperty(fc.array(op, { maxLength: 40 }), async (ops) => {
      const table = new HeldCopies();
      const copy = { server: SERVER, login: LOGIN };
      const full = Array.from({ length: N }, () => false);
      /** Shards with a copy; `bound`: the one whose account binds the login, if any. */
      const copies = new Set<number>();
      let bound: number | undefined;
      const letGo = (shard: number) => {
        if (bound !== shard && !full[shard]) copies.delete(shard);
        return copies.has(shard);
      };
      for (const o of ops) {
        if (o.k === 'bind' && bound === undefined) {
          let refused = false;
          try {
            await table.clearFor(copy, o.shard, async (h) => letGo(h));
          } catch (err) {
            expect(err).toMatchObject({ code: 'STORAGE_UNAVAILABLE' });
            refused = true;
          }
          if (!refused) {
            expect([...copies].filter((x) => x !== o.shard)).toEqual([]);
            copies.add(o.shard);
            bound = o.shard;
          } else {
            expect(full.some((f) => f)).toBe(true);
          }
        } else if (o.k === 'unbind' && bound !== undefined) {
          const shard = bound;
          bound = undefined;
          if (letGo(shard)) table.held(copy, shard);
        } else if (o.k === 'disk') {
          full[o.shard] = o.full;
        } else if (o.k === 'tick') {
          letGo(o.shard);
        } else if (o.k === 'restart' && bound !== o.shard) {
          copies.delete(o.shard);
        }
        expect(copies.size).toBeLessThanOrEqual(1);
      }
    }), { numRuns: 300 });
  });

  it('clearHeldCopy asks the holder noted from a reply through sim.release on its shard index, once', async () => {
    const asked: unknown[] = [];
    const s = {
      shards: { shardFor: (id: string) => (id === 'x' ? 0 : 1), callShard: (i: number, op: string, args: unknown) => (asked.push([i, op, args]), Promise.resolve({ held: false })) },
    } as unknown as Services;
    const copy = { server: SERVER, login: LOGIN };
    expect(noteHeldCopy(s, 'x', { stopped: true, heldCopy: copy })).toEqual({ stopped: true });
    await clearHeldCopy(s, copy, 'y');
    await clearHeldCopy(s, copy, 'y');
    expect(asked).toEqual([[0, 'sim.release', copy]]);
  });
});
