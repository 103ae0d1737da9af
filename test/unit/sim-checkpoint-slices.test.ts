// Checkpoint passes run on the shard's thread between requests (src/store/simStore.ts,
// checkpointDue): an account is checkpointed once `checkpointRows` of its records changed, not
// only once a second, and a pass stops after about that many records and leaves the accounts still
// due to later turns, so a request arriving meanwhile waits for one slice, never for the whole pass
// (issue 19: passes of 0.3-18 ms delayed 1-2% of sequential orders).
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { SimBrokerConnection } from '../../src/broker/sim.js';
import { ManualClock, Simulator } from '../../src/sim/simulator.js';
import { SqliteSimStore } from '../../src/store/simStore.js';
import { T0, testConfig } from '../helpers/sim-helpers.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const CAP = 4;

function open(checkpointMs: number) {
  const dir = mkdtempSync(join(tmpdir(), 'tagw-simslice-'));
  dirs.push(dir);
  // Every statement the store runs (BEGIN and COMMIT included), for the tests of skipped passes.
  const statements: string[] = [];
  const db = new Database(join(dir, 'sim.db'), { verbose: (sql) => statements.push(String(sql)) });
  SqliteSimStore.configure(db);
  const clock = new ManualClock(T0);
  const store = new SqliteSimStore(db, { checkpointMs, checkpointRows: CAP, clock });
  const sim = new Simulator({ config: testConfig(), store, clock });
  // Every position row a checkpoint writes, by login (a temp trigger on the store's table).
  db.exec(`CREATE TEMP TABLE written (login TEXT);
    CREATE TEMP TRIGGER w_ins AFTER INSERT ON main.sim_state WHEN new.kind = 'P' BEGIN INSERT INTO written VALUES (new.login); END;`);
  const written = () => (db.prepare('SELECT count(*) AS n FROM written').get() as { n: number }).n;
  const writtenFor = (id: string) => (db.prepare('SELECT count(*) AS n FROM written WHERE login = ?').get(id) as { n: number }).n;
  const login = async (id: string) => {
    const c = new SimBrokerConnection(sim, { server: 'Sim-P5-Demo', login: id, password: 'pw' });
    await c.connect();
    return c;
  };
  const buy = async (c: SimBrokerConnection) => expect((await c.orderSend({ symbol: 'BTCUSD', type: 'Buy', volume: 0.01 })).ok).toBe(true);
  const close = () => {
    store.commitQueued();
    db.close();
  };
  return { db, store, clock, login, buy, written, writtenFor, statements, close };
}

const turn = () => new Promise<void>((r) => setImmediate(r));

describe('simulator checkpoint passes in slices', () => {
  it(`checkpoints an account once ${CAP} of its records changed, before checkpointMs`, async () => {
    const s = open(1e12);
    const c = await s.login('5001');
    for (let i = 0; i < 2 * CAP + 1; i++) {
      await s.buy(c);
      await turn();
      await turn();
    }
    // Never due by age here: only the records' count made it write them, in slices of CAP.
    expect(s.written()).toBe(2 * CAP);
    s.close();
  });

  it(`writes at most ${CAP} records a turn when several accounts fall due together, the rest in later turns`, async () => {
    const s = open(1000);
    const accounts = await Promise.all(['5001', '5002', '5003'].map((id) => s.login(id)));
    // Created first: creating an account checkpoints every dirty one at once (not the order path).
    const late = await s.login('5004');
    // CAP - 1 new positions each: not due by count.
    for (const c of accounts) for (let i = 0; i < CAP - 1; i++) await s.buy(c);
    for (let i = 0; i < 5; i++) await turn();
    expect(s.written()).toBe(0);
    // All three fall due by age at once; one more order's commit starts the pass.
    s.clock.advance(1000);
    await s.buy(late);
    const perTurn: number[] = [];
    let before = s.written();
    for (let i = 0; i < 20 && s.written() < 3 * (CAP - 1) + 1; i++) {
      await turn();
      const now = s.written();
      if (now > before) perTurn.push(now - before);
      before = now;
    }
    expect(s.written()).toBe(3 * (CAP - 1) + 1); // the three, and the late account's own
    expect(perTurn.length).toBeGreaterThan(1);
    for (const n of perTurn) expect(n).toBeLessThanOrEqual(CAP);
    s.close();
  });

  it('runs no checkpoint transaction after a commit that left no account due', async () => {
    const s = open(1000);
    const c = await s.login('5001');
    await s.buy(c);
    for (let i = 0; i < 3; i++) await turn();
    s.statements.length = 0;
    await s.buy(c);
    for (let i = 0; i < 3; i++) await turn();
    // The order's own commit only: no BEGIN and COMMIT of a pass that would write nothing.
    expect(s.statements.filter((q) => q.startsWith('BEGIN'))).toHaveLength(1);
    expect(s.written()).toBe(0);
    // Due by age: the next commit's pass writes it.
    s.clock.advance(1000);
    await s.buy(c);
    for (let i = 0; i < 3; i++) await turn();
    expect(s.writtenFor('5001')).toBe(3);
    s.close();
  });

  it('checkpoints an account that turns dirty long after its last checkpoint at the next pass', async () => {
    const s = open(1000);
    const a = await s.login('5001');
    const b = await s.login('5002');
    const settle = async () => {
      for (let i = 0; i < 3; i++) await turn();
    };
    // A pass at T0 + 1500 checkpoints both (b dirty since its login), then b stays clean.
    s.clock.advance(1500);
    await s.buy(a);
    await settle();
    // At T0 + 3000 a is checkpointed again and turns dirty once more: due by age at T0 + 4000.
    s.clock.advance(1500);
    await s.buy(a);
    await settle();
    await s.buy(a);
    await settle();
    expect(s.writtenFor('5001')).toBe(2);
    // b, clean since T0 + 1500, is due by age as soon as it changes: the pass after its commit writes it.
    await s.buy(b);
    await settle();
    expect(s.writtenFor('5002')).toBe(1);
    expect(s.writtenFor('5001')).toBe(2);
    s.close();
  });
});
