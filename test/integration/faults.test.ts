import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCustomer } from '../../src/auth/bootstrap.js';
import { mgmt, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { startBridgeSim } from '../helpers/sim-helpers.js';
import { until } from '../helpers/until.js';

let t: TestGateway;
let key: string;
let account: string;
const api = (path: string) => t.req('GET', path, { headers: { 'x-api-key': key } });

beforeAll(async () => {
  // A request for an account whose connection is down answers after 0.3 s, not the default 2 s
  // (BROKER_WAIT_MS): the outage cases poll while it is down. Two shards: a server-wide fault
  // reaches each shard's simulator.
  t = await startTestGateway({ brokerWaitMs: 300, shards: 2 });
  key = (await t.req('POST', '/v1/keys', { headers: mgmt(t.managementKey), body: { label: 'k' } })).body.key;
  account = (await t.req('POST', '/ConnectEx', { headers: { 'x-api-key': key }, body: { user: 'faulty', password: 'pw', server: 'Sim-P5-Demo' } })).body.id;
});
afterAll(async () => {
  await t.stop();
});

describe('simulator fault injection over HTTP', () => {
  it('an account fault rejects the next trade with the broker reason, then trading resumes', async () => {
    const f = await t.req('POST', `/v1/accounts/${account}/faults`, { headers: mgmt(t.managementKey), body: { kind: 'reject', count: 1 } });
    expect(f.status).toBe(201);
    const rejected = await api(`/OrderSend?id=${account}&symbol=BTCUSD&operation=Buy&volume=0.01`);
    expect(rejected.status).toBe(400);
    expect(rejected.body.error).toBe('TRADE_REQUEST_ERROR');
    const ok = await api(`/OrderSend?id=${account}&symbol=BTCUSD&operation=Buy&volume=0.01`);
    expect(ok.status).toBe(200);
  });

  it('validates fault bodies', async () => {
    const h = { headers: mgmt(t.managementKey) };
    expect((await t.req('POST', `/v1/accounts/${account}/faults`, { ...h, body: { kind: 'drop' } })).status).toBe(400);
    expect((await t.req('POST', `/v1/accounts/${account}/faults`, { ...h, body: { kind: 'explode', durationMs: 5 } })).status).toBe(400);
    expect((await t.req('POST', `/v1/accounts/${account}/faults`, { ...h, body: { kind: 'reject' } })).status).toBe(400);
    // unknownAfterSend: which trades (count or probability) and how long the broker cannot be asked.
    const bad = async (body: object, says: RegExp) => {
      const r = await t.req('POST', `/v1/accounts/${account}/faults`, { ...h, body });
      expect(r.status, JSON.stringify(r.body)).toBe(400);
      expect(r.body).toMatchObject({ error: 'BAD_REQUEST' });
      expect(r.body.message).toMatch(says);
    };
    await bad({ kind: 'unknownAfterSend', lookupFailMs: 1000 }, /needs 'count' or 'probability'/);
    await bad({ kind: 'unknownAfterSend', count: 1 }, /lookupFailMs.*required/);
    await bad({ kind: 'unknownAfterSend', count: 1, lookupFailMs: 0 }, /lookupFailMs/);
    await bad({ kind: 'reject', count: 1, lookupFailMs: 1000 }, /lookupFailMs.*only for unknownAfterSend/);
    // A field of another kind would be ignored: refused, naming the fields the kind takes.
    await bad({ kind: 'reject', count: 1, latencyMs: 50 }, /'latencyMs': not for reject \(reject takes count, probability, durationMs\)/);
    await bad({ kind: 'drop', durationMs: 100, count: 2 }, /'count': not for drop/);
    await bad({ kind: 'latency', latencyMs: 10, probability: 0.5 }, /'probability': not for latency/);
    await bad({ kind: 'timeoutAfterSend', count: 1, probability: 0.5 }, /'count' or 'probability', not both/);
    await bad({ kind: 'unknownAfterSend', count: 1, lookupFailMs: '1000' }, /lookupFailMs/);
  });

  it('a server-wide drop takes the connection down, and it comes back', async () => {
    // A summary read while connected is what /AccountSummary answers (synced:false) during the outage.
    expect((await api(`/AccountSummary?id=${account}`)).body.synced).toBe(true);
    // The outage is held until this test has seen it, then cleared: with a 1 s drop, whether the
    // polls below saw it before it ended was up to how fast a loaded machine answered them.
    const f = await t.req('POST', '/v1/sim/faults', { headers: mgmt(t.managementKey), body: { server: 'Sim-P5-Demo', kind: 'drop', durationMs: 60_000 } });
    expect(f.status).toBe(201);
    expect(f.body.shards).toBe(2);
    const listed = await t.req('GET', '/v1/sim/faults', { headers: mgmt(t.managementKey) });
    expect(listed.body.faults.filter((x: { kind: string }) => x.kind === 'drop')).toHaveLength(2);
    await until(async () => {
      const s = await api(`/AccountSummary?id=${account}`);
      return s.status === 503 || s.body?.synced === false;
    }, 'the account to answer as down');
    // Operators see it in /metrics: accounts per connection phase.
    const phases = async () => {
      const text = (await t.req('GET', '/metrics')).text;
      return Object.fromEntries([...text.matchAll(/^tagw_broker_connections\{phase="(\w+)"\} (\d+)$/gm)].map((m) => [m[1]!, Number(m[2])]));
    };
    let during = await phases();
    await until(async () => (during = await phases()).reconnecting! > 0, 'an account reconnecting in /metrics');
    expect(during).toMatchObject({ reconnecting: expect.any(Number), connecting: expect.any(Number), refused: 0 });
    const cleared = await t.req('DELETE', '/v1/sim/faults?server=Sim-P5-Demo', { headers: mgmt(t.managementKey) });
    expect(cleared.status).toBe(200);
    expect((await t.req('GET', '/v1/sim/faults', { headers: mgmt(t.managementKey) })).body.faults).toEqual([]);
    await until(async () => {
      const s = await api(`/AccountSummary?id=${account}`);
      return s.status === 200 && s.body.synced === true;
    }, 'the account to be back (synced)');
    let after = await phases();
    await until(async () => (after = await phases()).reconnecting === 0, 'no account reconnecting in /metrics');
    expect(after.connected).toBeGreaterThan(0);
  });

  it("after a re-bind to another login, an outage never answers the previous login's summary as last-known values", async () => {
    const id = (await t.req('POST', '/ConnectEx', { headers: { 'x-api-key': key }, body: { user: 'lastknown-1', password: 'pw', server: 'Sim-P5-Demo' } })).body.id;
    expect((await api(`/OrderSend?id=${id}&symbol=BTCUSD&operation=Buy&volume=0.05`)).status).toBe(200);
    const before = await api(`/AccountSummary?id=${id}`);
    expect(before.body.margin).toBeGreaterThan(0);
    const rebind = await t.req('POST', '/ConnectEx', { headers: { 'x-api-key': key }, body: { id, user: 'lastknown-2', password: 'pw', server: 'Sim-P5-Demo' } });
    expect(rebind.status).toBe(200);
    // Held until seen (a 2 s drop could end before a loaded machine's polls saw it), then cleared.
    expect((await t.req('POST', `/v1/accounts/${id}/faults`, { headers: mgmt(t.managementKey), body: { kind: 'drop', durationMs: 60_000 } })).status).toBe(201);
    let down: Awaited<ReturnType<typeof api>> | undefined;
    await until(async () => {
      const s = await api(`/AccountSummary?id=${id}`);
      if (s.status === 503 || s.body?.synced === false) down = s;
      return down !== undefined;
    }, 'the account to answer as down');
    expect((await t.req('DELETE', '/v1/sim/faults?server=Sim-P5-Demo', { headers: mgmt(t.managementKey) })).status).toBe(200);
    // The new login has no position: the old login's margin must not be shown for it.
    if (down!.status === 200) expect(down!.body.margin).toBe(0);
    else expect(down!.body.error).toBe('NOT_CONNECTED');
  });

  it('a mute is set per account and per server with durationMs; without one, or a negative one, 400 JSON', async () => {
    const h = { headers: mgmt(t.managementKey) };
    const one = await t.req('POST', `/v1/accounts/${account}/faults`, { ...h, body: { kind: 'mute', durationMs: 60_000 } });
    expect(one.status).toBe(201);
    expect(one.body).toMatchObject({ accountId: account, kind: 'mute' });
    const all = await t.req('POST', '/v1/sim/faults', { ...h, body: { server: 'Sim-P5-Demo', login: 'faulty', kind: 'mute', durationMs: 60_000 } });
    expect(all.status).toBe(201);
    expect(all.body).toMatchObject({ server: 'Sim-P5-Demo', kind: 'mute', shards: 2 });
    const mutes = (await t.req('GET', '/v1/sim/faults', h)).body.faults.filter((x: { kind: string }) => x.kind === 'mute');
    // The account's on its shard, the server-wide one on each of the two.
    expect(mutes).toHaveLength(3);
    expect(mutes.every((x: { login: string; durationMs: number }) => x.login === 'faulty' && x.durationMs === 60_000)).toBe(true);
    // Muted, the connection is up: requests answer from the broker.
    expect((await api(`/AccountSummary?id=${account}`)).body.synced).toBe(true);
    for (const [path, body] of [
      [`/v1/accounts/${account}/faults`, { kind: 'mute' }],
      [`/v1/accounts/${account}/faults`, { kind: 'mute', durationMs: -5 }],
      ['/v1/sim/faults', { server: 'Sim-P5-Demo', kind: 'mute' }],
      ['/v1/sim/faults', { server: 'Sim-P5-Demo', kind: 'mute', durationMs: -5 }],
    ] as const) {
      const r = await t.req('POST', path, { ...h, body });
      expect(r.status).toBe(400);
      expect(r.headers.get('content-type')).toContain('application/json');
      expect(r.body.error).toBe('BAD_REQUEST');
      expect(r.body.message).toContain('durationMs');
    }
    expect((await t.req('DELETE', '/v1/sim/faults?server=Sim-P5-Demo', h)).body.cleared).toBe(3);
  });

  it('server-wide faults are for the operator only; another customer cannot touch this account', async () => {
    const other = createCustomer(t.gw.services.tenancy, 'tenant-b');
    const r = await t.req('POST', '/v1/sim/faults', { headers: mgmt(other.managementKey), body: { server: 'Sim-P5-Demo', kind: 'latency', latencyMs: 5 } });
    expect(r.status).toBe(403);
    expect((await t.req('GET', '/v1/sim/faults', { headers: mgmt(other.managementKey) })).status).toBe(403);
    const a = await t.req('POST', `/v1/accounts/${account}/faults`, { headers: mgmt(other.managementKey), body: { kind: 'reject', count: 1 } });
    expect(a.status).toBe(404);
  });
});

describe("an account's own faults: listed and cleared by its customer, not only the operator", () => {
  it('the management key that set them, or an API key that may trade (read-only: list only); server-wide faults stay the operator\'s', async () => {
    // A bot developer (not the operator) sets faults on its own account and must be able to end them.
    const dev = createCustomer(t.gw.services.tenancy, 'bot-dev');
    const devMgmt = { headers: mgmt(dev.managementKey) };
    const acct = (await t.req('POST', '/v1/broker-accounts', { ...devMgmt, body: { platform: 'P5', user: 'dev-own-faults', password: 'pw', server: 'Sim-P5-Demo' } })).body.id as string;
    const keyOf = async (readOnly: boolean) => (await t.req('POST', `/v1/seats/${acct}/keys`, { ...devMgmt, body: { label: 'dev', readOnly } })).body.key as string;
    const [full, ro] = [await keyOf(false), await keyOf(true)];
    const reject = (await t.req('POST', `/v1/accounts/${acct}/faults`, { ...devMgmt, body: { kind: 'reject', count: 5 } })).body.id as number;
    const slow = (await t.req('POST', `/v1/accounts/${acct}/faults`, { ...devMgmt, body: { kind: 'latency', latencyMs: 1 } })).body.id as number;
    const operatorWide = await t.req('POST', '/v1/sim/faults', { headers: mgmt(t.managementKey), body: { server: 'Sim-P5-Demo', kind: 'latency', latencyMs: 1 } });
    expect(operatorWide.status).toBe(201);

    const path = `/v1/accounts/${acct}/faults`;
    for (const h of [devMgmt, { headers: { 'x-api-key': full } }, { headers: { 'x-api-key': ro } }]) {
      const listed = await t.req('GET', path, h);
      expect(listed.status, listed.text).toBe(200);
      // The account's own faults only: the operator's server-wide one is not the customer's to see or end.
      expect(listed.body.faults.map((f: { id: number; kind: string }) => [f.id, f.kind])).toEqual([[reject, 'reject'], [slow, 'latency']]);
      expect(listed.body.faults[0]).toMatchObject({ count: 5, remaining: 5 });
      expect(listed.text).not.toContain('dev-own-faults');
    }
    const refused = await t.req('DELETE', path, { headers: { 'x-api-key': ro } });
    expect([refused.status, refused.body.error]).toEqual([403, 'READ_ONLY_KEY']);
    // The operator's management key is another customer's here: the account is not found.
    expect((await t.req('GET', path, { headers: mgmt(t.managementKey) })).status).toBe(404);
    expect((await t.req('DELETE', path, { headers: mgmt(t.managementKey) })).status).toBe(404);

    expect((await t.req('DELETE', `${path}?faultId=${slow}`, { headers: { 'x-api-key': full } })).body).toEqual({ cleared: 1 });
    expect((await t.req('GET', path, devMgmt)).body.faults.map((f: { id: number }) => f.id)).toEqual([reject]);
    expect((await t.req('DELETE', `${path}?faultId=${slow}`, devMgmt)).body).toEqual({ cleared: 0 });
    expect((await t.req('DELETE', path, devMgmt)).body).toEqual({ cleared: 1 });
    // A management key's clears are audited (both of them, the one that found nothing too); an API key's, as on /ConnectEx, not.
    const audit = (await t.req('GET', '/v1/audit', devMgmt)).body.entries as Array<{ action: string; target: string }>;
    expect(audit.filter((e) => e.action === 'account.fault.clear').map((e) => e.target)).toEqual([acct, acct]);
    // Cleared for real: the next order is not rejected.
    const order = await t.req('GET', `/OrderSend?id=${acct}&symbol=BTCUSD&operation=Buy&volume=0.01`, { headers: { 'x-api-key': full } });
    expect(order.status, order.text).toBe(200);
    // The operator's server-wide fault is still there (one per shard), for the operator to clear.
    const wide = (await t.req('GET', '/v1/sim/faults', { headers: mgmt(t.managementKey) })).body.faults.filter((f: { login?: string }) => f.login === undefined);
    expect(wide).toHaveLength(2);
    expect((await t.req('DELETE', '/v1/sim/faults?server=Sim-P5-Demo', { headers: mgmt(t.managementKey) })).body.cleared).toBe(2);
  });
});

describe('an account whose broker connection drops', () => {
  // `npm run chaos -- single` (seed 998552822, a drop on a login under trading bots): two orders
  // answered 503 NOT_CONNECTED without retry-after, where every other 503 carries it (SPEC §7: 503
  // is "not connected yet, or resuming", a client sends it again).
  it('answers each 503 with retry-after: an order in flight when it drops, orders and reads while it is down', async () => {
    const id = (await t.req('POST', '/ConnectEx', { headers: { 'x-api-key': key }, body: { user: 'retry-after-1', password: 'pw', server: 'Sim-P5-Demo' } })).body.id as string;
    const order = (n: string) => api(`/OrderSend?id=${id}&symbol=BTCUSD&operation=Buy&volume=0.01&clientOrderId=ra-${n}`);
    expect((await order('0')).status).toBe(200);
    const h = { headers: mgmt(t.managementKey) };
    // An order held at the simulator, then the connection dropped under it.
    expect((await t.req('POST', `/v1/accounts/${id}/faults`, { ...h, body: { kind: 'latency', latencyMs: 1_000 } })).status).toBe(201);
    const inFlight = order('1');
    await new Promise((r) => setTimeout(r, 200));
    expect((await t.req('POST', `/v1/accounts/${id}/faults`, { ...h, body: { kind: 'drop', durationMs: 60_000 } })).status).toBe(201);
    const answers = [await inFlight];
    let n = 2;
    await until(async () => {
      answers.push(await order(String(n++)), await api(`/OrderSend?id=${id}&symbol=BTCUSD&operation=Buy&volume=0.01`), await api(`/OpenedOrders?id=${id}`));
      return answers.filter((a) => a.status === 503).length >= 4;
    }, 'answers while the connection is down');
    expect((await t.req('DELETE', `/v1/accounts/${id}/faults`, h)).status).toBe(200);
    expect(answers[0]!.status, answers[0]!.text).toBe(503);
    const unavailable = answers.filter((a) => a.status === 503);
    expect(unavailable.map((a) => ({ error: a.body.error, retryAfter: a.headers.get('retry-after') })))
      .toStrictEqual(unavailable.map((a) => ({ error: a.body.error, retryAfter: '1' })));
  });
});

describe('simulator fault routes in bridge mode', () => {
  it('answer 400 for every method: the faults live in the simulator process, an empty list would be wrong', async () => {
    // A standalone simulator takes its faults from its servers file; the gateway cannot list or clear them.
    const bs = await startBridgeSim();
    const g = await startTestGateway({ brokerMode: 'bridge', bridgeUrl: bs.url });
    try {
      const h = { headers: mgmt(g.managementKey) };
      const post = await g.req('POST', '/v1/sim/faults', { ...h, body: { server: 'Sim-P5-Demo', kind: 'latency', latencyMs: 5 } });
      expect(post.status).toBe(400);
      const list = await g.req('GET', '/v1/sim/faults', h);
      expect(list.status).toBe(400);
      expect(list.body.message).toContain('embedded simulator');
      // Where they are set instead (before: only 'fault injection needs the embedded simulator').
      expect(post.body.message).toMatch(/BROKER_MODE=bridge.*servers file.*"faults".*npm run sim -- --config/);
      expect((await g.req('DELETE', '/v1/sim/faults', h)).status).toBe(400);
    } finally {
      await g.stop();
      await bs.close();
    }
  }, 30_000);
});
