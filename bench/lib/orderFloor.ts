// The floor under an idempotent /OrderSend on this machine, for bench/http.ts: a bare uWS route
// that makes one worker-thread round trip in which the worker commits two small SQLite rows
// (WAL, synchronous=NORMAL), the least an order needs: the idempotency claim, committed before the
// order goes out, and the broker's booking, committed before the reply. No auth, no validation,
// no actor, no matching: what is left between this and the real order is the gateway's own work.
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { MessageChannel, Worker } from 'node:worker_threads';
import type { TemplatedApp } from 'uWebSockets.js';

/** Source for an eval'd worker: opens `file` as the gateway does (WAL, synchronous=NORMAL) with an
 *  order's two rows to write: `claim` (the idempotency claim), `book` (a journal row of `deal`). */
export const floorDbSource = (sqlite: string, file: string) => `
const db = new (require(${JSON.stringify(sqlite)}))(${JSON.stringify(file)});
db.pragma('journal_mode = WAL');
db.pragma('synchronous = NORMAL');
db.pragma('busy_timeout = 5000');
db.exec('CREATE TABLE IF NOT EXISTS claims (account TEXT, id TEXT, hash TEXT, PRIMARY KEY (account, id)) WITHOUT ROWID; CREATE TABLE IF NOT EXISTS journal (seq INTEGER PRIMARY KEY, data TEXT)');
const claim = db.prepare('INSERT INTO claims VALUES (?, ?, ?)');
const book = db.prepare('INSERT INTO journal (data) VALUES (?)');
const deal = JSON.stringify({ ticket: 1, symbol: 'BTCUSD', type: 'Buy', volume: 0.01, price: 97000.5 });`;

const WORKER = (sqlite: string, file: string) => `
const { parentPort } = require('node:worker_threads');
${floorDbSource(sqlite, file)}
parentPort.once('message', (port) => port.on('message', (id) => {
  claim.run('11111111-1111-4111-8111-000000000001', 'o' + id, 'x'.repeat(43));
  book.run(deal);
  port.postMessage({ id, body: deal });
}));`;

export interface OrderFloor {
  close(): Promise<void>;
}

/** Mounts GET /floor on `app`, served through a fresh worker with its database in `dir`. */
export function mountOrderFloor(app: TemplatedApp, dir: string): OrderFloor {
  const sqlite = createRequire(import.meta.url).resolve('better-sqlite3');
  const worker = new Worker(WORKER(sqlite, join(dir, 'floor.sqlite')), { eval: true });
  const { port1, port2 } = new MessageChannel();
  worker.postMessage(port2, [port2]);
  const pending = new Map<number, (body: string) => void>();
  let next = 1;
  port1.on('message', (m: { id: number; body: string }) => {
    pending.get(m.id)?.(m.body);
    pending.delete(m.id);
  });
  app.get('/floor', (res) => {
    let aborted = false;
    res.onAborted(() => (aborted = true));
    const id = next++;
    pending.set(id, (body) => {
      if (!aborted) res.cork(() => res.writeHeader('content-type', 'application/json').end(body));
    });
    port1.postMessage(id);
  });
  return {
    close: async () => {
      port1.close();
      await worker.terminate();
    },
  };
}
