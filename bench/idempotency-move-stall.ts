// npm run bench -- idempotency-move-stall [--rounds N] [--orders N] [--warmup N] [--modes inline,inline512,thread]
// Where the key move (src/store/idempotencyKeys.ts) stalls a writer's group commit (issue 19 item 5,
// docs/orders-performance.md 2026-11-28 "The key move's pause"). One thread writes commits of 32
// orders (an idempotency claim settled in its transaction and a ~480-byte journal row, 32 random
// accounts of 100, after --warmup orders on 100 others), back to back, and times each commit (wall
// µs: what the orders in flight wait for); the keys are moved every 2,048 orders:
// - `inline`: by the writer itself, between two commits, as the shard does now (its time added to
//   the commit after it);
// - `inline512`: the same, every 512 orders (what a move cut into slices of 512 costs: each slice is
//   one transaction over the same leaves);
// - `thread`: by another thread's connection to the same file (the mover the brief of 2026-11-28
//   weighed: the checkpoint worker's thread), the writer going on meanwhile and yielding its event
//   loop every 8 commits; both connections wait with openDb's busy_timeout.
// Modes alternate round by round (ABC, CBA, ...), each in a fresh database. Per mode: the commits'
// p50/p99/p99.9/max, how many took over 2 ms, the process's CPU µs per order (the writer and, for `thread`, the mover), and each move's wall ms
// (the mover's, which for `thread` includes its wait for the write lock). Ends with one JSON line.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import { openDb } from '../src/store/db.js';
import { IdempotencyStore } from '../src/store/idempotency.js';
import type { Scheduler } from '../src/store/heldWrites.js';
import { migrateSimStore } from '../src/store/simSchema.js';
import { argNumber, argText } from './lib/args.js';
import { watchHost } from './lib/hostFacts.js';

/** No move by the store's own timer: only when this bench says. */
const never: Scheduler = { setTimeout: () => 1, clearTimeout: () => {} };
const storeOptions = { scheduler: never, moveRows: 1e9, moveMs: 1e9 };
const ms = (t0: bigint) => Number(process.hrtime.bigint() - t0) / 1e6;

if (!isMainThread) {
  // The other connection's mover.
  const db = openDb((workerData as { dir: string }).dir);
  const store = new IdempotencyStore(db, undefined, storeOptions);
  parentPort!.on('message', (m: string) => {
    if (m === 'stop') {
      db.close();
      parentPort!.close();
      return;
    }
    const t0 = process.hrtime.bigint();
    const moved = store.moveKeys();
    parentPort!.postMessage({ moved, ms: ms(t0) });
  });
} else {
  const machineFacts = watchHost();
  const rounds = argNumber('rounds', 2);
  const measured = argNumber('orders', 20_480);
  const warmup = argNumber('warmup', 40_000);
  const MODES = ['inline', 'inline512', 'thread'] as const;
  type Mode = (typeof MODES)[number];
  const modes = argText('modes', MODES.join(',')).split(',') as Mode[];
  const PER_COMMIT = 32;
  const accountId = (i: number) => `5a1e${String(i).padStart(4, '0')}-0000-4000-8000-${String(i * 7919).padStart(12, '0')}`;
  const answer = 'y'.repeat(620);
  const journalRow = 'x'.repeat(480);
  const r1 = (x: number) => Math.round(x * 10) / 10;

  const runMode = async (mode: Mode) => {
    const dir = mkdtempSync(join(tmpdir(), 'tagw-bench-move-stall-'));
    const db = openDb(dir);
    migrateSimStore(db);
    const store = new IdempotencyStore(db, undefined, storeOptions);
    const journal = db.prepare('INSERT INTO sim_journal (server, time_ms, login, seq, data) VALUES (?, ?, ?, ?, ?)');
    let n = 0;
    const seqs = new Map<string, number>();
    const batch: Array<[string, string, number]> = [];
    const tx = db.transaction(() => {
      for (const [a, id, k] of batch) {
        store.writeOnce(() => {
          store.insertSent(a, id, 'h'.repeat(43), k, k + 86_400_000);
          store.setResult(a, id, 200, answer);
        });
        const seq = (seqs.get(a) ?? 0) + 1;
        seqs.set(a, seq);
        journal.run('Sim-P5-Demo', k, a, seq, journalRow);
      }
    });
    const commit = (base: number) => {
      batch.length = 0;
      for (let i = 0; i < PER_COMMIT; i++, n++) {
        const a = accountId(base + Math.floor(Math.random() * 100));
        const id = `bot:${n.toString(36)}`;
        if (store.exists(a, id)) throw new Error(`${id} exists`);
        batch.push([a, id, n]);
      }
      tx();
    };
    for (let i = 0; i < warmup / PER_COMMIT; i++) {
      commit(1000);
      if (i % 64 === 63) store.moveKeys();
    }
    store.moveKeys();
    db.pragma('wal_checkpoint(TRUNCATE)');
    const moves: number[] = [];
    const worker = mode === 'thread' ? new Worker(new URL(import.meta.url), { workerData: { dir } }) : null;
    worker?.on('message', (m: { ms: number }) => moves.push(m.ms));
    if (worker) await new Promise((r) => setTimeout(r, 300));
    const every = (mode === 'inline512' ? 512 : 2048) / PER_COMMIT;
    const lat: number[] = [];
    const c0 = process.cpuUsage();
    for (let i = 0; i < measured / PER_COMMIT; i++) {
      const t0 = process.hrtime.bigint();
      commit(0);
      lat.push(ms(t0) * 1000);
      if (i % every === every - 1) {
        if (worker) worker.postMessage('move');
        else {
          const t1 = process.hrtime.bigint();
          store.moveKeys();
          const m = ms(t1);
          moves.push(m);
          lat[lat.length - 1]! += m * 1000;
        }
      }
      if (i % 256 === 255) db.pragma('wal_checkpoint(PASSIVE)'); // the checkpointer's work, in short
      if (worker && i % 8 === 7) await new Promise((r) => setImmediate(r));
    }
    const c1 = process.cpuUsage(c0);
    if (worker) {
      await new Promise((r) => setTimeout(r, 200));
      worker.postMessage('stop');
      await new Promise((r) => worker.on('exit', r));
    }
    db.close();
    rmSync(dir, { recursive: true, force: true });
    lat.sort((a, b) => a - b);
    const p = (q: number) => Math.round(lat[Math.min(lat.length - 1, Math.floor(q * lat.length))]!);
    const ms2 = moves.map((x) => Math.round(x * 100) / 100);
    return { commits: lat.length, p50: p(0.5), p99: p(0.99), p999: p(0.999), max: Math.round(lat[lat.length - 1]!), over2ms: lat.filter((x) => x > 2000).length,
      cpuUsPerOrder: r1((c1.user + c1.system) / measured), moves: ms2.length, moveMsMax: Math.max(0, ...ms2) };
  };

  const runs: Record<string, Awaited<ReturnType<typeof runMode>>[]> = Object.fromEntries(modes.map((m) => [m, []]));
  for (let r = 0; r < rounds; r++) {
    for (const mode of r % 2 === 0 ? modes : [...modes].reverse()) {
      const res = await runMode(mode);
      runs[mode]!.push(res);
      console.error(`round ${r + 1} ${mode}: ${JSON.stringify(res)}`);
    }
  }
  console.log(JSON.stringify({ bench: 'idempotency-move-stall', rounds, orders: measured, warmup, perCommit: PER_COMMIT, modes: runs, host: machineFacts() }));
}
