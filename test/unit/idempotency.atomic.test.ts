// Issue 19 item 4: with the embedded simulator (it books trades in the shard's own database), an
// idempotent order's claim commits in the same transaction as the simulator's booking. These
// tests pin what that buys and what it must not lose: the claim and the booking are on disk
// together as soon as the order is answered; a commit that fails after the claim leaves neither on
// disk and the id answers 409 (never a second order); a settled record found on disk refuses the
// claim inside the transaction, and nothing is executed again.
import { randomBytes } from 'node:crypto';
import Database from 'better-sqlite3';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { afterEach, describe, expect, it } from 'vitest';
import { SecretBox } from '../../src/crypto/secretBox.js';
import { ApiError } from '../../src/errors.js';
import { createLogger } from '../../src/log.js';
import type { TradeReply } from '../../src/runtime/hosts/accountCommands.js';
import { createAccountHost } from '../../src/runtime/hosts/accounts.js';
import type { ActorHost } from '../../src/runtime/hosts/context.js';
import { shardSettings } from '../../src/runtime/settings.js';
import { openDb, type Db } from '../../src/store/db.js';
import { CommitGroup } from '../../src/store/commitGroup.js';
import { systemClock } from '../../src/util/clock.js';

const hosts: ActorHost[] = [];
const dbs: { close(): void }[] = [];
const dirs: string[] = [];
afterEach(() => {
  for (const h of hosts.splice(0)) h.stop();
  for (const d of dbs.splice(0)) d.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
const tempDir = (prefix: string) => {
  const d = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(d);
  return d;
};

const key = randomBytes(32);
const accountId = '55555555-5555-4555-8555-555555555555';

async function boot(dir: string, commitGroup?: CommitGroup): Promise<{ host: ActorHost; db: Db }> {
  const db = openDb(dir);
  dbs.push(db);
  const host = createAccountHost({
    shard: 0, shards: 1, db, log: createLogger('silent'), settings: shardSettings({ secretKeyHex: key.toString('hex') }), clock: systemClock, emit: () => {}, owns: () => true,
    ...(commitGroup ? { commitGroup } : {}),
  });
  hosts.push(host);
  host.rehydrate();
  await host.handlers['account.bind']!({ accountId, customerId: 'c', server: 'Sim-P5-Demo', login: 'atomic-1', passwordEnc: new SecretBox(key).seal('pw', accountId) });
  return { host, db };
}
const send = (h: ActorHost, id: string) =>
  Promise.resolve(h.handlers['account.trade']!({ accountId, op: 'OrderSend', args: { symbol: 'BTCUSD', operation: 'Buy', volume: 0.01 }, clientOrderId: id })) as Promise<TradeReply>;
const tickets = async (h: ActorHost) => (await h.handlers['account.op']!({ accountId, op: 'OpenedOrdersTickets', args: {} })) as number[];
/** Commits in a WAL file: frames of the current generation (salts as in the header) whose
 *  "database size after commit" field is set (https://www.sqlite.org/fileformat.html#wal_file_format). */
function walCommits(file: string): number {
  const b = readFileSync(file);
  if (b.length < 32) return 0;
  const pageSize = b.readUInt32BE(8);
  let n = 0;
  for (let at = 32; at + 24 + pageSize <= b.length; at += 24 + pageSize) {
    if (b.readUInt32BE(at + 8) !== b.readUInt32BE(16) || b.readUInt32BE(at + 12) !== b.readUInt32BE(20)) break;
    if (b.readUInt32BE(at + 4) !== 0) n++;
  }
  return n;
}
const turn = () => new Promise((r) => setImmediate(r));

describe('idempotent orders at the embedded simulator: claim and booking in one transaction', () => {
  it('once answered, another connection sees the claim, its outcome and the booking together, written by one commit and nothing after', async () => {
    const dir = tempDir('tagw-idem-atomic-');
    const { host, db } = await boot(dir);
    db.pragma('wal_autocheckpoint = 0'); // the WAL keeps every commit of this test
    const commitsBefore = walCommits(join(dir, 'tagw.sqlite-wal'));
    const reader = new Database(join(dir, 'tagw.sqlite'), { readonly: true, fileMustExist: true });
    dbs.push(reader);
    const journalRows = () => (reader.prepare('SELECT count(*) AS n FROM sim_journal').get() as { n: number }).n;
    const before = journalRows();
    const answered = await send(host, 'a-1');
    expect(answered).toMatchObject({ status: 200, replay: false });
    // No turn has passed: the claim, its outcome ('result', with the answer's bytes) and the
    // simulator's journal row were committed by the answer's own transaction.
    expect(reader.prepare("SELECT phase, result_json FROM idempotency WHERE client_order_id = 'a-1'").get()).toEqual({ phase: 'result', result_json: answered.json });
    expect(journalRows()).toBeGreaterThan(before);
    expect(walCommits(join(dir, 'tagw.sqlite-wal')) - commitsBefore).toBe(1);
    // Nothing is left to write after the reply: no second commit for the order.
    await turn();
    await turn();
    expect(walCommits(join(dir, 'tagw.sqlite-wal')) - commitsBefore).toBe(1);
  });

  it('a commit that fails after the claim leaves neither on disk; the id answers 409, nothing is sent twice', async () => {
    const dir = tempDir('tagw-idem-atomic-');
    const { host, db } = await boot(dir);
    const opened = await tickets(host);
    // The simulator's journal insert fails inside the booking transaction (as a full disk would).
    db.exec("CREATE TEMP TRIGGER fail_journal BEFORE INSERT ON sim_journal BEGIN SELECT RAISE(ABORT, 'disk I/O error (test)'); END");
    const failed = await send(host, 'f-1').then(() => null, (e: unknown) => e);
    expect(failed).toBeInstanceOf(ApiError);
    expect((failed as ApiError).code).toBe('TERMINAL_ERROR');
    expect(db.prepare("SELECT * FROM idempotency WHERE client_order_id = 'f-1'").get()).toBeUndefined();
    db.exec('DROP TRIGGER fail_journal');
    for (let i = 0; i < 3; i++) await turn();
    const retry = await send(host, 'f-1').then(() => null, (e: unknown) => e);
    expect((retry as ApiError).code).toBe('IDEMPOTENCY_UNCERTAIN');
    // At most the one order the failed commit may have left in the simulator's memory.
    expect((await tickets(host)).length - opened.length).toBeLessThanOrEqual(1);
  });

  it('another connection committing all the while (another shard) fails no claim: the booking transaction takes the write lock first', async () => {
    const dir = tempDir('tagw-idem-atomic-');
    const { host } = await boot(dir);
    // Another shard's connection to the same file, committing in a loop on its own thread.
    const sqlite = createRequire(import.meta.url).resolve('better-sqlite3');
    const other = new Worker(`
      const { parentPort } = require('node:worker_threads');
      const db = new (require(${JSON.stringify(sqlite)}))(${JSON.stringify(join(dir, 'tagw.sqlite'))});
      db.pragma('busy_timeout = 5000');
      db.exec('CREATE TABLE IF NOT EXISTS other_shard (n INTEGER)');
      const ins = db.prepare('INSERT INTO other_shard VALUES (?)');
      let stop = false;
      parentPort.on('message', () => (stop = true));
      let n = 0;
      const loop = () => { for (let i = 0; i < 200; i++) ins.run(n++); if (stop) { db.close(); parentPort.postMessage(n); } else setImmediate(loop); };
      parentPort.postMessage('started');
      loop();`, { eval: true });
    await new Promise((r) => other.once('message', r));
    const answers = [];
    for (let i = 0; i < 200; i++) answers.push(await send(host, `w-${i}`).then((r) => r.status, (e: unknown) => (e as Error).message));
    other.postMessage('stop');
    const commits = await new Promise<number>((r) => other.once('message', r));
    await other.terminate();
    expect(commits).toBeGreaterThan(200);
    expect(answers.filter((a) => a !== 200)).toEqual([]);
  });

  it('the record is written once, in its final state: one insert of the result, no update of a \'sent\' row', async () => {
    const dir = tempDir('tagw-idem-atomic-');
    const { host, db } = await boot(dir);
    // Every write to the records, as the statement saw it (temp triggers: this connection only).
    db.exec(`CREATE TEMP TABLE writes (op TEXT, phase TEXT);
      CREATE TEMP TRIGGER idem_ins AFTER INSERT ON idempotency BEGIN INSERT INTO writes VALUES ('insert', NEW.phase); END;
      CREATE TEMP TRIGGER idem_upd AFTER UPDATE ON idempotency BEGIN INSERT INTO writes VALUES ('update', NEW.phase); END;`);
    const answered = await send(host, 'o-1');
    for (let i = 0; i < 3; i++) await turn();
    expect(db.prepare('SELECT op, phase FROM writes').all()).toEqual([{ op: 'insert', phase: 'result' }]);
    expect(db.prepare("SELECT phase, result_json FROM idempotency WHERE client_order_id = 'o-1'").get()).toEqual({ phase: 'result', result_json: answered.json });
  });

  it('a settled record on disk refuses the claim inside the transaction: replayed, not executed again', async () => {
    const dir = tempDir('tagw-idem-atomic-');
    const { host } = await boot(dir);
    const first = await send(host, 's-1');
    for (let i = 0; i < 3; i++) await turn();
    const count = (await tickets(host)).length;
    // A restarted host holds no record in memory: the claim meets the row.
    const restarted = (await boot(dir)).host;
    const again = await send(restarted, 's-1');
    expect(again).toEqual({ ...first, replay: true });
    expect((await tickets(restarted)).length).toBe(count);
    const same = await send(host, 's-1');
    expect(same).toEqual({ ...first, replay: true });
  });
});

// A batch of requests reaching the shard in one message opens the shard's commit group: the
// batch's idempotent orders book in memory one by one and commit together at the end of the turn.
describe('idempotent orders of one batch: one commit for all (commit group)', () => {
  const phase = (db: Db, id: string) => db.prepare('SELECT phase FROM idempotency WHERE client_order_id = ?').get(id) as { phase: string } | undefined;

  it('commit once at the end of the turn, then answer all; every record holds its result, every retry replays', async () => {
    const dir = tempDir('tagw-idem-group-');
    const group = new CommitGroup();
    const { host, db } = await boot(dir, group);
    db.pragma('wal_autocheckpoint = 0');
    const opened = await tickets(host);
    const commitsBefore = walCommits(join(dir, 'tagw.sqlite-wal'));
    const reader = new Database(join(dir, 'tagw.sqlite'), { readonly: true, fileMustExist: true });
    dbs.push(reader);
    group.openForTurn();
    const ids = ['g-1', 'g-2', 'g-3', 'g-4', 'g-5'];
    const answers = Promise.all(ids.map((id) => send(host, id)));
    // The batch's microtasks ran (every order booked in memory), the turn has not ended: nothing committed.
    for (let i = 0; i < 20; i++) await Promise.resolve();
    expect(ids.map((id) => reader.prepare('SELECT phase FROM idempotency WHERE client_order_id = ?').get(id))).toEqual(ids.map(() => undefined));
    const replies = await answers;
    expect(replies.map((r) => [r.status, r.replay])).toEqual(ids.map(() => [200, false]));
    expect(walCommits(join(dir, 'tagw.sqlite-wal')) - commitsBefore).toBe(1);
    expect(ids.map((id) => phase(db, id))).toEqual(ids.map(() => ({ phase: 'result' })));
    expect((await tickets(host)).length - opened.length).toBe(ids.length);
    for (const [i, id] of ids.entries()) expect(await send(host, id)).toEqual({ ...replies[i]!, replay: true });
    expect((await tickets(host)).length - opened.length).toBe(ids.length);
  });

  it('a group commit that fails: every order of the batch answers TERMINAL_ERROR, none is on disk, retries answer 409, nothing is sent twice', async () => {
    const dir = tempDir('tagw-idem-group-');
    const group = new CommitGroup();
    const { host, db } = await boot(dir, group);
    const opened = await tickets(host);
    db.exec("CREATE TEMP TRIGGER fail_journal BEFORE INSERT ON sim_journal BEGIN SELECT RAISE(ABORT, 'disk I/O error (test)'); END");
    group.openForTurn();
    const ids = ['h-1', 'h-2', 'h-3'];
    const failed = await Promise.all(ids.map((id) => send(host, id).then(() => null, (e: unknown) => e)));
    expect(failed.map((e) => (e as ApiError).code)).toEqual(ids.map(() => 'TERMINAL_ERROR'));
    expect(ids.map((id) => phase(db, id))).toEqual(ids.map(() => undefined));
    db.exec('DROP TRIGGER fail_journal');
    for (let i = 0; i < 3; i++) await turn();
    const retries = await Promise.all(ids.map((id) => send(host, id).then(() => null, (e: unknown) => e)));
    expect(retries.map((e) => (e as ApiError).code)).toEqual(ids.map(() => 'IDEMPOTENCY_UNCERTAIN'));
    // At most the orders the failed commit may have left in the simulator's memory.
    expect((await tickets(host)).length - opened.length).toBeLessThanOrEqual(ids.length);
  });
});

describe('a record stopped while its order is in flight', () => {
  it('answers 503 with retry-after (not a bare 500), and the retry with the same id is answered once', async () => {
    const dir = tempDir('tagw-idem-stop-');
    const { host } = await boot(dir);
    const opened = await tickets(host);
    // A held reply: the claim commits, then the order waits at the "broker".
    await host.handlers['account.fault']!({ accountId, fault: { kind: 'latency', latencyMs: 300 } });
    const inFlight = send(host, 'm-1').then(() => null, (e: unknown) => e);
    await new Promise((r) => setTimeout(r, 50));
    // Cluster mode: the account's lease went to another node (handover or loss).
    host.release!(new Set([accountId]));
    const err = (await inFlight) as ApiError;
    expect(err).toBeInstanceOf(ApiError);
    expect([err.code, err.status, err.headers?.['retry-after']]).toEqual(['SERVICE_UNAVAILABLE', 503, '1']);
    await new Promise((r) => setTimeout(r, 400));
    // The account comes back here (or, in a cluster, retries reach the next owner): answered once.
    const again = (await boot(dir)).host;
    const retry = await send(again, 'm-1');
    expect(retry.status).toBe(200);
    expect((await tickets(again)).length - opened.length).toBe(1);
  });
});
