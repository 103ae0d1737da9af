// Account events of the simulated broker leave only once its journal holds what they report: a
// deal that reached /v1/stream must be in /OrderHistory after a crash (issue 18: TRADE frames vs
// /OrderHistory across a SIGKILL). Checked from a second SQLite connection, which sees committed
// rows only, at the moment each event arrives.
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

describe('simulated broker account events', () => {
  it('a deal, position or order event is emitted only after the journal commit that holds it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tagw-sim-events-'));
    dirs.push(dir);
    const file = join(dir, 'sim.db');
    const db = new Database(file);
    SqliteSimStore.configure(db);
    const store = new SqliteSimStore(db, { checkpointMs: 1e12 });
    const reader = new Database(file, { readonly: true });
    const committed = () => (reader.prepare('SELECT count(*) AS n FROM sim_journal').get() as { n: number }).n;
    const sim = new Simulator({ config: testConfig(), store, clock: new ManualClock(T0) });
    const c = new SimBrokerConnection(sim, { server: 'Sim-P5-Demo', login: '4001', password: 'pw' });
    await c.connect();
    const seen: Array<{ event: string; journalRows: number }> = [];
    for (const event of ['deal', 'positions', 'orders'] as const) c.on(event, () => seen.push({ event, journalRows: committed() }));
    const before = committed();
    const r = await c.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 0.1 });
    expect(r.ok).toBe(true);
    await new Promise((res) => setImmediate(res));
    expect(seen.map((s) => s.event)).toContain('deal');
    for (const s of seen) expect(s.journalRows, `${s.event} emitted before its journal row was committed`).toBeGreaterThan(before);
    reader.close();
    db.close();
  });
});
