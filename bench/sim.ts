// Simulator throughput on one core: (1) ticks generated with all nine timeframes of live
// bars updated, (2) market orders validated, executed and booked with SQLite persistence
// (WAL, synchronous=NORMAL, one transaction per trade) in a temp dir.
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseSimConfig, loadSimConfig } from '../src/sim/config.js';
import { ManualClock, Simulator } from '../src/sim/simulator.js';
import { SqliteSimStore } from '../src/store/simStore.js';
import { MemorySimStore } from '../src/store/memorySimStore.js';
import { SimBrokerConnection } from '../src/broker/sim.js';

const T0 = Date.UTC(2026, 10, 18, 12, 0, 0);

function tickBench(): { ticksPerSec: number; ticks: number } {
  const base = loadSimConfig();
  const p5 = base.servers[0]!;
  // One symbol at 100,000 ticks/s, always quoted, so the measurement is the per-tick cost.
  const eur = { ...p5.symbols[0]!, ticksPerSecond: 100_000, quoteSessions: 'always' as const, tradeSessions: 'always' as const };
  const config = parseSimConfig({ ...base, servers: [{ ...p5, symbols: [eur] }] });
  const clock = new ManualClock(T0);
  const sim = new Simulator({ config, store: new MemorySimStore(), clock });
  const server = sim.server(p5.name)!;
  const sym = server.market.bySymbol.get('EURUSD')!;
  server.market.enableBars(sym);
  let ticks = 0;
  server.market.onTick = () => {
    ticks++;
  };
  // warm-up
  clock.advance(1000);
  sim.advance();
  ticks = 0;
  const start = performance.now();
  let simulated = 0;
  while (performance.now() - start < 3000) {
    clock.advance(1000);
    sim.advance();
    simulated++;
  }
  const secs = (performance.now() - start) / 1000;
  console.log(`ticks: ${ticks} in ${secs.toFixed(2)} s (${simulated} simulated seconds, bars M1..MN1 updated)`);
  return { ticksPerSec: Math.round(ticks / secs), ticks };
}

/** `clients` accounts trade concurrently (as a gateway shard does); each client opens and
 *  closes positions in turn (each is one booked trade, with a request id), keeping up to
 *  `maxOpen` positions. Replies wait for the group commit, so every counted order is durable. */
async function orderBench(clients: number, maxOpen: number, ms: number): Promise<{ ordersPerSec: number; orders: number }> {
  const dir = mkdtempSync(join(tmpdir(), 'tagw-bench-sim-'));
  try {
    const db = new Database(join(dir, 'sim.db'));
    SqliteSimStore.configure(db);
    const store = new SqliteSimStore(db);
    const clock = new ManualClock(T0);
    const config = parseSimConfig({ ...loadSimConfig(), seed: 3 });
    const sim = new Simulator({ config, store, clock });
    const conns = await Promise.all(
      Array.from({ length: clients }, async (_, i) => {
        const c = new SimBrokerConnection(sim, { server: 'Sim-P5-Demo', login: String(5001 + i), password: 'bench' });
        await c.connect();
        return c;
      }),
    );
    let orders = 0;
    const start = performance.now();
    const deadline = start + ms;
    await Promise.all(
      conns.map(async (conn, ci) => {
        const open: number[] = [];
        let n = 0;
        while (performance.now() < deadline) {
          if (open.length < maxOpen) {
            const r = await conn.orderSend({ symbol: 'EURUSD', type: n % 2 ? 'Buy' : 'Sell', volume: 0.01, magic: 1 }, { requestId: `c${ci}-${n++}` });
            if (!r.ok) throw new Error(r.message);
            open.push(r.order.positionId);
          } else {
            while (open.length > 0) {
              const r = await conn.orderClose({ ticket: open.pop()! }, { requestId: `c${ci}-${n++}` });
              if (!r.ok) throw new Error(r.message);
              orders++;
            }
            clock.advance(1);
          }
          orders++;
        }
      }),
    );
    const secs = (performance.now() - start) / 1000;
    console.log(`orders: ${orders} market orders matched and booked in ${secs.toFixed(2)} s, ${clients} concurrent account(s), SQLite WAL group commit`);
    db.close();
    return { ordersPerSec: Math.round(orders / secs), orders };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const t = tickBench();
const single = await orderBench(1, 10, 1500);
// A shard hosts many accounts; 64 trading at once is what the group commit is for.
const rounds: number[] = [];
let orders = 0;
for (let i = 0; i < 3; i++) {
  const r = await orderBench(64, 10, 1500);
  rounds.push(r.ordersPerSec);
  orders += r.orders;
}
rounds.sort((x, y) => x - y);
console.log(
  JSON.stringify({
    bench: 'sim',
    ticksPerSec: t.ticksPerSec,
    ordersPerSec: rounds[1],
    ordersPerSecRounds: rounds,
    ordersPerSecOneClient: single.ordersPerSec,
    concurrentAccounts: 64,
    ticks: t.ticks,
    orders,
  }),
);
