// A full DATA_DIR meets a shard's background writes (docs/storage.md). In CI under load a shard died
// on a full disk and was restarted (`tagw status`: "shard 1 not up ..., disk full"): the embedded
// simulator writes outside any request, an equity point a minute while positions are open (a journal
// commit) and the checkpoint passes after it, and its store took the full disk for a failed commit it
// must stop on (simFailStop.ts). Here an account host runs as a shard runs it, over a real full
// tmpfs, its clock in the test's hands: the shard must not stop, reads go on, and the writes are
// done once there is room, with nothing lost (a start from the disk afterwards sees them).
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SecretBox } from '../../src/crypto/secretBox.js';
import { createLogger } from '../../src/log.js';
import type { TradeReply } from '../../src/runtime/hosts/accountCommands.js';
import { createAccountHost } from '../../src/runtime/hosts/accounts.js';
import { createSeatHost } from '../../src/runtime/hosts/seats.js';
import type { ActorHost } from '../../src/runtime/hosts/context.js';
import type { BrokerConnection, BrokerCredentials } from '../../src/broker/types.js';
import { RETCODE_DONE, type TradeResult } from '../../src/market/orders.js';
import type { ServerInfo } from '../../src/market/server.js';
import { BrokerDisconnectedError, BrokerTimeoutError } from '../../src/market/brokerErrors.js';
import { shardSettings } from '../../src/runtime/settings.js';
import { openDb, type Db } from '../../src/store/db.js';
import { runMigrations } from '../../src/store/migrations.js';
import { FullDisk } from '../../src/store/fullDisk.js';
import { systemClock } from '../../src/util/clock.js';
import { ManualClock } from '../helpers/gateway.js';
import { fillUp } from '../helpers/fullDisk.js';
import { until } from '../helpers/until.js';

const KEY = 'ab'.repeat(32);
const ACCOUNT = '77777777-7777-4777-8777-777777777777';
let mnt: string;
let mounted = false;
/** Closed before the file system is unmounted, whatever a failed case left open. */
const open: Array<{ close(): void }> = [];

beforeAll(() => {
  mnt = mkdtempSync(join(tmpdir(), 'tagw-full-bg-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=16m', 'tmpfs', mnt], { stdio: 'pipe' });
    mounted = true;
  } catch (err) {
    throw new Error(`this test mounts a 16 MiB tmpfs and needs root (or CAP_SYS_ADMIN) for it: ${(err as { stderr?: Buffer }).stderr?.toString().trim() || String(err)}`);
  }
});
afterAll(() => {
  for (const o of open.splice(0).reverse()) {
    try {
      o.close();
    } catch {
      // closed already
    }
  }
  if (mounted) execFileSync('umount', [mnt]);
  rmSync(mnt, { recursive: true, force: true });
});

interface Booted { host: ActorHost; db: Db; fatal: unknown[]; logs: Array<{ level: string; msg: string; what?: string }>; full: RecordingFullDisk }

/** The shard's FullDisk, noting which writer each postponed write was. */
class RecordingFullDisk extends FullDisk {
  readonly writers: string[] = [];
  override postponed(what: string, err: unknown): boolean {
    const p = super.postponed(what, err);
    if (p) this.writers.push(what);
    return p;
  }
}

/** The account host over DATA_DIR's database, as a shard runs it (ctx.fatal: what makes the shard stop). */
async function boot(dir: string, clock: ManualClock): Promise<Booted> {
  const db = openDb(dir);
  open.push(db);
  const fatal: unknown[] = [];
  const logs: Booted['logs'] = [];
  const log = createLogger('info', {}, (line) => logs.push(JSON.parse(line) as Booted['logs'][number]));
  const full = new RecordingFullDisk({ log, retryMs: 50 });
  const host = createAccountHost({
    shard: 0, shards: 1, db, log, settings: shardSettings({ secretKeyHex: KEY }), clock, emit: () => {}, owns: () => true, fatal: (err) => fatal.push(err), fullDisk: full,
  });
  open.push({ close: () => host.stop() });
  host.rehydrate();
  await host.handlers['account.bind']!({ accountId: ACCOUNT, customerId: 'c', server: 'Sim-P5-Demo', login: 'bg-1', passwordEnc: new SecretBox(Buffer.from(KEY, 'hex')).seal('pw', ACCOUNT) });
  return { host, db, fatal, logs, full };
}

const op = (h: ActorHost, name: string, args: Record<string, unknown> = {}) => Promise.resolve(h.handlers['account.op']!({ accountId: ACCOUNT, op: name, args } as never));

describe('a shard\'s background writes on a full DATA_DIR', () => {
  it('an equity point and the checkpoint pass meet the full disk: the shard goes on, reads answer, both are written once there is room', async () => {
    const dir = join(mnt, 'data');
    mkdirSync(dir);
    const clock = new ManualClock(Date.UTC(2026, 10, 27, 9, 0, 30));
    const b = await boot(dir, clock);
    const reply = (await b.host.handlers['account.trade']!({ accountId: ACCOUNT, op: 'OrderSend', args: { symbol: 'BTCUSD', operation: 'Buy', volume: 0.01 }, clientOrderId: 'bg-order' })) as TradeReply;
    expect(reply.status).toBe(200);
    const tickets = await op(b.host, 'OpenedOrdersTickets');
    expect(tickets).toHaveLength(1);
    const reader = new Database(join(dir, 'tagw.sqlite'), { readonly: true, fileMustExist: true });
    open.push(reader);
    const journal = () => (reader.prepare("SELECT count(*) AS n FROM sim_journal WHERE login = 'bg-1'").get() as { n: number }).n;
    const marked = () => (reader.prepare("SELECT count(*) AS n FROM sim_dirty WHERE login = 'bg-1'").get() as { n: number }).n;
    // The deposit, the order, and the position's first equity point (at the simulator's next step).
    await until(() => journal() === 3, 'the order and its first equity point journaled');
    const before = journal();

    // The order's checkpoint is not due yet (the account's first was written a moment ago, by
    // the test's clock): the order's journal row is marked, its checkpoint to come.
    expect(marked()).toBe(1);

    // An empty WAL, so the next commit must grow it: it really meets the full disk.
    b.db.pragma('wal_checkpoint(TRUNCATE)');
    const filler = fillUp(mnt);
    try {
      // A second later (the same minute of market time): the checkpoint pass falls due.
      clock.advance(1_000);
      await until(() => b.fatal.length > 0 || b.full.writers.length > 0, 'the checkpoint pass meeting the full disk');
      expect(b.fatal.map(String)).toEqual([]);
      expect(b.full.writers[0]).toBe('simulator checkpoint');
      // New minutes of market time: the open position's equity point each (a journal commit).
      for (let i = 1; i <= 3; i++) {
        clock.advance(60_000);
        await until(() => b.fatal.length > 0 || b.full.writers.filter((w) => w === 'simulator journal').length >= i, `equity point ${i} meeting the full disk`);
      }
      expect(b.fatal.map(String)).toEqual([]);
      // Reads go on (positions, history, the account).
      expect(await op(b.host, 'OpenedOrdersTickets')).toEqual(tickets);
      expect(await op(b.host, 'Account')).toMatchObject({ login: 'bg-1' });
      expect(((await op(b.host, 'OrderHistory', { from: 0 })) as { deals: unknown[] }).deals.length).toBeGreaterThanOrEqual(2);
      expect([journal(), marked()]).toEqual([before, 1]);
      expect(b.logs.filter((l) => /DATA_DIR is full/.test(l.msg))).toMatchObject([{ level: 'error', what: 'simulator checkpoint' }]);
    } finally {
      rmSync(filler);
    }
    // Room again: what waited is written, the three equity points, then the checkpoint covering them.
    await until(() => journal() === before + 3 && marked() === 0, 'the postponed writes done once there is room');
    expect(b.fatal.map(String)).toEqual([]);
    expect(b.logs.filter((l) => /DATA_DIR has room again/.test(l.msg))).toHaveLength(1);
    const written = journal();
    b.host.stop();
    b.db.close();

    // Nothing lost: a start from the disk has the position and every row.
    const again = await boot(dir, clock);
    expect(await op(again.host, 'OpenedOrdersTickets')).toEqual(tickets);
    expect(journal()).toBe(written);
    again.host.stop();
    again.db.close();
    reader.close();
  }, 60_000);
});

describe('a seat becoming ACTIVE (its timer\'s write) on a full DATA_DIR', () => {
  it('the shard goes on and the seat\'s row says ACTIVE once there is room', async () => {
    const dir = join(mnt, 'seats');
    mkdirSync(dir);
    const db = openDb(dir);
    open.push(db);
    runMigrations(db);
    db.exec("INSERT INTO customers (id, name, created_at) VALUES ('c', 'c', 0); INSERT INTO seats (id, customer_id, private_hosting, created_at) VALUES ('seat-1', 'c', 0, 0)");
    const logs: Booted['logs'] = [];
    const log = createLogger('info', {}, (line) => logs.push(JSON.parse(line) as Booted['logs'][number]));
    const full = new RecordingFullDisk({ log, retryMs: 50 });
    const host = createSeatHost({ shard: 0, shards: 1, db, log, settings: shardSettings({}), clock: new ManualClock(), emit: () => {}, owns: () => true, fullDisk: full });
    open.push({ close: () => host.stop() });
    const status = () => (db.prepare("SELECT status FROM seat_state WHERE seat_id = 'seat-1'").get() as { status: string } | undefined)?.status;
    // Building for a moment (the machine's timer runs on the wall clock): its row is written now.
    expect(host.handlers['seat.create']!({ seatId: 'seat-1', readyAt: Date.now() + 300 })).toMatchObject({ status: 'BUILDING_SERVER' });
    expect(status()).toBe('BUILDING_SERVER');
    db.pragma('wal_checkpoint(TRUNCATE)');
    const filler = fillUp(mnt);
    try {
      await until(() => full.writers.includes('seat state'), 'the seat\'s ACTIVE row meeting the full disk');
      expect(status()).toBe('BUILDING_SERVER');
      expect(logs.filter((l) => l.msg === 'seat actor failed')).toEqual([]);
    } finally {
      rmSync(filler);
    }
    await until(() => status() === 'ACTIVE', 'the seat\'s ACTIVE row written once there is room');
    expect(host.handlers['seat.get']!({ seatId: 'seat-1' })).toMatchObject({ status: 'ACTIVE' });
    expect(logs.filter((l) => /DATA_DIR has room again/.test(l.msg))).toHaveLength(1);
  }, 60_000);
});

describe('an idempotency record\'s outcome (written a turn after the answer) on a full DATA_DIR', () => {
  const fake: ServerInfo = { name: 'Fake-P5', platform: 'P5', build: 4620, company: 'Fake', timeZone: { description: 'UTC', standardOffsetMinutes: 0, dst: 'none' } };
  const FAKE_ACCOUNT = '88888888-8888-4888-8888-888888888888';

  /** A broker in another process (a bridge's shape: no atomic claim), whose reply the test releases. */
  class Upstream {
    executed = 0;
    lookups = 0;
    readonly done = new Map<string, TradeResult>();
    release: () => void = () => {};
    hold = false;
    /** Thrown once the held reply is released (the order executed first when the reply is lost). */
    fail: Error | undefined;
    /** An order is at the broker, its reply held. */
    holding = false;
    conn(c: BrokerCredentials): BrokerConnection {
      let state = 'disconnected';
      return {
        server: fake, login: c.login,
        get state() { return state; },
        connect: async () => { state = 'connected'; },
        disconnect: async () => { state = 'disconnected'; },
        on: () => () => {},
        orderSend: async (req: { symbol: string; type: string; volume: number }, opts?: { requestId?: string }): Promise<TradeResult> => {
          if (this.hold) {
            this.holding = true;
            await new Promise<void>((r) => (this.release = r));
          }
          if (this.fail instanceof BrokerDisconnectedError) throw this.fail;
          this.executed++;
          if (this.fail) throw this.fail;
          const result: TradeResult = {
            ok: true, retcode: RETCODE_DONE, deals: [],
            order: {
              kind: 'order', ticket: 900 + this.executed, symbol: req.symbol, type: req.type, state: 'filled', volume: req.volume, volumeInitial: req.volume,
              openPrice: 1.1, openTimeMsc: 1_700_000_000_000, sl: 0, tp: 0, magic: 0, comment: '', commission: 0, swap: 0, profit: 0, positionId: 900 + this.executed,
            },
          } as TradeResult;
          if (opts?.requestId) this.done.set(opts.requestId, result);
          return result;
        },
        lookupRequest: async (requestId: string) => {
          this.lookups++;
          const result = this.done.get(requestId);
          return result ? { requestId, timeMsc: 1, result } : null;
        },
      } as unknown as BrokerConnection;
    }
  }

  /** An account host over `name`'s database on the tmpfs, its broker the Upstream; `boot` again: a start from the disk. */
  function outcomeHost(name: string) {
    const dir = join(mnt, name);
    mkdirSync(dir);
    const up = new Upstream();
    const logs: Booted['logs'] = [];
    const boot = () => {
      const db = openDb(dir);
      open.push(db);
      const log = createLogger('info', {}, (line) => logs.push(JSON.parse(line) as Booted['logs'][number]));
      const full = new RecordingFullDisk({ log, retryMs: 50 });
      const host = createAccountHost({
        shard: 0, shards: 1, db, log, settings: shardSettings({ secretKeyHex: KEY }), clock: systemClock, emit: () => {}, owns: () => true, fullDisk: full,
      }, { broker: { factory: (c) => up.conn(c), stop: () => {} } });
      open.push({ close: () => host.stop() });
      host.rehydrate();
      return { db, host, full };
    };
    const bind = (h: ActorHost) => h.handlers['account.bind']!({ accountId: FAKE_ACCOUNT, customerId: 'c', server: 'Fake-P5', login: '9', passwordEnc: new SecretBox(Buffer.from(KEY, 'hex')).seal('pw', FAKE_ACCOUNT) });
    const send = (h: ActorHost) => Promise.resolve(h.handlers['account.trade']!({ accountId: FAKE_ACCOUNT, op: 'OrderSend', args: { symbol: 'EURUSD', operation: 'Buy', volume: 0.1 }, clientOrderId: 'o-1' })) as Promise<TradeReply>;
    const phaseIn = (db: Db) => () => (db.prepare("SELECT phase FROM idempotency WHERE client_order_id = 'o-1'").get() as { phase: string } | undefined)?.phase;
    return { up, logs, boot, bind, send, phaseIn };
  }

  it('the outcome waits in memory (a same-id retry waits for it), is written once there is room, and only then replayed from its row: no broker question, no second order', async () => {
    const { up, logs, boot, bind, send, phaseIn } = outcomeHost('outcomes');
    const b = boot();
    await bind(b.host);
    const phase = phaseIn(b.db);

    up.hold = true;
    const first = send(b.host);
    // The claim ('sent') is on disk before the order goes out.
    await until(() => phase() === 'sent' && up.holding, 'the claim committed');
    b.db.pragma('wal_checkpoint(TRUNCATE)');
    const filler = fillUp(mnt);
    let retried: TradeReply | undefined;
    try {
      up.release();
      const answer = await first;
      expect(answer).toMatchObject({ status: 200, replay: false });
      await until(() => b.full.writers.includes('idempotency outcomes'), 'the outcome\'s commit meeting the full disk');
      expect(logs.filter((l) => /DATA_DIR is full/.test(l.msg))).toMatchObject([{ level: 'error', what: 'idempotency outcomes' }]);
      expect(logs.filter((l) => l.msg === 'cannot commit idempotency outcomes' || l.msg === 'idempotency actor failed')).toEqual([]);
      // A same-id retry waits for the outcome to be on disk: still waiting after two more tries of the write.
      const retry = send(b.host).then((r) => (retried = r));
      const tries = b.full.writers.length;
      await until(() => b.full.writers.length >= tries + 2, 'two more tries of the outcome\'s write');
      expect(retried).toBeUndefined();
      expect(phase()).toBe('sent');
      rmSync(filler);
      await until(() => phase() === 'result', 'the outcome written once there is room');
      expect(await retry).toEqual({ ...answer, replay: true });
    } finally {
      rmSync(join(mnt, 'filler'), { force: true });
    }
    expect(logs.filter((l) => /DATA_DIR has room again/.test(l.msg))).toHaveLength(1);
    // From its row: a start from the disk replays it without asking the broker.
    b.host.stop();
    const again = boot();
    await bind(again.host);
    expect(await send(again.host)).toMatchObject({ status: 200, replay: true });
    expect([up.executed, up.lookups]).toEqual([1, 0]);
  }, 60_000);

  it.each([
    ['never sent (the connection dropped first): its row is removed once there is room, and the retry sends the order', 'failed'],
    ['sent, its reply lost and the broker cannot tell: its row says uncertain once there is room, and the retry answers 409', 'lost'],
  ] as const)('an order %s', async (_name, how) => {
    const { up, boot, bind, send, phaseIn } = outcomeHost(`outcomes-${how}`);
    const b = boot();
    await bind(b.host);
    const phase = phaseIn(b.db);
    up.hold = true;
    up.fail = how === 'failed' ? new BrokerDisconnectedError() : new BrokerTimeoutError(true, 'reply lost');
    const first = send(b.host).then(() => 'answered', (e: unknown) => (e as { code?: string }).code);
    await until(() => phase() === 'sent' && up.holding, 'the claim committed');
    b.db.pragma('wal_checkpoint(TRUNCATE)');
    const filler = fillUp(mnt);
    let retried: string | undefined;
    try {
      up.release();
      expect(await first).toBe(how === 'failed' ? 'NOT_CONNECTED' : 'TERMINAL_ERROR');
      await until(() => b.full.writers.includes('idempotency outcomes'), 'the outcome\'s commit meeting the full disk');
      up.hold = false;
      up.fail = undefined;
      const retry = send(b.host).then((r) => (retried = `${r.status}`), (e: unknown) => (retried = (e as { code?: string }).code));
      const tries = b.full.writers.length;
      await until(() => b.full.writers.length >= tries + 2, 'two more tries of the outcome\'s write');
      expect([retried, phase()]).toEqual([undefined, 'sent']);
      rmSync(filler);
      await retry;
    } finally {
      rmSync(join(mnt, 'filler'), { force: true });
    }
    if (how === 'failed') {
      // The id was free: the retry's order, the only one executed, and its own row (its outcome a turn after its answer).
      await until(() => phase() === 'result', 'the retry\'s outcome written');
      expect([retried, up.executed]).toEqual(['200', 1]);
    } else {
      expect([retried, up.executed, phase()]).toEqual(['IDEMPOTENCY_UNCERTAIN', 1, 'uncertain']);
    }
  }, 60_000);

  it('a record restored \'sent\' whose recovered outcome meets the full disk fails for lack of space (503 STORAGE_UNAVAILABLE), and once there is room its retry is answered from the disk: it was stuck on that error until the shard restarted', async () => {
    const { up, boot, bind, send, phaseIn } = outcomeHost('outcomes-recover');
    const b = boot();
    await bind(b.host);
    const phase = phaseIn(b.db);
    up.hold = true;
    const first = send(b.host);
    await until(() => phase() === 'sent' && up.holding, 'the claim committed');
    // A start from the disk while the order is at the broker: the record is restored 'sent'. The
    // first host dies (its connection to the database closed: its outcome is never written).
    const restarted = boot();
    await bind(restarted.host);
    b.db.close();
    up.release();
    expect(await first).toMatchObject({ status: 200 });
    restarted.db.pragma('wal_checkpoint(TRUNCATE)');
    const filler = fillUp(mnt);
    try {
      // The restarted host asks the broker (it executed) and writes the outcome: no room (the shard
      // answers it as 503 STORAGE_UNAVAILABLE, errors.ts).
      await expect(send(restarted.host)).rejects.toMatchObject({ code: 'SQLITE_FULL' });
    } finally {
      rmSync(filler);
    }
    expect(await send(restarted.host)).toMatchObject({ status: 200, replay: true });
    expect(phaseIn(restarted.db)()).toBe('result');
    expect(up.executed).toBe(1);
  }, 60_000);
});
