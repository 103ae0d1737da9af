// npm run bench -- idempotency-commit [--rounds N] [--orders N] [--warmup N] [--move-every N] [--only a,b]
// What an idempotent order's record costs the shard's group commit (issue 19 item 5,
// docs/orders-performance.md): commits of 32 orders, each an idempotency claim settled in the same
// transaction (IdempotencyStore.writeOnce, as RecordClaim.write runs it, after RecordClaim.check's
// `exists`) and a ~480-byte journal row, from 32 random accounts of 100, after `--warmup` such
// orders on 100 other accounts (a day's depth of the b-trees). Four layouts, each in a fresh
// database, in alternating order round by round (ABCD, DCBA, ...) so the machine's drift hits all alike:
// - `store`: the product's IdempotencyStore on openDb's schema (its key move, when it has one,
//   every --move-every orders, as the shard moves them under load: every 2,048 records or every second);
// - `indexed`: the records as migration 11 laid them out, found by a unique index (account, id)
//   written in every commit (raw SQL, the store's insert before the deferred keys);
// - `appended`: the same records with no key index at all (what a key index off the commit can approach);
// - `journal`: the journal rows alone (the floor of this micro).
// Per layout: CPU µs per order of the writing thread (user + system, WAL checkpoints excluded),
// WAL frames (4 KiB pages) per order, and the CPU of checkpointing them back (the background
// checkpointer's work in the gateway); for the store, each key move's CPU ms (the shard's pause, on a quiet core).
// Ends with one JSON line.
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { configureWal, openDb, type Db } from '../src/store/db.js';
import { IdempotencyStore } from '../src/store/idempotency.js';
import { migrateSimStore } from '../src/store/simSchema.js';
import { argNumber, argText } from './lib/args.js';
import { watchHost } from './lib/hostFacts.js';

const machineFacts = watchHost();
const rounds = argNumber('rounds', 4);
const measured = argNumber('orders', 20_480);
const warmup = argNumber('warmup', 40_000);
/** MOVE_ROWS of src/store/idempotencyKeys.ts: under this load the shard's moves come by count, not by the second. */
const moveEvery = argNumber('move-every', 2_048);
const LAYOUTS = ['store', 'indexed', 'appended', 'journal'] as const;
type Layout = (typeof LAYOUTS)[number];
const only = argText('only', LAYOUTS.join(',')).split(',') as Layout[];

const PER_COMMIT = 32;
/** Orders between two WAL truncations (outside the measured CPU): the WAL's growth is the commits' frames. */
const CHUNK = 2_048;
const FRAME = 4096 + 24;

/** A stored answer of a filled market order (~620 bytes), as the shard stores it. */
const answerJson = (ticket: number) => JSON.stringify({
  kind: 'order', ticket, symbol: 'BTCUSD', type: 'Buy', state: 'filled', volume: 0.01, volumeInitial: 0.01, openPrice: 78655.71, openTimeMsc: 1795671682313,
  openTime: '2026-11-26T05:41:22.313Z', sl: 0, tp: 0, magic: 0, comment: '', commission: -0.1, swap: 0, profit: 0, positionId: ticket, retcode: 10009,
  deals: [{ ticket: ticket + 1, order: ticket, position: ticket, symbol: 'BTCUSD', type: 'Buy', entry: 'in', volume: 0.01, price: 78655.71, timeMsc: 1795671682313, time: '2026-11-26T05:41:22.313Z', magic: 0, comment: '', commission: -0.1, swap: 0, profit: 0 }],
});
/** A journal row of the deal (~480 bytes). */
const journalJson = (ticket: number) => JSON.stringify({
  k: 'trade', deal: { ticket: ticket + 1, order: ticket, position: ticket, symbol: 'BTCUSD', type: 'Buy', entry: 'in', volume: 0.01, price: 78655.71, timeMsc: 1795671682313, magic: 0, comment: '', commission: -0.1, swap: 0, profit: 0 },
  position: { ticket, symbol: 'BTCUSD', type: 'Buy', volume: 0.01, openPrice: 78655.71, openTimeMsc: 1795671682313, sl: 0, tp: 0, magic: 0, comment: '', swap: 0 },
  balance: 100000 - ticket / 1000, requestId: `c1/${ticket.toString(36)}`,
});

const accountId = (i: number) => `5a1e${String(i).padStart(4, '0')}-0000-4000-8000-${String(i * 7919).padStart(12, '0')}`;

/** The same pseudo-random accounts for every layout. */
function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = Math.imul(s ^ (s >>> 15), 1 | s);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface Writer {
  db: Db;
  /** Before the commit: the claim's check. */
  check(account: string, id: string): void;
  /** Inside the commit: the claim, settled. */
  claim(account: string, id: string, n: number): void;
  /** Every --move-every orders (the deferred key move, for a store that has one). */
  move(): void;
}

function writerOf(layout: Layout, dir: string): Writer {
  if (layout === 'store') {
    const db = openDb(dir);
    migrateSimStore(db);
    const store = new IdempotencyStore(db);
    const mover = store as unknown as { moveKeys?: () => unknown };
    return {
      db,
      check: (a, id) => {
        if (store.exists(a, id)) throw new Error(`${id} exists`);
      },
      claim: (a, id, n) => store.writeOnce(() => {
        store.insertSent(a, id, 'h'.repeat(43), n, n + 86_400_000);
        store.setResult(a, id, 200, answerJson(100_000 + n));
      }),
      move: () => void mover.moveKeys?.(),
    };
  }
  const db = new Database(join(dir, 'tagw.sqlite'));
  configureWal(db);
  migrateSimStore(db);
  if (layout === 'indexed' || layout === 'appended') {
    db.exec(`CREATE TABLE idempotency (
      id INTEGER PRIMARY KEY, account_id TEXT NOT NULL, client_order_id TEXT NOT NULL, params_hash TEXT NOT NULL,
      phase TEXT NOT NULL CHECK (phase IN ('sent', 'result', 'uncertain')), status INTEGER, result_json TEXT,
      created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL);
    CREATE INDEX idempotency_expiry ON idempotency(expires_at);`);
    if (layout === 'indexed') db.exec('CREATE UNIQUE INDEX idempotency_key ON idempotency(account_id, client_order_id)');
    const insert = db.prepare(`INSERT INTO idempotency (account_id, client_order_id, params_hash, phase, status, result_json, created_at, expires_at)
      VALUES (?, ?, ?, 'result', 200, ?, ?, ?) ON CONFLICT DO NOTHING`);
    return {
      db, check: () => {}, move: () => {},
      claim: (a, id, n) => {
        if (insert.run(a, id, 'h'.repeat(43), answerJson(100_000 + n), n, n + 86_400_000).changes !== 1) throw new Error(`${id} exists`);
      },
    };
  }
  return { db, check: () => {}, claim: () => {}, move: () => {} };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

interface Result { cpuUsPerOrder: number; userUsPerOrder: number; sysUsPerOrder: number; walFramesPerOrder: number; checkpointUsPerOrder: number; moveMs: { median: number; max: number } | null }

function runLayout(layout: Layout, round: number): Result {
  const dir = mkdtempSync(join(tmpdir(), `tagw-bench-idem-${layout}-`));
  const w = writerOf(layout, dir);
  const journal = w.db.prepare('INSERT INTO sim_journal (server, time_ms, login, seq, data) VALUES (?, ?, ?, ?, ?)');
  const wal = join(dir, 'tagw.sqlite-wal');
  const rnd = random(1000 + round);
  let n = 0;
  let sinceMove = 0;
  const moves: number[] = [];
  let measuring = false;
  const seqs = new Map<string, number>();
  const batch: Array<[string, string, number]> = [];
  const tx = w.db.transaction(() => {
    for (const [a, id, k] of batch) {
      w.claim(a, id, k);
      const seq = (seqs.get(a) ?? 0) + 1;
      seqs.set(a, seq);
      journal.run('Sim-P5-Demo', 1_795_671_682_313 + k, a, seq, journalJson(100_000 + k));
    }
  });
  /** `orders` orders in commits of 32 from accounts `base` .. `base` + 99. */
  const commits = (orders: number, base: number) => {
    for (let done = 0; done < orders; done += PER_COMMIT) {
      batch.length = 0;
      for (let i = 0; i < PER_COMMIT; i++, n++) {
        const a = accountId(base + Math.floor(rnd() * 100));
        const id = `bot.${round}:${n.toString(36)}`;
        w.check(a, id);
        batch.push([a, id, n]);
      }
      tx();
      sinceMove += PER_COMMIT;
      if (sinceMove >= moveEvery) {
        sinceMove = 0;
        const t0 = process.cpuUsage();
        w.move();
        const t1 = process.cpuUsage(t0);
        if (measuring) moves.push((t1.user + t1.system) / 1000);
      }
    }
  };
  const truncate = () => w.db.pragma('wal_checkpoint(TRUNCATE)');
  w.db.pragma('wal_autocheckpoint = 0'); // checkpoints between chunks, outside the measured CPU
  for (let done = 0; done < warmup; done += CHUNK) {
    commits(Math.min(CHUNK, warmup - done), 1000);
    truncate();
  }
  let cpu = 0;
  let user = 0;
  let sys = 0;
  let frames = 0;
  let checkpointCpu = 0;
  let orders = 0;
  measuring = true;
  for (; orders < measured; orders += CHUNK) {
    const c0 = process.cpuUsage();
    commits(CHUNK, 0);
    const c1 = process.cpuUsage(c0);
    user += c1.user;
    sys += c1.system;
    cpu += c1.user + c1.system;
    frames += Math.max(0, statSync(wal).size - 32) / FRAME;
    const k0 = process.cpuUsage();
    truncate();
    const k1 = process.cpuUsage(k0);
    checkpointCpu += k1.user + k1.system;
  }
  w.db.close();
  rmSync(dir, { recursive: true, force: true });
  const r1 = (x: number) => Math.round(x * 10) / 10;
  return { cpuUsPerOrder: r1(cpu / orders), userUsPerOrder: r1(user / orders), sysUsPerOrder: r1(sys / orders), walFramesPerOrder: Math.round((frames / orders) * 100) / 100, checkpointUsPerOrder: r1(checkpointCpu / orders),
    moveMs: layout === 'store' && moves.length > 0 ? { median: Math.round(median(moves) * 100) / 100, max: Math.round(Math.max(...moves) * 100) / 100 } : null };
}

const runs: Record<string, Result[]> = Object.fromEntries(only.map((l) => [l, []]));
for (let r = 0; r < rounds; r++) {
  const order = r % 2 === 0 ? only : [...only].reverse();
  for (const layout of order) {
    const res = runLayout(layout, r);
    runs[layout]!.push(res);
    console.error(`round ${r + 1} ${layout}: ${JSON.stringify(res)}`);
  }
}
const layouts = Object.fromEntries(Object.entries(runs).map(([l, rs]) => [l, {
  cpuUsPerOrder: rs.map((x) => x.cpuUsPerOrder),
  cpuUsPerOrderMedian: median(rs.map((x) => x.cpuUsPerOrder)),
  sysUsPerOrderMedian: median(rs.map((x) => x.sysUsPerOrder)),
  walFramesPerOrderMedian: median(rs.map((x) => x.walFramesPerOrder)),
  checkpointUsPerOrderMedian: median(rs.map((x) => x.checkpointUsPerOrder)),
  ...(rs[0]?.moveMs ? { moveMs: rs.map((x) => x.moveMs) } : {}),
}]));
console.log(JSON.stringify({ bench: 'idempotency-commit', rounds, orders: measured, warmup, perCommit: PER_COMMIT, moveEvery, layouts, host: machineFacts() }));
