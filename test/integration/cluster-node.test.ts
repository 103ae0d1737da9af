// Both halves of cluster mode meet below the gateway: each node's PostgreSQL side (startPgNode:
// leases, tenancy mirror) feeds its NATS side (owner cache, router). Real PostgreSQL and nats-server;
// shards stand in as recorders of which node ran a call.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startNatsNode, type NatsNode } from '../../src/cluster/natsNode.js';
import { PgUnavailableError, startPgNode, type PgNode } from '../../src/cluster/pgNode.js';
import { openPgPool } from '../../src/cluster/pgPool.js';
import { runPgMigrations } from '../../src/cluster/pgMigrations.js';
import { PgTenancy } from '../../src/cluster/pgTenancy.js';
import type { AccountRouter, LocalShards } from '../../src/cluster/router.js';
import { createLogger } from '../../src/log.js';
import { AccountStore } from '../../src/store/accounts.js';
import { openDb, type Db } from '../../src/store/db.js';
import { TenancyStore } from '../../src/store/tenancy.js';
import { createDatabase, freePort, startNats, type Engine } from '../helpers/engines.js';
import { sharedPostgres } from '../helpers/postgres.js';
import { until } from '../helpers/until.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

let pgEngine: Engine;
let natsEngine: Engine;
let databaseUrl: string;
const dirs: string[] = [];
const ACCOUNTS = Array.from({ length: 30 }, (_, i) => `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`);
const T = 1_700_000_000_000;
const log = createLogger('silent');

beforeAll(async () => {
  [pgEngine, natsEngine] = await Promise.all([sharedPostgres(), startNats()]);
  databaseUrl = await createDatabase(pgEngine.url);
  const pool = openPgPool(databaseUrl);
  await runPgMigrations(pool, databaseUrl);
  const tenancy = new PgTenancy(pool);
  await tenancy.createCustomer('c1', 'operator', T);
  for (const [i, id] of ACCOUNTS.entries()) {
    await tenancy.insertSeat({ id, customer_id: 'c1', private_hosting: 0, region: null, created_at: T });
    await tenancy.upsertBinding({ seat_id: id, customer_id: 'c1', platform: 'P5', server: 'Sim-P5-Demo', login: String(1000 + i), password_enc: 'sealed', build: null, created_at: T, updated_at: T });
  }
  await pool.end();
}, 60_000);
afterAll(async () => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  await natsEngine?.stop();
  await pgEngine?.stop();
});

interface Node {
  id: string;
  pg: PgNode;
  router: AccountRouter;
  sqlite: Db;
  /** Accounts whose calls this node's shards ran. */
  ran: string[];
  close(handover: boolean): Promise<void>;
}

async function startNode(id: string): Promise<Node> {
  const dir = mkdtempSync(join(tmpdir(), 'tagw-node-'));
  dirs.push(dir);
  const sqlite = openDb(dir);
  const ran: string[] = [];
  // The two sides wired as the gateway will: lease events announced through the NATS side's owner
  // cache, whose misses the PostgreSQL side's lookup answers.
  let nats: NatsNode | undefined;
  const pg = await startPgNode({
    databaseUrl, nodeId: id, url: `http://${id}`, leaseMs: 3_000, sqlite, log, clock: { now: () => Date.now() }, mirrorEveryMs: 100,
    events: {
      acquired: (leases) => { for (const l of leases) nats?.owners.announce(l.accountId, { owner: id, epoch: l.epoch }); },
      released: (leases) => { for (const l of leases) nats?.owners.announce(l.accountId, { owner: null, epoch: l.epoch }); },
      lost: (leases) => { for (const l of leases) nats?.owners.announce(l.accountId, { owner: null, epoch: l.epoch }); },
    },
  });
  const shards: LocalShards = {
    call: async (key: string) => {
      // The owner's own check before anything reaches a broker: its lease, on its clock.
      if (!pg.keeper.leaseOf(key)) throw new Error(`${id} ran a call for ${key} without its lease`);
      ran.push(key);
      return { node: id } as never;
    },
  };
  nats = await startNatsNode({ url: natsEngine.url, nodeId: id, shards, lookupOwner: pg.lookupOwner, ownerWaitMs: 5_000, onEvent: () => {}, log, reconnectWaitMs: 50 });
  pg.start();
  const { router } = nats;
  return {
    id, pg, router, sqlite, ran,
    async close(handover) {
      await pg.close({ handover });
      await nats!.close();
      sqlite.close();
    },
  };
}

describe('a cluster node: leases in PostgreSQL, routing over NATS', () => {
  it('PostgreSQL unreachable or refusing at start: one line naming the server, never the password', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tagw-node-'));
    dirs.push(dir);
    const sqlite = openDb(dir);
    const start = (url: string) => startPgNode({ databaseUrl: url, nodeId: 'n', url: '', leaseMs: 3_000, sqlite, log, clock: { now: () => Date.now() }, events: {} })
      .then(() => undefined, (e: unknown) => e);
    const u = new URL(databaseUrl);
    try {
      const down = await start(`postgres://tagw:s3cret@127.0.0.1:${await freePort()}/tagw`);
      expect(down).toBeInstanceOf(PgUnavailableError);
      expect(down).toMatchObject({ syscall: 'connect', code: 'ECONNREFUSED' });
      u.password = 'wrong-s3cret';
      const refused = await start(u.toString());
      expect((refused as Error).message).toMatch(/^cannot connect PostgreSQL postgres:\/\/127\.0\.0\.1:\d+\/\w+: password authentication failed/);
      for (const e of [down, refused]) expect(JSON.stringify({ m: (e as Error).message, p: (e as PgUnavailableError).path })).not.toContain('s3cret');
    } finally {
      sqlite.close();
    }
  });


  it('orders holding every connection of the node\'s pool do not hold up its lease renewals', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tagw-node-'));
    dirs.push(dir);
    const sqlite = openDb(dir);
    const pg = await startPgNode({ databaseUrl, nodeId: 'busy', url: '', leaseMs: 3_000, sqlite, log, clock: { now: () => Date.now() }, events: {}, poolMax: 2 });
    const busy = await Promise.all([pg.pool.connect(), pg.pool.connect()]);
    try {
      await pg.keeper.tick();
      expect(pg.keeper.held().length).toBeGreaterThan(0); // alone in its database's node list: it takes what it can
      await pg.keeper.tick();
      expect(pg.keeper.stats.failedRounds).toBe(0);
    } finally {
      for (const c of busy) c.release();
      await pg.close({ handover: true });
      sqlite.close();
    }
  });

  it('closing waits for the mirror passes asked for before it: a queued pass does not meet an ended pool', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tagw-node-'));
    dirs.push(dir);
    const sqlite = openDb(dir);
    const pg = await startPgNode({ databaseUrl, nodeId: 'closing', url: '', leaseMs: 3_000, sqlite, log, clock: { now: () => Date.now() }, events: {} });
    try {
      // The second is queued behind the first (one pass at a time) and starts when it ends.
      const passes = [pg.mirror.sync(), pg.mirror.sync()];
      await pg.close({ handover: false });
      expect((await Promise.allSettled(passes)).map((r) => (r.status === 'rejected' ? String(r.reason) : 'copied'))).toEqual(['copied', 'copied']);
    } finally {
      sqlite.close();
    }
  });

  it('two nodes split the accounts; a call through either runs on the lease holder; after a SIGTERM handover the survivor runs them all', async () => {
    const a = await startNode('node-a');
    const b = await startNode('node-b');
    let aClosed = false;
    try {
      await until(() => a.pg.keeper.held().length > 0 && b.pg.keeper.held().length > 0
        && a.pg.keeper.held().length + b.pg.keeper.held().length === ACCOUNTS.length, 'the nodes to split the accounts');
      // Every node mirrored every binding (it may be asked to take any account over).
      for (const n of [a, b]) expect(new AccountStore(n.sqlite).live().map((r) => r.seat_id).sort()).toEqual([...ACCOUNTS].sort());
      // A key made through one node is in its own SQLite as the write returns, and reaches the
      // other's by itself.
      await a.pg.writeTenancy((t) => t.insertKey({ id: 'k-late', customer_id: 'c1', kind: 'api', hash: 'h', label: '', read_only: 0, account_scoped: 0, seat_id: null, created_at: T }));
      expect(new TenancyStore(a.sqlite).keyById('k-late')).toMatchObject({ customer_id: 'c1', kind: 'api' });
      await until(() => new TenancyStore(b.sqlite).keyById('k-late') !== undefined, 'the key in the other node\'s mirror');

      for (const account of ACCOUNTS) {
        const holder = a.pg.keeper.leaseOf(account) ? 'node-a' : 'node-b';
        for (const via of [a, b]) expect(await via.router.call(account, 'account.status', { accountId: account })).toEqual({ node: holder });
      }
      expect(a.router.stats.forwarded + b.router.stats.forwarded).toBe(ACCOUNTS.length);

      const aHad = a.pg.keeper.held().map((l) => l.accountId);
      await a.close(true);
      aClosed = true;
      for (const account of aHad) expect(await b.router.call(account, 'account.status', { accountId: account })).toEqual({ node: 'node-b' });
      expect(b.pg.keeper.held()).toHaveLength(ACCOUNTS.length);
    } finally {
      if (!aClosed) await a.close(true);
      await b.close(true);
    }
  }, 60_000);
});
