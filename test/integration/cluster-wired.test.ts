// Gateways started with NATS_URL + DATABASE_URL are cluster nodes (src/cluster/clusterNode.ts wired
// by src/gateway.ts): real nats-server, embedded PostgreSQL, one simulator server over loopback
// TCP, two in-process gateways in bridge mode. Tenancy is seeded in PostgreSQL; each node mirrors it,
// takes its share of the leases, and runs only the accounts it holds.
import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateKey } from '../../src/auth/keys.js';
import { connect } from '@nats-io/transport-node';
import { targetOwners } from '../../src/cluster/rendezvous.js';
import { SUBJECTS } from '../../src/cluster/subjects.js';
import { handleHash } from '../../src/http/routes/gateway.js';
import { seedBoundAccount, useClusterEngines } from '../helpers/cluster.js';
import { startTcpProxy } from '../helpers/tcpProxy.js';
import { shardActors, startTestGateway, TEST_MANAGEMENT_KEY, type TestGateway } from '../helpers/gateway.js';
import { op, openWs } from '../helpers/gateway-helpers.js';
import { mustOpen } from '../helpers/stream-helpers.js';
import { openedTickets, orderSend } from '../helpers/trading.js';
import { until } from '../helpers/until.js';

const engines = useClusterEngines();
const secretKey = randomBytes(32);
const apiKey = generateKey('api');
const account = randomUUID();
const nodes: TestGateway[] = [];

// A lease long enough that three in-process gateways on a loaded machine renew in time: a lease
// that lapses moves the account mid-test (what that costs is the scenarios' subject). Handovers
// (SIGTERM) do not wait for it.
async function startNode(nodeId: string, databaseUrl = engines.databaseUrl): Promise<TestGateway> {
  const gw = await startTestGateway({
    brokerMode: 'bridge', bridgeUrl: engines.sim.url, shards: 2, secretKey: secretKey.toString('hex'),
    natsUrl: engines.nats.url, databaseUrl, nodeId, clusterLeaseMs: 6_000, clusterOwnerWaitMs: 5_000,
  });
  nodes.push(gw);
  return gw;
}

let followed = 0;
/** A new account (/ConnectEx through `follower`, once every node sees `follower` live, so the lease
 *  plan that places it is the one that stays) owned by another node than `follower`: a node joining
 *  to follow the file's account could instead be the plan's place for it (its id is random). */
async function accountFollowedFrom(follower: TestGateway): Promise<{ id: string; owner: TestGateway }> {
  const fid = follower.gw.cluster!.nodeId;
  await until(() => nodes.every((n) => n.gw.cluster!.liveNodes().some((l) => l.nodeId === fid)), 'every node to see the follower live');
  for (let i = 0; i < 8; i++) {
    const bound = await follower.req('POST', '/ConnectEx', { headers: { 'x-api-key': apiKey.value }, body: { user: `followed-${++followed}`, password: 'pw', server: 'Sim-P5-Demo' } });
    expect(bound.status).toBe(200);
    const id = bound.body.id as string;
    await until(() => nodes.some((n) => n.gw.cluster!.owned().includes(id)), 'a node to own the new account');
    const owner = nodes.find((n) => n.gw.cluster!.owned().includes(id))!;
    if (owner !== follower) return { id, owner };
  }
  throw new Error('eight new accounts in a row went to the following node');
}

/** Where the lease plan (targetOwners, as every node computes it) puts `account` once `lapsing` has
 *  been judged departed (its accounts taken by the others) and is back holding nothing, from what
 *  PostgreSQL says is bound and held now. */
async function placeAfterLapse(lapsing: TestGateway, account: string): Promise<string | undefined> {
  const lapsingId = lapsing.gw.cluster!.nodeId;
  // The nodes running, as the test started them; read from the lapsing node's view of the live ones,
  // a node whose heartbeat came late on a loaded machine was left out, and the plan then put every
  // account elsewhere than its owner (ci69: 'eight followed accounts in a row would move').
  const others = nodes.filter((n) => n !== lapsing).map((n) => n.gw.cluster!.nodeId);
  await until(() => others.every((o) => lapsing.gw.cluster!.liveNodes().some((l) => l.nodeId === o)), 'the lapsing node to see every other node live');
  const accounts = (await engines.pool.query<{ seat_id: string }>('SELECT b.seat_id FROM account_bindings b JOIN seats s ON s.id = b.seat_id WHERE s.removed_at IS NULL')).rows.map((r) => r.seat_id);
  const held = (await engines.pool.query<{ account_id: string; owner: string }>('SELECT account_id, owner FROM account_leases WHERE owner IS NOT NULL AND expires_at > now()')).rows;
  const during = targetOwners(others, accounts, new Map(held.filter((r) => r.owner !== lapsingId).map((r) => [r.account_id, r.owner])));
  return targetOwners([...others, lapsingId], accounts, during).get(account);
}

beforeAll(async () => {
  await seedBoundAccount(engines.tenancy, { apiKey, account, login: 'bot', secretKey });
}, 60_000);
afterAll(async () => {
  for (const n of nodes) await n.stop().catch(() => undefined);
});

describe('gateways as cluster nodes', () => {
  it('an order through a node that does not own the account is placed once, by the owner; only the owner runs the account; a SIGTERM hands it over', async () => {
    const a = await startNode('node-a');
    const b = await startNode('node-b');
    // Where the account stays once both nodes see each other (the lease plan's place for it). On a
    // loaded machine b may start after a's settle period: a then takes the account first and hands it
    // to b if b is its place, and an owner picked before that move would not be the owner for long.
    const placed = targetOwners(['node-a', 'node-b'], [account], new Map()).get(account);
    const [owner, other] = placed === 'node-a' ? [a, b] : [b, a];
    await until(() => [a, b].every((n) => n.gw.cluster!.liveNodes().length === 2) && owner.gw.cluster!.owned().includes(account) && !other.gw.cluster!.owned().includes(account),
      'the account\'s lease at its place (both nodes live)');
    // The owner started the account from its mirrored binding (a loaded machine may take a moment
    // to log in: a first order before that would be 503 NOT_CONNECTED, as on one node).
    await until(async () => (await owner.gw.services.shards.call(account, 'account.status', { accountId: account })).phase === 'connected', 'the owner to connect the account');
    // The other node runs nothing of it: it mirrored the binding and, if it held the account first
    // (started before the owner), stopped it when it handed the account over (its shards' release
    // follows the handover's start, which is when owned() stops listing the account).
    await until(async () => (await shardActors(other)) === 0, 'the other node\'s shards to run nothing');

    const first = await orderSend(other.url, apiKey.value, account, 'wired-1');
    expect(first).toMatchObject({ status: 200, replay: false });
    const again = await orderSend(other.url, apiKey.value, account, 'wired-1');
    expect(again).toMatchObject({ status: 200, replay: true, ticket: first.ticket });
    expect(await openedTickets(owner.url, apiKey.value, account)).toEqual([first.ticket]);
    expect(other.gw.cluster!.router.stats.forwarded).toBeGreaterThanOrEqual(2);
    expect(owner.gw.cluster!.router.stats.served).toBeGreaterThanOrEqual(2);
    // Its own shard refuses to start the account (a call on a stale owner must not open a second
    // broker connection): the other node still runs nothing.
    const local = other.gw.services.shards;
    await expect(local.callShard(local.shardFor(account), 'account.status', { accountId: account })).rejects.toMatchObject({ code: 'SERVICE_UNAVAILABLE' });
    expect(await shardActors(other)).toBe(0);
    // A gateway session made and subscribed through the owner only: the survivor never saw it.
    const made = await owner.req('POST', '/v1/connect', { headers: { 'x-api-key': apiKey.value }, body: { brokerAccountId: account } });
    expect(made.status).toBe(200);
    const session = { id: account, key: apiKey.value, handle: made.body.handle as string };
    expect((await op(owner, session, 'Subscribe', { symbol: 'BTCUSD' })).status).toBe(200);

    // SIGTERM's close: the owner hands the account over before it exits; the survivor runs it,
    // and the earlier order's retry replays there (the ledger is PostgreSQL's, not the node's).
    await owner.stop();
    nodes.splice(nodes.indexOf(owner), 1);
    await until(() => other.gw.cluster!.owned().includes(account), 'the survivor to take the account over');
    const replayed = await orderSend(other.url, apiKey.value, account, 'wired-1');
    expect(replayed).toMatchObject({ status: 200, replay: true, ticket: first.ticket });
    const second = await orderSend(other.url, apiKey.value, account, 'wired-2');
    expect(second.status).toBe(200);
    expect(await openedTickets(other.url, apiKey.value, account)).toEqual([first.ticket!, second.ticket!].sort((x, y) => x - y));
    expect(other.gw.cluster!.status().leases.acquired).toBeGreaterThanOrEqual(1);
    // The session moved with the account (PostgreSQL's copy restored into the survivor's SQLite
    // before its shard started the account): same handle, same subscription, pushes on /ws there.
    const subs = await op(other, session, 'SubscribedSymbols');
    expect(subs.status).toBe(200);
    expect(subs.body.symbols).toEqual(['BTCUSD']);
    const sock = await openWs(other, session.handle, apiKey.value);
    // Once, in CI, this socket was closed with 1006 before any frame: the pinned uWS build's fault
    // with upgrades completed from async code, which the cork anchor closes off (src/http/corkAnchor.ts,
    // test/integration/async-upgrade.test.ts). No reconnect here since.
    const quote = await sock.waitFor((f) => f.type === 'QUOTE' && f.data.symbol === 'BTCUSD', 15_000).catch(async (err: unknown) => {
      const status = await other.gw.services.shards.call(account, 'account.status', { accountId: account }).catch((e: unknown) => String(e));
      const again = await op(other, session, 'SubscribedSymbols').then((r) => r.body, (e: unknown) => String(e));
      throw new Error(`${(err as Error).message}; the account on the survivor: ${JSON.stringify(status)}; its session's symbols: ${JSON.stringify(again)}; socket closed: ${String(sock.ws.readyState)}`);
    });
    expect(quote.data).toHaveProperty('bid');
    sock.ws.close();
  }, 90_000);

  it('tenancy written through one node holds on the others at once: a new key, a new account (/ConnectEx) traded through another node; a revoked key is refused there and its socket closed', async () => {
    const x = nodes[0]!;
    const y = await startNode('node-c');
    const mk = { authorization: `Bearer ${TEST_MANAGEMENT_KEY}` };
    const created = await x.req('POST', '/v1/keys', { headers: mk, body: { label: 'k2' } });
    expect(created.status).toBe(201);
    const key = created.body.key as string;
    // No wait: x answered once y had mirrored the key.
    expect((await y.req('GET', '/v1/whoami', { headers: { 'x-api-key': key } })).status).toBe(200);

    // A new account through y: its binding is in PostgreSQL before a lease, its owner takes it at
    // once, and the bind runs there; then it trades through x.
    const bound = await y.req('POST', '/ConnectEx', { headers: { 'x-api-key': key }, body: { user: 'bot2', password: 'pw', server: 'Sim-P5-Demo' } });
    expect(bound.status).toBe(200);
    const id = bound.body.id as string;
    const sent = await orderSend(x.url, key, id, 'new-1');
    expect(sent.status).toBe(200);
    expect(await orderSend(y.url, key, id, 'new-1')).toMatchObject({ status: 200, replay: true, ticket: sent.ticket });
    const owners = [x, y].filter((n) => n.gw.cluster!.owned().includes(id));
    expect(owners).toHaveLength(1);

    // A gateway session made through the owner (its SQLite holds the row) is used through the
    // other node, which asks the cluster for the handle it does not know.
    const nonOwner = owners[0] === x ? y : x;
    const conn = await owners[0]!.req('POST', '/v1/connect', { headers: { 'x-api-key': key }, body: { brokerAccountId: id } });
    expect(conn.status).toBe(200);
    const viaOther = await nonOwner.req('GET', `/v1/proxy/AccountSummary?handle=${conn.body.handle as string}`, { headers: { 'x-api-key': key } });
    expect(viaOther.status).toBe(200);
    expect(viaOther.body).toHaveProperty('balance');
    // Its /ws socket on the other node receives the owner's pushes (followed over NATS by the
    // handle's hash); the subscription is made through that node too.
    const handle = conn.body.handle as string;
    const sock = await openWs(nonOwner, handle, key);
    expect((await op(nonOwner, { id, key, handle }, 'Subscribe', { symbol: 'BTCUSD' })).status).toBe(200);
    expect((await sock.waitFor((f) => f.type === 'QUOTE' && f.data.symbol === 'BTCUSD', 15_000)).data).toHaveProperty('bid');
    const subject = SUBJECTS.accountAll(handleHash(handle));
    expect(nonOwner.gw.cluster!.relay.following().get(subject)).toBe(1);
    sock.ws.close();
    await until(() => !nonOwner.gw.cluster!.relay.following().has(subject), 'the last socket of the handle closed: its events are no longer followed');

    // Which node answered, on every response; what each node shows of the cluster.
    expect(bound.headers.get('x-tagw-node')).toBe('node-c');
    expect((await x.req('GET', '/v1/nope')).headers.get('x-tagw-node')).toBe(x.gw.cluster!.nodeId);
    const owner = owners[0]!;
    const status = await owner.req('GET', '/v1/status', { headers: mk });
    expect(status.body.cluster).toMatchObject({ nodeId: owner.gw.cluster!.nodeId, natsUp: true, ownedHere: owner.gw.cluster!.owned().length });
    expect(status.body.cluster.nodes.filter((n: { live: boolean }) => n.live).map((n: { nodeId: string }) => n.nodeId).sort()).toEqual([x, y].map((n) => n.gw.cluster!.nodeId).sort());
    await until(async () => /^tagw_cluster_nodes_live 2$/m.test((await owner.req('GET', '/metrics')).text), 'both nodes live in /metrics');
    const metrics = (await owner.req('GET', '/metrics')).text;
    expect(metrics).toMatch(new RegExp(`^tagw_cluster_accounts_owned ${owner.gw.cluster!.owned().length}$`, 'm'));
    expect(metrics).toMatch(/^tagw_cluster_calls_total\{outcome="served"\} [1-9]/m);
    expect(metrics).toMatch(/^tagw_cluster_leases_total\{event="acquired"\} [1-9]/m);

    // A key's own limits set through x hold on y from its next request (before, y kept the limits
    // it had read until its LRU of 100,000 keys let the key go). Then the default again.
    const setLimits = (requestsPerSec: number | null) => x.req('PUT', `/v1/keys/${created.body.id as string}/limits`, { headers: mk, body: { requestsPerSec, ordersPerSec: null } });
    expect((await setLimits(0.01)).status).toBe(200);
    expect((await y.req('GET', '/v1/whoami', { headers: { 'x-api-key': key } })).status).toBe(200);
    const limited = await y.req('GET', '/v1/whoami', { headers: { 'x-api-key': key } });
    expect(limited.status).toBe(429);
    expect(limited.body).toMatchObject({ error: 'RATE_LIMITED', limit: 'requests', perSecond: 0.01 });
    expect((await setLimits(null)).status).toBe(200);
    for (const n of [x, y]) expect((await n.req('GET', '/v1/whoami', { headers: { 'x-api-key': key } })).status).toBe(200);

    const socket = await mustOpen(y.url, { apiKey: key, id });
    // Each node holds the key's rate-limit buckets (it served the key); the revocation drops them on
    // both at once (x: its route; y: the cluster's notice, applied before x answers), not when each
    // node's LRU of 100,000 keys gets to them.
    const keyId = created.body.id as string;
    expect([x, y].map((n) => n.gw.services.rateLimits.has(keyId))).toEqual([true, true]);
    const revoked = await x.req('DELETE', `/v1/keys/${keyId}`, { headers: mk });
    expect(revoked.status).toBe(200);
    expect([x, y].map((n) => n.gw.services.rateLimits.has(keyId))).toEqual([false, false]);
    expect((await y.req('GET', '/v1/whoami', { headers: { 'x-api-key': key } })).status).toBe(401);
    await until(() => socket.closed !== null, 'the revoked key\'s socket on the other node to close');
    expect(socket.closed!.code).toBe(4001);
  }, 90_000);

  it('an order at the broker when its owner hands the account over (SIGTERM) is answered, and replays on the new owner: the handover waits for it', async () => {
    const owner = nodes.find((n) => n.gw.cluster!.owned().includes(account))!;
    const other = nodes.find((n) => n !== owner)!;
    const local = owner.gw.services.shards;
    await until(async () => (await local.callShard(local.shardFor(account), 'account.status', { accountId: account }).catch(() => undefined))?.phase === 'connected', 'the owner to run the account');
    // A slow broker: the order is still out when the handover starts.
    const slow = engines.sim.sim.faults.set({ server: 'Sim-P5-Demo', login: 'bot', kind: 'latency', latencyMs: 1_500 });
    try {
      const pending = orderSend(other.url, apiKey.value, account, 'in-flight-1'); // forwarded: the owner's HTTP drain does not wait for it
      await until(async () => (await engines.pool.query("SELECT 1 FROM idempotency WHERE account_id = $1 AND client_order_id = 'in-flight-1'", [account])).rowCount === 1, 'the owner to claim the order');
      await owner.stop();
      nodes.splice(nodes.indexOf(owner), 1);
      // Before, the handover stopped the account's records at once: the order was cut off (500, its claim left 'sent', a retry 409).
      const sent = await pending;
      expect(sent).toMatchObject({ status: 200, replay: false });
      await until(() => other.gw.cluster!.owned().includes(account), 'the survivor to take the account over');
      expect(await orderSend(other.url, apiKey.value, account, 'in-flight-1')).toMatchObject({ status: 200, replay: true, ticket: sent.ticket });
    } finally {
      engines.sim.sim.faults.clear(slow.id);
    }
  }, 90_000);

  it('a node that dies (no handover, no close of its sockets\' streams) is released by the owner once its heartbeat expires: the owner\'s shard no longer holds its stream open or its symbols', async () => {
    if (nodes.length === 0) await startNode('node-e'); // run alone (-t): an owner for the account
    const dying = await startNode('node-dies');
    const { id: account, owner } = await accountFollowedFrom(dying);
    const interest = () => owner.gw.cluster!.router.interest.holding('node-dies', account);
    const socket = await mustOpen(dying.url, { id: account }, { 'x-api-key': apiKey.value });
    try {
      await socket.until((c) => c.of('ORDERS').find((f) => f.data.snapshot === true), 15_000, 'the ORDERS snapshot');
      socket.send({ action: 'subscribe', symbol: 'BTCUSD' });
      await socket.next('SUBSCRIBED', 0, 15_000);
      // The account stayed with its owner (the new node took nothing of it), which holds the dying node's open and symbol.
      expect(owner.gw.cluster!.owned()).toContain(account);
      expect(interest()?.opens).toBe(1);
      expect(interest()?.symbols.map(([s]) => s)).toEqual(['BTCUSD']);
      // A SIGKILL as the cluster sees it: no more heartbeats, its NATS connection gone, its sockets' closes never sent.
      await dying.gw.cluster!.close({ handover: false });
      // Its last heartbeat a lease old at once rather than after the 6 s lease: the owner reads the
      // heartbeat's age on PostgreSQL's clock, at its next look at the node list (every third of the lease).
      await engines.pool.query("UPDATE cluster_nodes SET heartbeat_at = now() - interval '1 hour' WHERE node_id = 'node-dies'");
      await until(() => interest() === undefined, 'the owner to release the dead node\'s stream after its heartbeat expired', 30_000);
      expect(owner.gw.cluster!.liveNodes().map((n) => n.nodeId)).not.toContain('node-dies');
    } finally {
      await socket.close();
      nodes.splice(nodes.indexOf(dying), 1);
      await dying.stop().catch(() => undefined);
    }
  }, 90_000);

  it('a node cut off from PostgreSQL alone past the lease, judged departed by the owner, opens its sockets\' streams there again when it is back: a later order reaches its socket', async () => {
    if (nodes.length === 0) await startNode('node-e'); // run alone (-t): an owner for the account
    const proxy = await startTcpProxy(engines.postgres.port);
    const u = new URL(engines.databaseUrl);
    u.port = String(proxy.port);
    const id = 'node-lapses';
    const lapsing = await startNode(id, u.toString());
    // A node that cannot reach PostgreSQL could not keep an account: the followed one is another's,
    // and one that stays with that owner when the node is back and takes its share again (the owner,
    // over its share then, hands over the accounts it scores lowest: half the time the followed one,
    // which then moved away from the node the test watches: with such an account chosen, 2 of 4 runs
    // at load 10 failed).
    let followedAccount: { id: string; owner: TestGateway } | undefined;
    for (let i = 0; i < 8 && !followedAccount; i++) {
      const f = await accountFollowedFrom(lapsing);
      if ((await placeAfterLapse(lapsing, f.id)) === f.owner.gw.cluster!.nodeId) followedAccount = f;
    }
    if (!followedAccount) throw new Error('eight followed accounts in a row would move when the cut-off node is back');
    const { id: account, owner } = followedAccount;
    const interest = () => owner.gw.cluster!.router.interest.holding(id, account);
    // The owner tells a node whose holds it released (tagw.node.<id>.released).
    const nc = await connect({ servers: engines.nats.url });
    let releasedBy: string | undefined;
    nc.subscribe(SUBJECTS.nodeReleased(id), { max: 1, callback: (_err, m) => { releasedBy = m.string(); } });
    await nc.flush();
    const socket = await mustOpen(lapsing.url, { id: account }, { 'x-api-key': apiKey.value });
    try {
      await socket.until((c) => c.of('ORDERS').find((f) => f.data.snapshot === true), 15_000, 'the ORDERS snapshot');
      await until(() => interest()?.opens === 1, 'the owner to hold the socket\'s stream open for the node');
      // PostgreSQL refuses the node (NATS stays): its heartbeats stop, the owner judges it departed.
      proxy.target(1);
      proxy.cut('reset');
      // Seen as the owner's notice, not as the owner's ledger without the node's holds: told over
      // NATS (its link is up), the node opens them there again at once, and a test polling for that
      // moment could miss it (seen once in 4 runs at load 10: 30 s without seeing it).
      await until(() => releasedBy !== undefined, 'the owner to release the cut-off node\'s stream after its heartbeat expired', 30_000);
      expect(releasedBy).toBe(owner.gw.cluster!.nodeId);
      proxy.target(engines.postgres.port);
      // Live again in the owner's node list first: until then a look at the list (every third of the
      // lease) can still read the lapsed heartbeat and release the node's holds once more, which it
      // then opens again (ci28, at load 9: the ledger empty for a moment right after the TRADE).
      await until(() => owner.gw.cluster!.liveNodes().some((n) => n.nodeId === id), 'the owner to see the node live again', 30_000);
      await until(() => interest()?.opens === 1, 'the node, back, to open its socket\'s stream at the owner again (once)', 30_000);
      const sent = await orderSend(owner.url, apiKey.value, account, 'after-lapse');
      expect(sent.status).toBe(200);
      await socket.until((c) => c.of('TRADE').find((f) => f.data.order === sent.ticket), 15_000, 'the TRADE of the order placed after the lapse');
      // Once, never twice (a second open would hold the stream past the socket's close).
      await until(() => interest()?.opens === 1, 'the node\'s hold at the owner: one open', 30_000);
      expect(interest()?.opens).toBe(1);
    } finally {
      await nc.close();
      await socket.close();
      nodes.splice(nodes.indexOf(lapsing), 1);
      await lapsing.stop().catch(() => undefined);
      await proxy.close();
    }
  }, 120_000);

  it('a lease lost (PostgreSQL gave the account to another owner) drops the account from its shard at once: no broker call for it from then on', async () => {
    const owner = nodes.find((n) => n.gw.cluster!.owned().includes(account))!;
    const local = owner.gw.services.shards;
    // Just acquired (a node that joined takes its share): started once the mirror pass is done.
    await until(async () => (await local.callShard(local.shardFor(account), 'account.status', { accountId: account }).catch(() => undefined))?.phase === 'connected', 'the owner to run the account');
    const { pool } = engines;
    // What a takeover after a pause looks like from the old owner: the row names another node at a newer epoch.
    await pool.query("UPDATE account_leases SET owner = 'node-elsewhere', epoch = epoch + 1, expires_at = now() + interval '1 hour' WHERE account_id = $1", [account]);
    await until(() => !owner.gw.cluster!.owned().includes(account), 'the owner to find its lease revoked');
    await expect(local.callShard(local.shardFor(account), 'account.status', { accountId: account })).rejects.toMatchObject({ code: 'SERVICE_UNAVAILABLE' });
    expect(owner.gw.cluster!.status().leases.lost).toBeGreaterThanOrEqual(1);
    // A trade through it is not sent: the router finds the account owned by a node that does not answer, waits, then 503.
    const r = await orderSend(owner.url, apiKey.value, account, 'after-loss');
    expect(r.status).toBe(503);
  }, 90_000);
});
