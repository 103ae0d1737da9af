// Gaps of cluster mode closed after it was wired: binding broker logins through two nodes at once,
// which node answered on a WebSocket 101 and the dashboard, a failed start's cleanup, and a
// follower node's stream across its own shard restart and a rebound, a resume replayed from
// JetStream to a slow reader. Real nats-server, embedded PostgreSQL, a simulator server over
// loopback TCP, two in-process gateways in bridge mode.
import type { Socket } from 'node:net';
import { randomBytes } from 'node:crypto';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { generateKey, hashSecret } from '../../src/auth/keys.js';
import { HISTORY_STREAM, historySubject } from '../../src/cluster/jsHistory.js';
import type { Deal } from '../../src/market/orders.js';
import { STREAM_EVENT } from '../../src/runtime/hosts/streamCommands.js';
import { SUBJECTS } from '../../src/cluster/subjects.js';
import { useClusterEngines } from '../helpers/cluster.js';
import { EMPTY_START_SETTLE_MS } from '../helpers/engines.js';
import { allowShardUp, keepShardDown, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { openWs, type WsClient } from '../helpers/gateway-helpers.js';
import { mustOpen, type StreamClient } from '../helpers/stream-helpers.js';
import { orderSend } from '../helpers/trading.js';
import { until } from '../helpers/until.js';
import { SOCKET_CLOSE } from '../../src/stream/closeCodes.js';

const engines = useClusterEngines();
const secretKey = randomBytes(32).toString('hex');
const apiKey = generateKey('api');
const otherKey = generateKey('api');
const mgmtKey = generateKey('management');
const nodes: TestGateway[] = [];
/** Small socket limits, so a replay of a few thousand frames is many socket buffers. */
const HARD_LIMIT = 256 * 1024;

beforeAll(async () => {
  const t = engines.tenancy;
  const now = Date.now();
  for (const [customer, key] of [['c1', apiKey], ['c2', otherKey]] as const) {
    await t.createCustomer(customer, customer, now);
    await t.insertKey({ id: key.id, customer_id: customer, kind: 'api', hash: hashSecret(key.secret), label: 'bot', read_only: 0, account_scoped: 0, seat_id: null, created_at: now });
  }
  await t.insertKey({ id: mgmtKey.id, customer_id: 'c1', kind: 'management', hash: hashSecret(mgmtKey.secret), label: 'ops', read_only: 0, account_scoped: 0, seat_id: null, created_at: now });
  for (const nodeId of ['bind-a', 'bind-b']) {
    nodes.push(await startTestGateway({
      brokerMode: 'bridge', bridgeUrl: engines.sim.url, shards: 2, secretKey,
      natsUrl: engines.nats.url, databaseUrl: engines.databaseUrl, nodeId, clusterLeaseMs: 6_000, clusterSettleMs: EMPTY_START_SETTLE_MS, clusterOwnerWaitMs: 5_000,
      streamSoftLimitBytes: 16 * 1024, streamHardLimitBytes: HARD_LIMIT,
    }, { downableShards: true }));
  }
}, 60_000);
afterAll(async () => {
  for (const n of nodes) await n.stop().catch(() => undefined);
});

/** A new account bound through the first node, the node that owns it, and the other one. */
async function boundAccount(login: string, server = 'Sim-P5-Demo') {
  const bound = await nodes[0]!.req('POST', '/ConnectEx', { headers: { 'x-api-key': apiKey.value }, body: { user: login, password: 'pw', server } });
  const id = bound.body.id as string;
  await until(() => nodes.some((n) => n.gw.cluster!.owned().includes(id)), 'an owner for the account');
  const owner = nodes.find((n) => n.gw.cluster!.owned().includes(id))!;
  return { id, owner, follower: nodes.find((n) => n !== owner)! };
}

/** The follower's stream hub's state of an account (internal: its opens, its hold, its role). */
const hubAccount = (n: TestGateway, id: string) => (n.gw.stream as unknown as {
  accounts: { accounts: Map<string, { opens: number; retainTimer: unknown; shared?: unknown }> };
}).accounts.accounts.get(id);

const liveBindings = async (login: string) => (await engines.pool.query<{ seat_id: string }>(
  'SELECT b.seat_id FROM account_bindings b JOIN seats s ON s.id = b.seat_id WHERE s.removed_at IS NULL AND b.login = $1', [login])).rows.map((r) => r.seat_id);

describe('cluster: one account per broker login, across nodes', () => {
  it('the same login bound through two nodes at the same moment makes one account, and both answer it', async () => {
    const [a, b] = nodes as [TestGateway, TestGateway];
    const body = { user: 'twice', password: 'pw', server: 'Sim-P5-Demo' };
    const [x, y] = await Promise.all([a, b].map((n) => n.req('POST', '/ConnectEx', { headers: { 'x-api-key': apiKey.value }, body })));
    expect([x!.status, y!.status]).toEqual([200, 200]);
    expect(x!.body.id).toBe(y!.body.id);
    expect(await liveBindings('twice')).toEqual([x!.body.id]);
    // Exactly what one node answers for a login already bound: the same account again, 409 to another customer.
    expect((await b.req('POST', '/ConnectEx', { headers: { 'x-api-key': apiKey.value }, body })).body.id).toBe(x!.body.id);
    const other = await a.req('POST', '/ConnectEx', { headers: { 'x-api-key': otherKey.value }, body });
    expect(other.status).toBe(409);
    expect(other.body.error).toBe('BROKER_LOGIN_IN_USE');
  }, 60_000);

  it('two customers binding one login through two nodes at once: one account, the other customer 409', async () => {
    const [a, b] = nodes as [TestGateway, TestGateway];
    const body = { user: 'contested', password: 'pw', server: 'Sim-P5-Demo' };
    const answers = await Promise.all([[a, apiKey], [b, otherKey]].map(([n, k]) => (n as TestGateway).req('POST', '/ConnectEx', { headers: { 'x-api-key': (k as typeof apiKey).value }, body })));
    expect(answers.map((r) => r.status).sort()).toEqual([200, 409]);
    expect(answers.find((r) => r.status === 409)!.body.error).toBe('BROKER_LOGIN_IN_USE');
    expect(await liveBindings('contested')).toEqual([answers.find((r) => r.status === 200)!.body.id]);
  }, 60_000);
});

describe('cluster: x-tagw-node beyond the routes', () => {
  it('is on a successful WebSocket upgrade (101) and on the dashboard\'s files', async () => {
    const a = nodes[0]!;
    const bound = await a.req('POST', '/ConnectEx', { headers: { 'x-api-key': apiKey.value }, body: { user: 'ws-node', password: 'pw', server: 'Sim-P5-Demo' } });
    expect(bound.status).toBe(200);
    const upgraded = async (path: string) => {
      const ws = new WebSocket(`${a.url.replace('http', 'ws')}${path}`, { headers: { 'x-api-key': apiKey.value } });
      try {
        return await new Promise<{ status: number | undefined; node: unknown }>((resolve, reject) => {
          ws.once('upgrade', (res) => resolve({ status: res.statusCode, node: res.headers['x-tagw-node'] }));
          ws.once('unexpected-response', (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode ?? '?'}`)));
          ws.once('error', reject);
        });
      } finally {
        ws.close();
      }
    };
    expect(await upgraded(`/v1/stream?id=${bound.body.id as string}`)).toEqual({ status: 101, node: 'bind-a' });
    // A gateway session's /ws on the node that did not make it (it looks the handle up elsewhere).
    const conn = await nodes[1]!.req('POST', '/v1/connect', { headers: { 'x-api-key': apiKey.value }, body: { brokerAccountId: bound.body.id } });
    expect(conn.status).toBe(200);
    expect(await upgraded(`/ws?handle=${conn.body.handle as string}`)).toEqual({ status: 101, node: 'bind-a' });
    for (const path of ['/dashboard', '/dashboard/nope.js']) {
      expect((await a.req('GET', path)).headers.get('x-tagw-node')).toBe('bind-a');
    }
  }, 60_000);
});

describe('cluster: a start that fails after the cluster side opened', () => {
  it('closes its PostgreSQL pools and its NATS connection', async () => {
    const taken = nodes[0]!.gw.port; // listen fails: after the mirror, NATS and the first lease round
    await expect(startTestGateway({
      brokerMode: 'bridge', bridgeUrl: engines.sim.url, shards: 1, secretKey, port: taken,
      natsUrl: engines.nats.url, databaseUrl: engines.databaseUrl, nodeId: 'bind-fail', clusterLeaseMs: 6_000, clusterOwnerWaitMs: 5_000,
    })).rejects.toThrow(/cannot listen/);
    await until(async () => (await engines.pool.query("SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE 'tagw bind-fail%'")).rowCount === 0, 'the failed node\'s PostgreSQL connections to close');
    const nc = await connect({ servers: engines.nats.url });
    try {
      // Nothing answers the failed node's calls: its connection (and subscription) is gone.
      await expect(nc.request(SUBJECTS.nodeCall('bind-fail'), '{}', { timeout: 2_000 })).rejects.toThrow(/no responders/i);
    } finally {
      await nc.close();
    }
    expect((await engines.pool.query("SELECT 1 FROM cluster_nodes WHERE node_id = 'bind-fail'")).rowCount).toBe(0);
  }, 60_000);
});

describe('cluster: a follower node\'s own shard restart, and a rebound relayed to it', () => {
  const sockets: StreamClient[] = [];
  const pushes: WsClient[] = [];
  afterAll(async () => {
    await Promise.all(sockets.map((c) => c.close()));
    for (const w of pushes) w.ws.terminate();
  });
  /** A new account, its owner, and a socket on the other node (which follows it) past its snapshot. */
  async function followed(login: string) {
    const { id, owner, follower } = await boundAccount(login);
    const c = await mustOpen(follower.url, { id, apiKey: apiKey.value, heartbeat: '0' });
    sockets.push(c);
    const before = await c.next('ORDERS', 0, 15_000);
    return { id, owner, follower, c, before };
  }

  /** A gateway session of the account with BTCUSD quotes, and its /ws socket on `node`, past a quote. */
  async function pushed(id: string, node: TestGateway): Promise<WsClient & { handle: string }> {
    const made = await node.req('POST', '/v1/connect', { headers: { 'x-api-key': apiKey.value }, body: { brokerAccountId: id } });
    expect(made.status).toBe(200);
    const ws = await openWs(node, made.body.handle as string, apiKey.value);
    pushes.push(ws);
    const sub = await node.req('GET', `/v1/proxy/Subscribe?handle=${encodeURIComponent(made.body.handle as string)}&symbol=BTCUSD&interval=0`, { headers: { 'x-api-key': apiKey.value } });
    expect(sub.status).toBe(200);
    await ws.waitFor((f) => f.type === 'QUOTE', 15_000);
    return { ...ws, handle: made.body.handle as string };
  }

  it('a restart of the follower\'s shard does not end the sockets of an account it only follows (/v1/stream and /ws), nor start an epoch there', async () => {
    const { id, owner, follower, c, before } = await followed('followed');
    // The session's pushes come from the owner's shard: the follower's shard of the same number is not theirs.
    const ws = await pushed(id, follower);
    const shards = follower.gw.services.shards;
    const thread = shards.threadId(shards.shardFor(id));
    await shards.kill(shards.shardFor(id));
    // Its new thread is there (the hub acted on the death: nothing of it touches an account run by the owner).
    await until(() => { const t = shards.threadId(shards.shardFor(id)); return t !== undefined && t !== thread; }, 'the follower\'s shard to restart');
    // An order through the owner: its TRADE reaches the follower's socket in the same epoch.
    const sent = await orderSend(owner.url, apiKey.value, id, 'after-restart');
    expect(sent.status).toBe(200);
    const trade = await c.next('TRADE', 0, 15_000);
    expect(trade.epoch).toBe(before.epoch);
    expect(c.closed).toBeNull();
    const quotes = ws.frames.length;
    await ws.waitFor((f) => ws.frames.indexOf(f) >= quotes && f.type === 'QUOTE', 15_000);
    expect(ws.ws.readyState).toBe(ws.ws.OPEN);
  }, 60_000);

  it('the owner\'s shard dies: the /ws socket of the account\'s session on the owner is closed with 4011 at once', async () => {
    const { id, owner } = await followed('owner-death');
    const ws = await pushed(id, owner);
    const shards = owner.gw.services.shards;
    await shards.kill(shards.shardFor(id));
    expect(await ws.closed).toEqual({ code: SOCKET_CLOSE.RUNTIME_RESTARTED.code, reason: SOCKET_CLOSE.RUNTIME_RESTARTED.reason });
    await until(() => shards.allReady(), 'the owner\'s shard to be up again');
  }, 60_000);

  it('the owner\'s shard dies: the /ws socket of the session on a follower node is closed with 4011 too, and the same handle attached again gets pushes from the new thread', async () => {
    const { id, owner, follower } = await followed('owner-death-follower-ws');
    const ws = await pushed(id, follower);
    const shards = owner.gw.services.shards;
    await shards.kill(shards.shardFor(id));
    expect(await ws.closed).toEqual({ code: SOCKET_CLOSE.RUNTIME_RESTARTED.code, reason: SOCKET_CLOSE.RUNTIME_RESTARTED.reason });
    await until(() => shards.allReady(), 'the owner\'s shard to be up again');
    const again = await openWs(follower, ws.handle, apiKey.value);
    pushes.push(again);
    await again.waitFor((f) => f.type === 'QUOTE', 15_000);
  }, 60_000);

  it('the owner\'s shard dies before the account had an event: the follower\'s socket streams on from the new thread (same epoch), and the owner\'s ledger counts the follower\'s opens and closes there', async () => {
    const { id, owner, follower, c, before } = await followed('owner-death-follower');
    const router = owner.gw.cluster!.router;
    const at = follower.gw.cluster!.nodeId;
    expect(router.interest.holding(at, id)?.opens).toBe(1);
    const shards = owner.gw.services.shards;
    const thread = shards.threadId(shards.shardFor(id));
    await shards.kill(shards.shardFor(id));
    await until(() => { const t = shards.threadId(shards.shardFor(id)); return t !== undefined && t !== thread && shards.allReady(); }, 'the owner\'s shard to restart');
    // An order through the owner's new thread: its TRADE reaches the follower's socket, in the same
    // epoch (the owner held no stream state of the account: nothing to begin again), no close.
    expect(await orderSend(owner.url, apiKey.value, id, 'after-owner-death')).toMatchObject({ status: 200 });
    expect((await c.next('TRADE', 0, 15_000)).epoch).toBe(before.epoch);
    // The owner's ledger holds the follower's one open (the new thread's), not the dead thread's too.
    await until(() => router.interest.holding(at, id)?.opens === 1, 'the owner\'s ledger to hold the follower\'s open once');
    // A second socket on the follower opens and closes: its close takes its own open, not c's.
    const again = await mustOpen(follower.url, { id, apiKey: apiKey.value, heartbeat: '0' });
    await again.next('ORDERS', 0, 15_000);
    await until(() => router.interest.holding(at, id)?.opens === 2, 'the second socket\'s open at the owner');
    await again.close();
    await until(() => router.interest.holding(at, id)?.opens === 1, 'the second socket\'s close at the owner');
    const trades = c.frames.filter((f) => f.type === 'TRADE').length;
    expect(await orderSend(owner.url, apiKey.value, id, 'after-owner-death-2')).toMatchObject({ status: 200 });
    await c.until((x) => x.frames.filter((f) => f.type === 'TRADE').length > trades, 15_000, 'the second order\'s TRADE on the follower\'s socket');
    expect(c.closed).toBeNull();
  }, 60_000);

  it('the owner\'s shard dies with a socket of the account on the owner too: that socket closes 4011 and resumes there (recovered:true), the follower\'s streams on in the same epoch', async () => {
    const { id, owner, c, before } = await followed('owner-death-both');
    const onOwner = await mustOpen(owner.url, { id, apiKey: apiKey.value, heartbeat: '0' });
    sockets.push(onOwner);
    const cursor = await onOwner.next('ORDERS', 0, 15_000);
    const shards = owner.gw.services.shards;
    await shards.kill(shards.shardFor(id));
    await onOwner.until((x) => x.closed, 15_000, 'the owner\'s socket to close');
    expect(onOwner.closed!.code).toBe(SOCKET_CLOSE.RUNTIME_RESTARTED.code);
    await until(() => shards.allReady(), 'the owner\'s shard to be up again');
    // The history is JetStream's, every frame sent stored there: nothing of it went with the thread.
    const resumed = await mustOpen(owner.url, { id, apiKey: apiKey.value, heartbeat: '0', since: `${cursor.epoch}:${cursor.seq}` });
    sockets.push(resumed);
    expect((await resumed.next('RESUMED', 0, 15_000)).data).toMatchObject({ recovered: true });
    expect(await orderSend(owner.url, apiKey.value, id, 'after-owner-death-both')).toMatchObject({ status: 200 });
    for (const x of [c, resumed]) expect((await x.next('TRADE', 0, 15_000)).epoch).toBe(before.epoch);
    expect(c.closed).toBeNull();
    expect(resumed.closed).toBeNull();
    expect(new Set(c.frames.filter((f) => f.epoch).map((f) => f.epoch))).toEqual(new Set([before.epoch]));
  }, 60_000);

  it('the owner\'s shard dies while it numbers the account with no socket of its own (a TRADE numbered before): the follower\'s socket streams on in the same epoch', async () => {
    const { id, owner, c, before } = await followed('owner-death-numbered');
    expect(await orderSend(owner.url, apiKey.value, id, 'before-owner-death')).toMatchObject({ status: 200 });
    const first = await c.next('TRADE', 0, 15_000);
    expect(first.epoch).toBe(before.epoch);
    const shards = owner.gw.services.shards;
    const thread = shards.threadId(shards.shardFor(id));
    await shards.kill(shards.shardFor(id));
    await until(() => { const t = shards.threadId(shards.shardFor(id)); return t !== undefined && t !== thread && shards.allReady(); }, 'the owner\'s shard to restart');
    expect(await orderSend(owner.url, apiKey.value, id, 'after-owner-death-numbered')).toMatchObject({ status: 200 });
    await c.until((x) => x.frames.filter((f) => f.type === 'TRADE').length >= 2 || x.closed !== null, 15_000, 'the second TRADE (or a close) on the follower\'s socket');
    expect(c.closed).toBeNull();
    const trades = c.frames.filter((f) => f.type === 'TRADE');
    expect(trades[1]!.epoch).toBe(before.epoch);
    // The owner's resync with the broker inside the stream (what the dead thread had in flight), then the TRADE.
    const resync = c.frames.find((f) => f.type === 'POSITIONS' && f.data.snapshot === true && f.seq > first.seq);
    expect(resync?.epoch).toBe(before.epoch);
    expect(trades[1]!.seq).toBeGreaterThan(resync!.seq);
  }, 60_000);

  it('the owner\'s shard dies while its hub holds the account\'s stream for resume (its last socket closed): the owner\'s relay subscription to the account goes with that open', async () => {
    const { id, owner } = await followed('owner-death-held');
    const onOwner = await mustOpen(owner.url, { id, apiKey: apiKey.value, heartbeat: '0' });
    await onOwner.next('ORDERS', 0, 15_000);
    const open = owner.gw.stream.stats().sockets;
    await onOwner.close();
    await until(() => owner.gw.stream.stats().sockets < open, 'the owner to see the socket close (its stream held)');
    const relay = owner.gw.cluster!.relay;
    expect(relay.following().has(SUBJECTS.accountAll(id))).toBe(true);
    const shards = owner.gw.services.shards;
    const thread = shards.threadId(shards.shardFor(id));
    await shards.kill(shards.shardFor(id));
    await until(() => { const t = shards.threadId(shards.shardFor(id)); return t !== undefined && t !== thread && shards.allReady(); }, 'the owner\'s shard to restart');
    expect(relay.following().has(SUBJECTS.accountAll(id))).toBe(false);
  }, 60_000);

  it('the follower\'s own shard dies while it holds an account owned elsewhere whose role it has not taken (a socket gone before its open was answered): the hold stays, counted on both nodes', async () => {
    // P4: a server no socket of the follower streamed yet, so its upgrade waits for the seat check
    // (on the follower's own shard) and the stream.open at the owner.
    const { id, owner, follower } = await boundAccount('unroled-hold', 'Sim-P4-Demo');
    const held = () => hubAccount(follower, id);
    // A socket on the owner: the account's stream is open at its shard, and quiet (no order), so the
    // follower's open starts no event there (one relayed would make the follower take its role).
    const onOwner = await mustOpen(owner.url, { id, apiKey: apiKey.value, heartbeat: '0' });
    sockets.push(onOwner);
    onOwner.send({ action: 'subscribe', symbol: 'BTCUSD' });
    await onOwner.next('QUOTE', 0, 15_000);
    // The follower's shard of the account kept down: the socket's seat check waits there, and the
    // client goes away meanwhile.
    const shards = follower.gw.services.shards;
    const shard = shards.shardFor(id);
    keepShardDown(follower, shard);
    await shards.kill(shard);
    const calls = vi.spyOn(shards, 'call');
    try {
      const ws = new WebSocket(`${follower.url.replace('http', 'ws')}/v1/stream?id=${id}&heartbeat=0`, { headers: { 'x-api-key': apiKey.value } });
      ws.on('error', () => undefined);
      await until(() => calls.mock.calls.some(([key, op]) => key === id && op === 'seat.get'), 'the socket\'s seat check to wait at the follower\'s shard');
      ws.terminate();
    } finally {
      calls.mockRestore();
    }
    expect((await follower.req('GET', '/metrics')).status).toBe(200); // the follower read the client's going first
    allowShardUp(follower, shard);
    // Its open answered: held for resume (the client gone), and no role taken (nothing started it).
    const router = owner.gw.cluster!.router;
    const at = follower.gw.cluster!.nodeId;
    await until(() => held()?.retainTimer != null, 'the follower to hold the account\'s stream', 30_000);
    expect(held()?.opens).toBe(1);
    expect(held()?.shared).toBeUndefined();
    expect(router.interest.holding(at, id)?.opens).toBe(1);
    // The follower's shard of the account dies again: the account runs on the owner, its open is there.
    const thread = shards.threadId(shard);
    await shards.kill(shard);
    await until(() => { const t = shards.threadId(shard); return t !== undefined && t !== thread && shards.allReady(); }, 'the follower\'s shard to restart');
    expect(held()?.opens).toBe(1);
    expect(follower.gw.cluster!.relay.following().has(SUBJECTS.accountAll(id))).toBe(true);
    // A socket there takes the hold's place: the owner counts its open, and the hold's close (before,
    // the hold's open stayed there for good: two).
    const c = await mustOpen(follower.url, { id, apiKey: apiKey.value, heartbeat: '0' });
    sockets.push(c);
    c.send({ action: 'subscribe', symbol: 'BTCUSD' });
    await c.next('QUOTE', 0, 15_000);
    await until(() => router.interest.holding(at, id)?.opens === 1, 'the owner to count the follower\'s one open');
    expect(held()?.opens).toBe(1);
  }, 90_000);

  it('a rebound relayed to a follower ends its sockets once (4012): a socket opened after it streams the owner\'s new epoch, not a local one', async () => {
    // The owner has no socket of the account: it must still begin the new epoch (in JetStream) for the follower's.
    const { id, owner, follower, c, before } = await followed('rebound-1');
    const rebound = await owner.req('POST', `/ConnectEx?id=${id}`, { headers: { 'x-api-key': apiKey.value }, body: { user: 'rebound-2', password: 'pw', server: 'Sim-P5-Demo' } });
    expect(rebound.status).toBe(200);
    await c.until((x) => x.closed, 15_000, 'the follower\'s socket to close');
    expect(c.closed!.code).toBe(SOCKET_CLOSE.ACCOUNT_REBOUND.code);
    // At once, before the owner sends anything: the follower's stream is the owner's, never one of its own
    // (whose sockets the owner's next frame would end with 4014).
    const again = await mustOpen(follower.url, { id, apiKey: apiKey.value, heartbeat: '0' });
    sockets.push(again);
    await again.next('ORDERS', 0, 15_000);
    expect(await orderSend(owner.url, apiKey.value, id, 'after-rebound')).toMatchObject({ status: 200 });
    await again.next('TRADE', 0, 15_000);
    const ownerSock = await mustOpen(owner.url, { id, apiKey: apiKey.value, heartbeat: '0' });
    sockets.push(ownerSock);
    const ownerEpoch = (await ownerSock.next('ORDERS', 0, 15_000)).epoch;
    expect(new Set(again.frames.map((f) => f.epoch))).toEqual(new Set([ownerEpoch]));
    expect(ownerEpoch).not.toBe(before.epoch); // another login's positions and deals: another epoch
    expect(again.closed).toBeNull();
    // A client of the old login's stream cannot resume into the new one, on either node.
    for (const n of [follower, owner]) {
      const old = await mustOpen(n.url, { id, apiKey: apiKey.value, heartbeat: '0', since: `${before.epoch}:${before.seq}` });
      sockets.push(old);
      expect((await old.next('RESUMED', 0, 15_000)).data).toMatchObject({ recovered: false });
    }
  }, 60_000);

  it('a rebound with sockets on the owner and on a follower: both close once with 4012, and sockets opened after it stream one new epoch on both nodes', async () => {
    const { id, owner, follower, c, before } = await followed('rebound-3');
    const onOwner = await mustOpen(owner.url, { id, apiKey: apiKey.value, heartbeat: '0' });
    sockets.push(onOwner);
    expect((await onOwner.next('ORDERS', 0, 15_000)).epoch).toBe(before.epoch);
    const rebound = await follower.req('POST', `/ConnectEx?id=${id}`, { headers: { 'x-api-key': apiKey.value }, body: { user: 'rebound-4', password: 'pw', server: 'Sim-P5-Demo' } });
    expect(rebound.status).toBe(200);
    for (const x of [c, onOwner]) {
      await x.until((y) => y.closed, 15_000, 'the socket to close');
      expect(x.closed!.code).toBe(SOCKET_CLOSE.ACCOUNT_REBOUND.code);
    }
    const after = await Promise.all([follower, owner].map(async (n) => {
      const x = await mustOpen(n.url, { id, apiKey: apiKey.value, heartbeat: '0' });
      sockets.push(x);
      await x.next('ORDERS', 0, 15_000);
      return x;
    }));
    expect(await orderSend(follower.url, apiKey.value, id, 'after-rebound-3')).toMatchObject({ status: 200 });
    await Promise.all(after.map((x) => x.next('TRADE', 0, 15_000)));
    const epochs = after.map((x) => new Set(x.frames.filter((f) => f.epoch).map((f) => f.epoch)));
    expect(epochs[0]!.size).toBe(1);
    expect(epochs[1]).toEqual(epochs[0]);
    expect([...epochs[0]!][0]).not.toBe(before.epoch);
    expect(after.map((x) => x.closed)).toEqual([null, null]);
  }, 60_000);
});

describe('cluster: binding changes made in the owner\'s shard reach PostgreSQL', () => {
  const binding = async (id: string) => (await engines.pool.query<{ platform: string; build: number | null }>('SELECT platform, build FROM account_bindings WHERE seat_id = $1', [id])).rows[0];

  it('the platform its broker server reports at the bind, and the build /Upgrade sets, through a node that does not own the account', async () => {
    // No platform given: the row starts as P5 and the owner's shard learns P4 from the server.
    const bound = await nodes[1]!.req('POST', '/ConnectEx', { headers: { 'x-api-key': apiKey.value }, body: { user: 'p4-login', password: 'pw', server: 'Sim-P4-Demo' } });
    expect(bound.status).toBe(200);
    const id = bound.body.id as string;
    expect(await binding(id)).toEqual({ platform: 'P4', build: null });
    const owner = nodes.find((n) => n.gw.cluster!.owned().includes(id))!;
    const other = nodes.find((n) => n !== owner)!;
    const up = await other.req('POST', `/v1/accounts/${id}/upgrade`, { headers: { authorization: `Bearer ${mgmtKey.value}` }, body: { build: 2_000 } });
    expect(up.status).toBe(200);
    expect(await binding(id)).toEqual({ platform: 'P4', build: 2_000 });
    // Every node's mirror has it: a new owner starts the account with them.
    await until(() => nodes.every((n) => n.gw.services.db.prepare<[string], { build: number | null }>('SELECT build FROM account_bindings WHERE seat_id = ?').get(id)?.build === 2_000), 'the build in every node\'s mirror');
  }, 60_000);
});

const pad = 'x'.repeat(1_000);
const deal = (ticket: number): Deal => ({
  ticket, order: ticket, position: ticket, symbol: 'BTCUSD', type: 'Buy', entry: 'in', volume: 0.01, price: 60_000,
  timeMsc: Date.now(), magic: 1, comment: pad, commission: 0, swap: 0, profit: 0,
});

describe('cluster: a resume replayed from JetStream to a slow reader', () => {
  const socketOf = (c: StreamClient) => (c.ws as unknown as { _socket: Socket })._socket;
  const buffered = async (n: TestGateway) => Number(/^tagw_stream_buffered_bytes (\d+)$/m.exec((await n.req('GET', '/metrics')).text)?.[1]);

  it('is sent as the socket drains (its buffer stays under the hard limit), every missed frame once, in order, then live', async () => {
    const { id, owner, follower: other } = await boundAccount('paced');
    const q = { id, apiKey: apiKey.value, heartbeat: '0' };
    const first = await mustOpen(owner.url, q);
    const cursor = await first.next('ORDERS', 0, 15_000);
    await first.close();
    // ~8 MB of TRADEs numbered by the owner and stored in JetStream while the client is away (the
    // socket limit is 256 KiB); the other node never held them: its resume is replayed from JetStream.
    const n = 6_000;
    for (let i = 0; i < n; i++) owner.gw.stream.onShardEvent({ kind: STREAM_EVENT.deal, key: id, data: { deal: deal(5_000_000 + i) } });
    const nc = await connect({ servers: engines.nats.url });
    try {
      const jsm = await jetstreamManager(nc);
      const head = async () => Number((await jsm.direct.getMessage(HISTORY_STREAM, { last_by_subj: historySubject(id) }))?.header.get('Tagw-Seq'));
      await until(async () => (await head()) >= cursor.seq + n, 'the owner to store every TRADE in JetStream', 30_000);
    } finally {
      await nc.close();
    }

    const c = await mustOpen(other.url, { ...q, since: `${cursor.epoch}:${cursor.seq}` });
    sockets.push(c);
    socketOf(c).pause();
    // While the client reads nothing: what the server buffers for it stays bounded.
    let most = 0;
    await until(async () => (most = Math.max(most, await buffered(other))) > 0, 'the replay to start', 15_000);
    for (let i = 0; i < 40; i++) {
      most = Math.max(most, await buffered(other));
      await new Promise((r) => setTimeout(r, 10));
    }
    socketOf(c).resume();
    await c.until((x) => x.of('TRADE').length >= n, 30_000, 'every missed TRADE');
    expect(c.frames[0]).toMatchObject({ type: 'RESUMED', data: { recovered: true } });
    expect(c.of('TRADE').map((f) => f.data.ticket)).toEqual(Array.from({ length: n }, (_, i) => 5_000_000 + i));
    expect(c.of('TRADE').map((f) => f.seq)).toEqual(Array.from({ length: n }, (_, i) => cursor.seq + 1 + i));
    expect(most).toBeLessThanOrEqual(HARD_LIMIT + 2 * 1_024);
    // Then live: the owner's next frame.
    owner.gw.stream.onShardEvent({ kind: STREAM_EVENT.deal, key: id, data: { deal: deal(6_000_000) } });
    await c.until((x) => x.of('TRADE').length > n, 15_000, 'the live TRADE');
    expect(c.of('TRADE').at(-1)!.seq).toBe(cursor.seq + n + 1);
    expect(c.closed).toBeNull();
  }, 90_000);
  const sockets: StreamClient[] = [];
  afterAll(async () => {
    await Promise.all(sockets.map((c) => c.close()));
  });
});

describe('cluster: an owner whose lease is gone', () => {
  it('numbers no account event from that moment (not only at its next sweep): nothing of it reaches JetStream or another node', async () => {
    // A node whose stream sweep (where roles follow the lease) does not run during the test.
    const slow = await startTestGateway({
      brokerMode: 'bridge', bridgeUrl: engines.sim.url, shards: 1, secretKey,
      natsUrl: engines.nats.url, databaseUrl: engines.databaseUrl, nodeId: 'bind-slow', clusterLeaseMs: 6_000, clusterOwnerWaitMs: 5_000,
      streamSweepMs: 10_000, // the most allowed; the test needs a few ms between two sweeps
    });
    nodes.push(slow);
    // An account it owns (rendezvous decides: new logins until one lands there).
    let id = '';
    for (let i = 0; i < 20 && !id; i++) {
      const bound = await slow.req('POST', '/ConnectEx', { headers: { 'x-api-key': apiKey.value }, body: { user: `slow-${i}`, password: 'pw', server: 'Sim-P5-Demo' } });
      expect(bound.status).toBe(200);
      const a = bound.body.id as string;
      await until(() => nodes.some((n) => n.gw.cluster!.owned().includes(a)), 'an owner for the account');
      if (slow.gw.cluster!.owned().includes(a)) id = a;
    }
    expect(id).not.toBe('');
    const q = { id, apiKey: apiKey.value, heartbeat: '0' };
    const watcher = await mustOpen(nodes[0]!.url, q);
    const onOwner = await mustOpen(slow.url, q);
    await Promise.all([watcher, onOwner].map((c) => c.next('ORDERS', 0, 15_000)));
    expect(await orderSend(slow.url, apiKey.value, id, 'slow-1')).toMatchObject({ status: 200 });
    await Promise.all([watcher, onOwner].map((c) => c.next('TRADE', 0, 15_000)));
    const nc = await connect({ servers: engines.nats.url });
    try {
      const jsm = await jetstreamManager(nc);
      const head = async () => (await jsm.direct.getMessage(HISTORY_STREAM, { last_by_subj: historySubject(id) }))?.header.get('Tagw-Seq');
      await until(async () => (await head()) === String(watcher.frames.filter((f) => f.seq).at(-1)!.seq), 'JetStream at the watcher\'s seq');
      const before = await head();
      // Another node took the account over (what a takeover after a pause looks like from here).
      await engines.pool.query("UPDATE account_leases SET owner = 'node-elsewhere', epoch = epoch + 1, expires_at = now() + interval '1 hour' WHERE account_id = $1", [id]);
      await until(() => !slow.gw.cluster!.owned().includes(id), 'the owner to find its lease gone');
      const seen = watcher.frames.length;
      slow.gw.stream.onShardEvent({ kind: STREAM_EVENT.deal, key: id, data: { deal: { ...deal(7_000_000), comment: 'late' } } });
      await new Promise((r) => setTimeout(r, 300));
      expect(await head()).toBe(before);
      expect(watcher.frames.slice(seen).filter((f) => f.type === 'TRADE')).toEqual([]);
    } finally {
      await nc.close();
      await Promise.all([watcher, onOwner].map((c) => c.close()));
    }
  }, 90_000);
});
