// A login moves between shards: each shard thread runs its own simulator over the one SQLite file,
// and an account's login lives in its account's shard (by the random account id). A login that
// leaves one account (a re-bind to another login) and is bound by an account on another shard must
// be let go by the first shard before the second loads it: a trade still in flight on the old
// connection (a re-bind drains it first) was booked by the first shard's copy after the second
// loaded its own. The trade was answered 200 and was missing from the login's orders on its new
// account (ticket 100005 of [100002, 100005]), the two copies writing the login's journal apart.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AccountStore } from '../../src/store/accounts.js';
import { mgmt, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { until } from '../helpers/until.js';

const SERVER = 'Sim-P5-Demo';
let t: TestGateway;
let key: string;
beforeAll(async () => {
  t = await startTestGateway({ shards: 2 });
  key = (await t.req('POST', '/v1/keys', { headers: mgmt(t.managementKey), body: { label: 'moves' } })).body.key as string;
});
afterAll(async () => {
  await t?.stop();
});

const h = () => mgmt(t.managementKey);
const connect = (body: Record<string, unknown>) => t.req('POST', '/ConnectEx', { headers: h(), body: { password: 'pw', server: SERVER, ...body } });
const api = () => ({ 'x-api-key': key });
const order = (id: string, clientOrderId: string) => t.req('GET', `/OrderSend?id=${id}&symbol=BTCUSD&operation=Buy&volume=0.01&clientOrderId=${clientOrderId}`, { headers: api() });
const tickets = async (id: string) => ((await t.req('GET', `/OpenedOrdersTickets?id=${id}`, { headers: api() })).body as number[]).sort((x, y) => x - y);
/** A seat without a login, on `other`'s shard (`same`) or on another. */
async function seatBy(other: string, same: boolean): Promise<string> {
  const shards = t.gw.services.shards;
  for (;;) {
    const r = await t.req('POST', '/v1/seats', { headers: h(), body: {} });
    expect(r.status, r.text).toBe(201);
    const id = r.body.id as string;
    if ((shards.shardFor(id) === shards.shardFor(other)) === same) return id;
  }
}
const seatOnOtherShard = (other: string) => seatBy(other, false);
const seatOnSameShard = (other: string) => seatBy(other, true);

describe('a login re-bound away and bound on another shard', () => {
  it('the trade in flight on the old binding is in the new account, which trades on: no shard restarts', async () => {
    const a = (await connect({ user: 'moves-1' })).body.id as string;
    const b = await seatOnOtherShard(a);
    const first = await order(a, 'first');
    expect(first.status, first.text).toBe(200);
    // a's next order waits at the simulator: in flight while a is re-bound (the re-bind drains it).
    expect((await t.req('POST', `/v1/accounts/${a}/faults`, { headers: h(), body: { kind: 'latency', latencyMs: 1_500 } })).status).toBe(201);
    const restarts = t.gw.services.shards.restarts();
    const held = order(a, 'held');
    await new Promise((r) => setTimeout(r, 200));
    const rebind = connect({ id: a, user: 'moves-2' });
    // The binding row says moves-1 is free once a's shard wrote moves-2 (its drain still under way).
    const bindings = new AccountStore(t.gw.services.db);
    await until(() => bindings.boundTo(SERVER, 'moves-1') === undefined, 'moves-1 unbound');
    const bound = await connect({ id: b, user: 'moves-1' });
    expect(bound.status, bound.text).toBe(200);
    const heldReply = await held;
    expect(heldReply.status, heldReply.text).toBe(200);
    expect((await rebind).status).toBe(200);

    // b has the login's two trades, and trades on.
    const both = [first.body.ticket as number, heldReply.body.ticket as number].sort((x, y) => x - y);
    const after = await order(b, 'after');
    expect(after.status, after.text).toBe(200);
    expect(await tickets(b)).toEqual([...both, after.body.ticket as number].sort((x, y) => x - y));
    expect(t.gw.services.shards.restarts()).toBe(restarts);
  });

  it("a seat removed: its login bound again on another shard waits until the removed account's shard let it go", async () => {
    const a = (await connect({ user: 'moves-3' })).body.id as string;
    const b = await seatOnOtherShard(a);
    // The removal's last step, its shard letting the login go (account.remove), held back: until it
    // runs, that shard's copy of moves-3 still acts (its pending orders and stops fill on ticks).
    const shards = t.gw.services.shards;
    const call = shards.call.bind(shards);
    const seen: string[] = [];
    let letRemove!: () => void;
    const removeHeld = new Promise<void>((r) => (letRemove = r));
    shards.call = (async (key: string, op: string, args: unknown, opts?: unknown) => {
      if (op === 'account.remove' && key === a) {
        await removeHeld;
        const r = await call(key, op as never, args as never, opts as never);
        seen.push('removed');
        return r;
      }
      if (op === 'account.bind' && key === b) seen.push('bind');
      return call(key, op as never, args as never, opts as never);
    }) as typeof shards.call;
    try {
      const removed = t.req('DELETE', `/v1/seats/${a}`, { headers: h() });
      const bindings = new AccountStore(t.gw.services.db);
      await until(() => bindings.boundTo(SERVER, 'moves-3') === undefined, 'the seat removed');
      const bound = connect({ id: b, user: 'moves-3' });
      await new Promise((r) => setTimeout(r, 300));
      expect(seen).toEqual([]);
      letRemove();
      expect((await removed).status).toBe(200);
      expect((await bound).status).toBe(200);
      expect(seen).toEqual(['removed', 'bind']);
    } finally {
      letRemove();
      delete (shards as { call?: unknown }).call;
    }
  });
});

describe("an account's own faults when its login leaves it", () => {
  const faults = async (id: string) => ((await t.req('GET', `/v1/accounts/${id}/faults`, { headers: h() })).body.faults as unknown[]);
  const setFault = async (id: string) => expect((await t.req('POST', `/v1/accounts/${id}/faults`, { headers: h(), body: { kind: 'latency', latencyMs: 500 } })).status).toBe(201);

  it('end with it: the login bound again on the same shard, as on another, has none (its seat removed, or its account re-bound)', async () => {
    const a = (await connect({ user: 'moves-faults-1' })).body.id as string;
    await setFault(a);
    expect(await faults(a)).toHaveLength(1);
    expect((await t.req('DELETE', `/v1/seats/${a}`, { headers: h() })).status).toBe(200);
    const same = await seatOnSameShard(a);
    expect((await connect({ id: same, user: 'moves-faults-1' })).status).toBe(200);
    expect(await faults(same)).toEqual([]);

    const c = (await connect({ user: 'moves-faults-2' })).body.id as string;
    await setFault(c);
    expect((await connect({ id: c, user: 'moves-faults-3' })).status).toBe(200);
    expect(await faults(c)).toEqual([]);
    const again = await seatOnSameShard(c);
    expect((await connect({ id: again, user: 'moves-faults-2' })).status).toBe(200);
    expect(await faults(again)).toEqual([]);
    // The operator's fault on a login is in every shard, and stays there.
    expect((await t.req('POST', '/v1/sim/faults', { headers: h(), body: { server: SERVER, login: 'moves-faults-2', kind: 'latency', latencyMs: 20 } })).status).toBe(201);
    expect((await t.req('DELETE', `/v1/seats/${again}`, { headers: h() })).status).toBe(200);
    expect(((await t.req('GET', '/v1/sim/faults', { headers: h() })).body.faults as unknown[])).toHaveLength(2);
    expect((await t.req('DELETE', '/v1/sim/faults', { headers: h() })).status).toBe(200);
  });
});

describe("a login's tickets on the shards it moves between", () => {
  // Each shard's simulator issues ids from its own block of the shared store: on main, the login
  // bound back on the shard with the lower block was given tickets below those it had (bots that
  // poll deals by "ticket greater than the last I saw" never see them).
  it('only go up: bound by an account on another shard and back, each order and deal above every earlier one', async () => {
    const a = (await connect({ user: 'moves-tickets' })).body.id as string;
    const b = await seatOnOtherShard(a);
    let highest = 0;
    const trade = async (id: string, clientOrderId: string) => {
      const r = await order(id, clientOrderId);
      expect(r.status, r.text).toBe(200);
      const fresh = [r.body.ticket as number, ...(r.body.deals as { ticket: number }[]).map((d) => d.ticket)];
      for (const x of fresh) expect(x, `ticket ${x} after ${highest}`).toBeGreaterThan(highest);
      highest = Math.max(highest, ...fresh);
    };
    await trade(a, 'tickets-1');
    expect((await connect({ id: a, user: 'moves-tickets-away' })).status).toBe(200);
    expect((await connect({ id: b, user: 'moves-tickets' })).status).toBe(200);
    await trade(b, 'tickets-2');
    expect((await connect({ id: b, user: 'moves-tickets-away-2' })).status).toBe(200);
    expect((await connect({ id: a, user: 'moves-tickets' })).status).toBe(200);
    await trade(a, 'tickets-3');
  });
});
