// npm run bench -- trade-path [--orders N] [--per-account N] [--gap-ms N] [--prof]
// In-process micro-bench of the account host's trade path (no HTTP, no shard hop): the real
// account host over the embedded simulator and a temp SQLite database, OrderSend with and
// without a clientOrderId (an idempotency record: actor + durable 'sent' row + result). The two
// kinds alternate in blocks so machine noise hits both alike; the figure that matters is what
// idempotency adds (idem p50 - no-idem p50) and the ratio. --prof writes /tmp/trade.cpuprofile.
// Latency: one order at a time with one idle event-loop turn between orders, as a shard has
// between requests (work a host defers until after the reply is not counted there).
// Cost: the same orders back to back, no gap: wall µs per order, deferred work included.
// recordActorLifecycleHotP50Us: one idempotency record's xstate lifecycle alone, in a tight loop;
// freshRecordLifecycleHotP50Us: the same for the plain record a fresh claim uses now.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { Session } from 'node:inspector/promises';
import { SecretBox } from '../src/crypto/secretBox.js';
import { createLogger } from '../src/log.js';
import { createAccountHost } from '../src/runtime/hosts/accounts.js';
import type { ShardContext } from '../src/runtime/hosts/context.js';
import { startCheckpointer } from '../src/store/checkpointer.js';
import { dbPath, openDb } from '../src/store/db.js';
import { createActor } from 'xstate';
import { freshRecord, idempotencyMachine } from '../actors/idempotency.js';
import { FreshRecord } from '../actors/idempotencyFresh.js';
import { Histogram } from './lib/histogram.js';
import { shardSettings } from '../src/runtime/settings.js';
import { systemClock } from '../src/util/clock.js';
import { watchHost } from './lib/hostFacts.js';
import { argNumber as arg } from './lib/args.js';

const machineFacts = watchHost();

const orders = arg('orders', 3000);
const prof = process.argv.includes('--prof');
const BLOCK = 100;

const dir = mkdtempSync(join(tmpdir(), 'tagw-bench-trade-'));
const key = randomBytes(32);
const db = openDb(dir);
// As in the gateway: WAL checkpoints on a background thread, not inside trade commits.
const checkpointer = startCheckpointer(dbPath(dir));
const ctx: ShardContext = {
  shard: 0, shards: 1, db, log: createLogger('silent'), settings: shardSettings({ secretKeyHex: key.toString('hex') }), clock: systemClock, emit: () => {}, owns: () => true,
};
const host = createAccountHost(ctx);
host.rehydrate();
// A demo account's margin lasts a few hundred open positions: spread the orders over enough
// accounts that every one fills (a rejection would skip the booking work and flatter the figures).
const PER_ACCOUNT = arg('per-account', 250);
const total = 600 + 2 * orders + 2 * BLOCK * Math.max(2, Math.round(orders / BLOCK / 3));
const accounts: string[] = [];
for (let i = 0; i < Math.ceil(total / PER_ACCOUNT); i++) {
  const accountId = `11111111-1111-4111-8111-${String(i).padStart(12, '0')}`;
  await host.handlers['account.bind']!({
    accountId, customerId: 'c1', server: 'Sim-P5-Demo', login: String(100 + i), passwordEnc: new SecretBox(key).seal('pw', accountId),
  });
  accounts.push(accountId);
}

let seq = 0;
// --gap-ms N: sleep N ms between orders instead of one event-loop turn, as a shard thread that goes
// idle between requests does (its caches cool down; on this VM, 2026-11-23: idempotent p50 +15-35%).
const GAP = arg('gap-ms', 0);
const turn = () => new Promise((resolve) => (GAP ? setTimeout(resolve, GAP) : setImmediate(resolve)));
const run = async (n: number, idem: boolean, h: Histogram, gap = true) => {
  for (let i = 0; i < n; i++) {
    if (gap) await turn();
    const accountId = accounts[seq++ % accounts.length]!;
    const t0 = performance.now();
    const r = await host.handlers['account.trade']!({
      accountId, op: 'OrderSend', args: { symbol: 'BTCUSD', operation: i % 2 ? 'Sell' : 'Buy', volume: 0.01 },
      ...(idem ? { clientOrderId: `b${seq}` } : {}),
    });
    h.record((performance.now() - t0) * 1000);
    if (r.status !== 200) throw new Error(`order failed: ${r.json}`);
  }
};

await run(300, true, new Histogram()); // warm-up (JIT, SQLite pages)
await run(300, false, new Histogram());
const session = new Session();
if (prof) {
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.start');
}
const plain = new Histogram();
const idem = new Histogram();
for (let done = 0; done < orders; done += BLOCK) {
  await run(BLOCK, false, plain);
  await run(BLOCK, true, idem);
}
// Back to back: what an order costs the shard thread, deferred work included.
const cost = async (idem: boolean) => {
  const t0 = performance.now();
  await run(BLOCK, idem, new Histogram(), false);
  await turn();
  return ((performance.now() - t0) * 1000) / BLOCK;
};
let plainCost = 0;
let idemCost = 0;
const costRounds = Math.max(2, Math.round(orders / BLOCK / 3));
for (let r = 0; r < costRounds; r++) {
  plainCost += await cost(false);
  idemCost += await cost(true);
}
plainCost /= costRounds;
idemCost /= costRounds;
if (prof) {
  const { profile } = await session.post('Profiler.stop');
  writeFileSync('/tmp/trade.cpuprofile', JSON.stringify(profile));
}
host.stop();
await checkpointer.stop();
db.close();
rmSync(dir, { recursive: true, force: true });

// The parts the issue mandates, alone and hot (a tight loop, no SQLite, no simulator): one
// idempotency record's actor lifecycle (created from freshRecord, started, `send`, `done`,
// stopped) with no-op actions. What it costs here is a lower bound on what each idempotent order
// spends in xstate.
const noop = idempotencyMachine.provide({ actions: { persistSent: () => {}, persistResult: () => {}, persistUncertain: () => {}, forget: () => {} } });
const lifecycle = new Histogram();
for (let i = 0; i < 25_000; i++) {
  const input = { accountId: 'bench', clientOrderId: `l${i}`, paramsHash: 'h', expiresAt: Date.now() + 60_000 };
  const t0 = performance.now();
  const actor = createActor(noop, { snapshot: freshRecord(noop, input), input: { ...input, phase: 'new' } }).start();
  actor.send({ type: 'send' });
  actor.send({ type: 'done', result: { status: 200, json: '{}' } });
  actor.stop();
  if (i >= 5_000) lifecycle.record((performance.now() - t0) * 1000);
}

// The same lifecycle of the plain record the desk uses for a fresh claim (actors/idempotencyFresh.ts).
const noopActions = { persistSent: () => {}, persistResult: () => {}, persistUncertain: () => {}, forget: () => {} };
const plainLifecycle = new Histogram();
for (let i = 0; i < 25_000; i++) {
  const input = { accountId: 'bench', clientOrderId: `p${i}`, paramsHash: 'h', expiresAt: Date.now() + 60_000 };
  const t0 = performance.now();
  const rec = new FreshRecord(input, noopActions, () => {});
  rec.send({ type: 'send' });
  rec.send({ type: 'done', result: { status: 200, json: '{}' } });
  rec.stop();
  if (i >= 5_000) plainLifecycle.record((performance.now() - t0) * 1000);
}

const p = (h: Histogram) => ({ p50: h.percentile(50), p99: h.percentile(99), p999: h.percentile(99.9), mean: Math.round(h.mean()) });
const a = p(plain);
const b = p(idem);
console.log('no idempotency', plain.summary());
console.log('idempotent    ', idem.summary());
console.log(`back to back: ${plainCost.toFixed(0)} µs/order without idempotency, ${idemCost.toFixed(0)} µs/order with`);
console.log(JSON.stringify({
  machine: machineFacts(),
  bench: 'trade-path', orders, unit: 'us', noIdem: a, idem: b,
  costPerOrderUs: { noIdem: Math.round(plainCost), idem: Math.round(idemCost) },
  idemAddedP50Us: b.p50 - a.p50, idemOverNoIdemP50: +(b.p50 / a.p50).toFixed(2), idemOverNoIdemP99: +(b.p99 / a.p99).toFixed(2),
  recordActorLifecycleHotP50Us: lifecycle.percentile(50), freshRecordLifecycleHotP50Us: plainLifecycle.percentile(50),
}));
process.exit(0);
