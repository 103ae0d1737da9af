// Issue 14 item 6: in embedded mode a record left `sent` by a crash is resolved from the embedded
// simulator's own journal, not blocked 24 h with 409 IDEMPOTENCY_UNCERTAIN. The simulator runs in
// the shard's thread and journals trades in the gateway's database: after a SIGKILL nothing can
// still be in transit, so "no trace in the journal" means "never executed" (the id is free), and a
// trace means "executed" (its result is replayed). 409 stays for a broker in another process (bridge).
import Database from 'better-sqlite3';
import fc from 'fast-check';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createActor } from 'xstate';
import { idempotencyMachine } from '../../actors/idempotency.js';
import { RETCODE_DONE, type RequestLookup } from '../../src/market/orders.js';
import { SecretBox } from '../../src/crypto/secretBox.js';
import { createLogger } from '../../src/log.js';
import type { TradeReply } from '../../src/runtime/hosts/accountCommands.js';
import { createAccountHost } from '../../src/runtime/hosts/accounts.js';
import { recoveredOutcome } from '../../src/runtime/hosts/accountTrade.js';
import type { ActorHost } from '../../src/runtime/hosts/context.js';
import { openDb, type Db } from '../../src/store/db.js';
import { cleanupProcesses, startProcess as spawnGateway, tempDir } from '../helpers/process.js';
import { otherWriter } from '../helpers/otherWriter.js';
import { shardSettings } from '../../src/runtime/settings.js';
import { systemClock } from '../../src/util/clock.js';

afterEach(cleanupProcesses);

const MK = 'crash-test-management-key-0123456789';

describe('a gateway SIGKILLed while an idempotent order waits at the embedded simulator', () => {
  it('after the restart the retry executes it once (200, not 409), then replays it', async () => {
    const a = spawnGateway({ GATEWAY_MANAGEMENT_KEY: MK });
    let url = await a.listening;
    const mk = { authorization: `Bearer ${MK}` };
    const key = ((await (await fetch(`${url}/v1/keys`, { method: 'POST', headers: mk, body: JSON.stringify({ label: 'bot' }) })).json()) as { key: string }).key;
    const bind = await fetch(`${url}/ConnectEx`, { method: 'POST', headers: { 'x-api-key': key }, body: JSON.stringify({ user: 'crash-1', password: 'pw', server: 'Sim-P5-Demo' }) });
    expect(bind.status).toBe(200);
    const id = ((await bind.json()) as { id: string }).id;
    // The simulator holds every reply of this login for a minute: the order waits there, unexecuted.
    const fault = await fetch(`${url}/v1/sim/faults`, { method: 'POST', headers: mk, body: JSON.stringify({ server: 'Sim-P5-Demo', login: 'crash-1', kind: 'latency', latencyMs: 60_000 }) });
    expect(fault.status, await fault.text()).toBe(201);
    const order = `/OrderSend?id=${id}&symbol=BTCUSD&operation=Buy&volume=0.01&clientOrderId=crash-1`;
    const hanging = fetch(url + order, { headers: { 'x-api-key': key } }).catch(() => 'connection lost');
    // Kill once the record is durably `sent` (committed before the order goes to the simulator).
    const db = new Database(join(a.dir, 'tagw.sqlite'), { readonly: true, fileMustExist: true });
    const phase = () => (db.prepare("SELECT phase FROM idempotency WHERE client_order_id = 'crash-1'").get() as { phase: string } | undefined)?.phase;
    while (phase() !== 'sent') await new Promise((r) => setTimeout(r, 20));
    a.child.kill('SIGKILL');
    await a.exited;
    db.close();
    expect(await hanging).toBe('connection lost');

    const b = spawnGateway({ GATEWAY_MANAGEMENT_KEY: MK }, a.dir);
    url = await b.listening;
    const send = () => fetch(url + order, { headers: { 'x-api-key': key } });
    let r = await send();
    // 503 while the account's connection comes back after the restart.
    while (r.status === 503) {
      await new Promise((res) => setTimeout(res, 50));
      r = await send();
    }
    const body = (await r.json()) as { ticket: number; error?: string };
    // The restarted gateway's log beside a wrong answer: a CI run saw a 500 here once.
    expect(r.status, `${JSON.stringify(body)}\n${b.output().slice(-4000)}`).toBe(200);
    expect(r.headers.get('idempotent-replay')).toBeNull();
    const tickets = await (await fetch(`${url}/OpenedOrdersTickets?id=${id}`, { headers: { 'x-api-key': key } })).json();
    expect(tickets).toEqual([body.ticket]);
    const again = await send();
    expect(again.headers.get('idempotent-replay')).toBe('true');
    expect(((await again.json()) as { ticket: number }).ticket).toBe(body.ticket);
    b.child.kill('SIGTERM');
    expect(await b.exited).toBe(0);
  }, 60_000);
});

/** The shard hosts and connections embeddedShard made, stopped and closed after each test. */
const hosts: ActorHost[] = [];
const dbs: Db[] = [];
afterEach(() => {
  for (const h of hosts.splice(0)) h.stop();
  for (const d of dbs.splice(0)) d.close();
});

/** A shard host with the real embedded simulator, each boot on its own connection to one database
 *  (a restart of the shard), and one account on it trading with `clientOrderId`. */
function embeddedShard(prefix: string, accountId: string, login: string, clientOrderId: string) {
  const dir = tempDir(prefix);
  const key = randomBytes(32);
  const boot = () => {
    const db = openDb(dir);
    dbs.push(db);
    const host = createAccountHost({ shard: 0, shards: 1, db, log: createLogger('silent'), settings: shardSettings({ secretKeyHex: key.toString('hex') }), clock: systemClock, emit: () => {}, owns: () => true });
    hosts.push(host);
    host.rehydrate();
    return host;
  };
  const bind = (h: ActorHost) => h.handlers['account.bind']!({ accountId, customerId: 'c', server: 'Sim-P5-Demo', login, passwordEnc: new SecretBox(key).seal('pw', accountId) });
  const send = (h: ActorHost) => Promise.resolve(h.handlers['account.trade']!({ accountId, op: 'OrderSend', args: { symbol: 'BTCUSD', operation: 'Buy', volume: 0.01 }, clientOrderId })) as Promise<TradeReply>;
  return { boot, bind, send };
}

describe('a crash after the embedded simulator executed, before the outcome was written', () => {

  it('the restarted shard replays the result the simulator journaled: same ticket, one position', async () => {
    const accountId = '44444444-4444-4444-8444-444444444444';
    const { boot, bind, send } = embeddedShard('tagw-idem-sim-', accountId, 'crash-2', 'e-1');
    const first = boot();
    await bind(first);
    const answered = await send(first);
    expect(answered).toMatchObject({ status: 200, replay: false });
    // "Crash" now: the outcome was committed with the booking, so on disk the record is already
    // `result`. A record left `sent` (a claim committed before a held reply, or by a build that
    // wrote outcomes a turn after the reply) must recover from the simulator's journal instead:
    // the row is put back to `sent` to take that path; a new shard rehydrates from the disk as it is.
    expect(dbs[0]!.prepare("SELECT phase, result_json FROM idempotency WHERE client_order_id = 'e-1'").get()).toEqual({ phase: 'result', result_json: answered.json });
    dbs[0]!.prepare("UPDATE idempotency SET phase = 'sent', status = NULL, result_json = NULL WHERE client_order_id = 'e-1'").run();
    const restarted = boot();
    await bind(restarted);
    const retry = await send(restarted);
    expect(retry).toEqual({ ...answered, replay: true });
    const opened = await restarted.handlers['account.op']!({ accountId, op: 'OpenedOrdersTickets', args: {} });
    expect(opened).toEqual([JSON.parse(answered.json).ticket]);
  });
});

/** The answered record put back to `sent`, under a broker request id the simulator never saw (it is
 *  made from the record's expiry): a record of an order that never executed, as a SIGKILL leaves one. */
const neverExecuted = (db: Db, clientOrderId: string) =>
  db.prepare("UPDATE idempotency SET phase = 'sent', status = NULL, result_json = NULL, expires_at = expires_at + 1 WHERE client_order_id = ?").run(clientOrderId);

describe('a record restored `sent` that the embedded simulator never executed', () => {

  // CI (load ~8) answered a crashed order's retry 500 INTERNAL_ERROR once: freeing the record (a
  // transaction that reads its key, then deletes) was DEFERRED, so another connection of the file
  // holding the write lock (another shard's login taking its id block, a checkpoint) made SQLite
  // answer SQLITE_BUSY at once; the record's actor errored, and the error reached the client raw.
  it('another connection holding the write lock: the retry waits for it, frees the id and sends the order (200, not 500)', async () => {
    const accountId = '55555555-5555-4555-8555-555555555555';
    const { boot, bind, send } = embeddedShard('tagw-idem-busy-', accountId, 'crash-3', 'b-1');
    const first = boot();
    await bind(first);
    const answered = await send(first);
    expect(answered).toMatchObject({ status: 200, replay: false });
    neverExecuted(dbs[0]!, 'b-1');
    const restarted = boot();
    await bind(restarted);
    // Connected (the login and its id block done) before the other connection takes the lock.
    await restarted.handlers['account.op']!({ accountId, op: 'OpenedOrdersTickets', args: {} });
    const other = otherWriter(dbs[1]!.name, 150, 'UPDATE idempotency_moved SET through = through WHERE only = 0');
    await other.locked;
    const retry = await send(restarted);
    await other.done;
    expect(retry).toMatchObject({ status: 200, replay: false });
    expect(JSON.parse(retry.json).ticket).not.toBe(JSON.parse(answered.json).ticket);
    expect((await send(restarted)).replay).toBe(true);
  });

  // Its freeing failing (a database error): its actor errored, and kept answering the raw error (500 INTERNAL_ERROR) to every retry until a restart.
  it('answers 409 for this attempt (final: false), then the retry restores it from its row and sends the order', async () => {
    const accountId = '66666666-6666-4666-8666-666666666666';
    const { boot, bind, send } = embeddedShard('tagw-idem-fail-', accountId, 'crash-4', 'f-1');
    const first = boot();
    await bind(first);
    const answered = await send(first);
    neverExecuted(dbs[0]!, 'f-1');
    dbs[0]!.exec("CREATE TRIGGER test_no_delete BEFORE DELETE ON idempotency BEGIN SELECT RAISE(ABORT, 'cannot delete (test)'); END");
    const restarted = boot();
    await bind(restarted);
    await expect(send(restarted)).rejects.toMatchObject({ code: 'IDEMPOTENCY_UNCERTAIN', details: { final: false } });
    dbs[0]!.exec('DROP TRIGGER test_no_delete');
    const retry = await send(restarted);
    expect(retry).toMatchObject({ status: 200, replay: false });
    expect(JSON.parse(retry.json).ticket).not.toBe(JSON.parse(answered.json).ticket);
  });
});

describe('recoveredOutcome (the resolution of a record restored `sent`)', () => {
  const lookup = (ticket: number): RequestLookup => ({
    requestId: 'r', timeMsc: 1,
    result: {
      ok: true, retcode: RETCODE_DONE, deals: [],
      order: {
        kind: 'order', ticket, symbol: 'EURUSD', type: 'Buy', state: 'filled', volume: 0.1, volumeInitial: 0.1, openPrice: 1.1,
        openTimeMsc: 1_700_000_000_000, sl: 0, tp: 0, magic: 0, comment: '', commission: 0, swap: 0, profit: 0, positionId: ticket,
      },
    },
  });
  it('property: found → its result (persisted); not found in process → id freed; not found across processes → uncertain (409)', () => {
    fc.assert(fc.property(fc.option(fc.integer({ min: 1, max: 1e9 }), { nil: undefined }), fc.boolean(), (ticket, inProcess) => {
      const found = ticket === undefined ? null : lookup(ticket);
      const log: string[] = [];
      const m = idempotencyMachine.provide({
        actions: {
          persistSent: () => void log.push('sent'),
          persistResult: () => void log.push('result'),
          persistUncertain: () => void log.push('uncertain'),
          forget: () => void log.push('forget'),
        },
      });
      const actor = createActor(m, { input: { accountId: 'a', clientOrderId: 'x', paramsHash: 'h', phase: 'sent', expiresAt: Date.now() + 60_000 } });
      actor.start();
      expect(actor.getSnapshot().value).toBe('recovering');
      actor.send(recoveredOutcome(found, inProcess));
      const s = actor.getSnapshot();
      actor.stop();
      if (found) {
        expect(s.value).toBe('result');
        expect(JSON.parse(s.context.result!.json)).toMatchObject({ ticket });
        expect(log).toEqual(['result']);
      } else if (inProcess) {
        expect(s.value).toBe('discarded');
        expect(log).toEqual(['forget']);
      } else {
        expect(s.value).toBe('uncertain');
        expect(log).toEqual(['uncertain']);
      }
    }));
  });
});
