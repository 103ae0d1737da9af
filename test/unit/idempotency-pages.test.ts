// Issue 19: what an idempotent order's record costs the commit that carries it, in WAL pages (a
// commit writes every b-tree page it changed: the cost of an order's commit grows with them). The
// shard commits the records of a batch of orders together, each from another account. Keyed by
// (account, id), ~700-byte records sat five to a leaf in their account's place: each one rewrote
// its leaf, and as the leaves split, their neighbours and parents (~3.6 pages per record).
// Appended in a rowid table (migration 11), a commit's records share the right-most leaves and only
// the small unique-index entry lands in the account's place.
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { openDb } from '../../src/store/db.js';
import { IdempotencyStore } from '../../src/store/idempotency.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A stored answer of an order, as large as a filled market order's. */
const answerJson = (ticket: number) => JSON.stringify({
  kind: 'order', ticket, symbol: 'BTCUSD', type: 'Buy', state: 'filled', volume: 0.01, volumeInitial: 0.01, openPrice: 78655.71, openTimeMsc: 1795671682313,
  openTime: '2026-11-26T05:41:22.313Z', sl: 0, tp: 0, magic: 0, comment: '', commission: -0.1, swap: 0, profit: 0, positionId: ticket, retcode: 10009,
  deals: [{ ticket: ticket + 1, order: ticket, position: ticket, symbol: 'BTCUSD', type: 'Buy', entry: 'in', volume: 0.01, price: 78655.71, timeMsc: 1795671682313, time: '2026-11-26T05:41:22.313Z', magic: 0, comment: '', commission: -0.1, swap: 0, profit: 0 }],
});

it('a commit of 16 orders from 16 accounts writes under 2.5 WAL pages per order\'s record', () => {
  const dir = mkdtempSync(join(tmpdir(), 'tagw-idem-pages-'));
  dirs.push(dir);
  const db = openDb(dir);
  db.pragma('wal_autocheckpoint = 0'); // the WAL keeps every frame of this test
  const store = new IdempotencyStore(db);
  const accounts = Array.from({ length: 100 }, (_, i) => `5a1e${String(i).padStart(4, '0')}-0000-4000-8000-${String(i * 7919).padStart(12, '0')}`);
  const wal = join(dir, 'tagw.sqlite-wal');
  // A reader holding its snapshot keeps every frame in the WAL: its growth is what the commits wrote.
  const reader = new Database(join(dir, 'tagw.sqlite'), { readonly: true });
  let n = 0;
  const commit = () => store.batch(() => {
    for (let i = 0; i < 16; i++, n++) {
      const account = accounts[(n * 7) % accounts.length]!;
      const id = `order-${n}`;
      expect(store.insertSent(account, id, 'h'.repeat(43), n, n + 86_400_000)).toBe(true);
      store.setResult(account, id, 200, answerJson(100_000 + n));
    }
  });
  // 3,200 records (32 per account) first, so the b-trees have the depth of a day of trading.
  for (let c = 0; c < 200; c++) commit();
  reader.exec('BEGIN');
  reader.prepare('SELECT count(*) FROM idempotency').get();
  const before = statSync(wal).size;
  const commits = 100;
  for (let c = 0; c < commits; c++) commit();
  const pageSize = db.pragma('page_size', { simple: true }) as number;
  const pagesPerRecord = (statSync(wal).size - before) / (24 + pageSize) / (commits * 16);
  reader.exec('COMMIT');
  reader.close();
  db.close();
  expect(pagesPerRecord).toBeGreaterThan(0.5);
  expect(pagesPerRecord).toBeLessThan(2.5); // 3.7 keyed by (account, id), 1.7 appended
});
