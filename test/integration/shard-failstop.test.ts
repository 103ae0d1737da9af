// Fail-stop through the real gateway (src/store/simFailStop.ts): a commit of the embedded simulator's
// store fails inside a shard (here a trigger refusing one order's idempotency row, as a full disk
// would refuse the write), so the simulator's memory holds a booking the disk does not. The shard
// logs it, ends, and its supervisor restarts it from SQLite: an order in flight meanwhile gets 503
// with retry-after (a trade is never re-sent), then orders work again and every clientOrderId is
// booked once, the failed one included.
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { mgmt, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { until } from '../helpers/until.js';

let t: TestGateway;
const logs: Array<{ level: string; msg: string; err?: string }> = [];
beforeAll(async () => {
  const log = createLogger('warn', {}, (line) => logs.push(JSON.parse(line) as { level: string; msg: string }));
  t = await startTestGateway({ shards: 1 }, { log });
  key = (await t.req('POST', '/v1/keys', { headers: mgmt(t.managementKey), body: { label: 'failstop' } })).body.key as string;
});
afterAll(async () => {
  await t?.stop();
});

let key: string;
const h = () => ({ 'x-api-key': key });
/** A bound account (classic ConnectEx), its id. */
async function account(login: string): Promise<string> {
  const r = await t.req('POST', '/ConnectEx', { headers: h(), body: { user: login, password: 'secret-pw', server: 'Sim-P5-Demo' } });
  expect(r.status, r.text).toBe(200);
  return r.body.id as string;
}
const order = (id: string, clientOrderId: string) => t.req('GET', `/OrderSend?id=${id}&symbol=BTCUSD&operation=Buy&volume=0.01&clientOrderId=${clientOrderId}`, { headers: h() });
/** The order's answer once the account is back after the restart (503 until then). */
async function settled(id: string, clientOrderId: string) {
  let r = await order(id, clientOrderId);
  await until(async () => r.status !== 503 || ((r = await order(id, clientOrderId)), false), `${clientOrderId} answered`);
  return r;
}
const positions = async (id: string) => (await t.req('GET', `/OpenedOrdersTickets?id=${id}`, { headers: h() })).body as number[];

describe('a failed commit in a shard', () => {
  it('ends the shard, which restarts from disk: in-flight orders get 503 with retry-after, then every id is booked once', async () => {
    const a = await account('failstop-1');
    const b = await account('failstop-2');
    const ok = await order(a, 'ok-0');
    expect(ok.status, ok.text).toBe(200);

    // b's order is held at the simulator (its claim committed first): in flight when the shard ends.
    expect((await t.req('POST', `/v1/accounts/${b}/faults`, { headers: mgmt(t.managementKey), body: { kind: 'latency', latencyMs: 2_000 } })).status).toBe(201);
    const reader = new Database(join(t.dataDir, 'tagw.sqlite'), { readonly: true, fileMustExist: true });
    const phase = (id: string) => (reader.prepare('SELECT phase FROM idempotency WHERE client_order_id = ?').get(id) as { phase: string } | undefined)?.phase;
    const held = order(b, 'held-1');
    await until(() => phase('held-1') === 'sent', 'the held order claimed');

    // Every connection sees this trigger: the commit of fail-me's claim and booking fails.
    const writer = new Database(join(t.dataDir, 'tagw.sqlite'));
    writer.pragma('busy_timeout = 5000');
    writer.exec("CREATE TRIGGER test_fail BEFORE INSERT ON idempotency WHEN NEW.client_order_id = 'fail-me' BEGIN SELECT RAISE(ABORT, 'disk I/O error (test)'); END");
    const restarts = t.gw.services.shards.restarts();
    const failed = await order(a, 'fail-me');
    writer.exec('DROP TRIGGER test_fail');
    writer.close();
    // Its own answer (TERMINAL_ERROR, nothing on disk) or the restart's 503.
    expect([500, 503]).toContain(failed.status);
    const inFlight = await held;
    expect([inFlight.status, inFlight.headers.get('retry-after')]).toEqual([503, '1']);
    await until(() => t.gw.services.shards.restarts() === restarts + 1 && t.gw.services.shards.allReady(), 'the shard restarted');

    // Back from disk: each id once, the failed one and the one in flight booked by their retries.
    expect((await settled(a, 'fail-me')).status).toBe(200);
    expect((await settled(b, 'held-1')).status).toBe(200);
    const replay = await settled(a, 'ok-0');
    expect(replay.text).toBe(ok.text);
    expect((await order(a, 'fail-me')).status).toBe(200);
    expect((await positions(a)).length).toBe(2);
    expect((await positions(b)).length).toBe(1);
    expect((await order(a, 'after-1')).status).toBe(200);
    expect((await positions(a)).length).toBe(3);
    expect(phase('fail-me')).toBe('result');
    reader.close();

    // One supervisor line for the restart, naming the failure, no secret in it.
    const died = logs.filter((l) => l.msg === 'shard died; restarting');
    expect(died).toHaveLength(1);
    expect(died[0]!.err).toContain('simulator store failed a commit');
    expect(JSON.stringify(logs)).not.toContain('secret-pw');
  });
});
