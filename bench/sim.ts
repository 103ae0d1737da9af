// Simulator throughput on one core: (1) ticks generated with all nine timeframes of live
// bars updated, (2) market orders validated, executed and booked with SQLite persistence
// (WAL, synchronous=NORMAL, one transaction per trade) in a temp dir, (3) what one market order
// costs an account holding 100 open positions against one holding 1 (same run, interleaved):
// the order with its margin check (`op`), its booking into the journal (`flush`), and a checkpoint
// of the account (`checkpoint`: written about once a second per account that changed).
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseSimConfig, loadSimConfig } from '../src/sim/config.js';
import { ManualClock, Simulator } from '../src/sim/simulator.js';
import { SqliteSimStore } from '../src/store/simStore.js';
import { MemorySimStore } from '../src/store/memorySimStore.js';
import { SimBrokerConnection } from '../src/broker/sim.js';
import { watchHost } from './lib/hostFacts.js';

const machineFacts = watchHost();

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

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** An account holding `held` open BTCUSD positions of 0.01 lots, ready to time orders on. */
function heldAccount(held: number) {
  const dir = mkdtempSync(join(tmpdir(), 'tagw-bench-held-'));
  const db = new Database(join(dir, 'sim.db'));
  SqliteSimStore.configure(db);
  const store = new SqliteSimStore(db);
  const clock = new ManualClock(T0);
  const sim = new Simulator({ config: parseSimConfig({ ...loadSimConfig(), seed: 3 }), store, clock });
  const acc = sim.server('Sim-P5-Demo')!.login('9001', 'bench');
  for (let i = 0; i < held; i++) {
    if (!acc.orderSend({ symbol: 'BTCUSD', type: i % 2 ? 'Sell' : 'Buy', volume: 0.01 }).ok) throw new Error('setup order refused');
    acc.flush();
  }
  store.checkpoint();
  const us = { op: [] as number[], flush: [] as number[], checkpoint: [] as number[] };
  let n = 0;
  /** One order timed (then closed again, untimed, so the account keeps holding `held`). */
  const order = () => {
    const t0 = performance.now();
    const r = acc.orderSend({ symbol: 'BTCUSD', type: n % 2 ? 'Sell' : 'Buy', volume: 0.01 });
    const t1 = performance.now();
    acc.flush({ requestId: `h${n++}`, timeMsc: clock.now(), result: r });
    const t2 = performance.now();
    if (!r.ok) throw new Error(r.message);
    store.commitQueued();
    const t3 = performance.now();
    store.checkpoint();
    const t4 = performance.now();
    us.op.push((t1 - t0) * 1000);
    us.flush.push((t2 - t1) * 1000);
    us.checkpoint.push((t4 - t3) * 1000);
    acc.orderClose({ ticket: r.order.positionId });
    acc.flush();
    store.commitQueued();
    clock.advance(1);
  };
  const close = () => {
    db.close();
    rmSync(dir, { recursive: true, force: true });
  };
  return { us, order, close };
}

/** Median µs per order part at 1 and at `held` positions, interleaved in blocks (noise hits both). */
function heldBench(held: number, orders: number) {
  const none = heldAccount(1);
  const many = heldAccount(held);
  for (let i = 0; i < 200; i++) none.order(), many.order(); // warm-up
  for (const a of [none, many]) a.us.op.length = a.us.flush.length = a.us.checkpoint.length = 0;
  for (let done = 0; done < orders; done += 100) {
    for (let i = 0; i < 100; i++) none.order();
    for (let i = 0; i < 100; i++) many.order();
  }
  none.close();
  many.close();
  const figures = (a: typeof none) => ({ op: +median(a.us.op).toFixed(1), flush: +median(a.us.flush).toFixed(1), checkpoint: +median(a.us.checkpoint).toFixed(1) });
  const at0 = figures(none);
  const atN = figures(many);
  console.log(`one order, median µs: at 1 position ${JSON.stringify(at0)}, at ${held} ${JSON.stringify(atN)}`);
  return { at0, atN, opOverAt1: +(atN.op / at0.op).toFixed(2), flushOverAt1: +(atN.flush / at0.flush).toFixed(2), checkpointOverAt1: +(atN.checkpoint / at0.checkpoint).toFixed(2) };
}

const held = heldBench(100, 3000);
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
    machine: machineFacts(),
    bench: 'sim',
    ticksPerSec: t.ticksPerSec,
    ordersPerSec: rounds[1],
    ordersPerSecRounds: rounds,
    ordersPerSecOneClient: single.ordersPerSec,
    concurrentAccounts: 64,
    orderUsAt1Position: held.at0,
    orderUsAt100Positions: held.atN,
    orderAt100OverAt1: { op: held.opOverAt1, flush: held.flushOverAt1, checkpoint: held.checkpointOverAt1 },
    ticks: t.ticks,
    orders,
  }),
);
