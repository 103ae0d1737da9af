// `GET /v1/status` (and so `tagw status` and the dashboard) of a cluster node: its shards' accounts
// are the accounts this node runs. Every node's SQLite mirrors all the cluster's seats; counting those
// showed each node running every account (two nodes, four accounts: 4 and 4).
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startClusterGateways, useClusterEngines } from '../helpers/cluster.js';
import { TEST_MANAGEMENT_KEY, type TestGateway } from '../helpers/gateway.js';
import { until } from '../helpers/until.js';
import { runBuiltCli } from '../helpers/build.js';

const engines = useClusterEngines();
let nodes: TestGateway[] = [];
/** One secret key for the nodes started at once and the one that joins later. */
const secretKey = randomBytes(32).toString('hex');
beforeAll(async () => {
  nodes = await startClusterGateways(engines, ['status-a', 'status-b'], { shards: 2, leaseMs: 6_000, perNode: () => ({ secretKey }) });
}, 60_000);
afterAll(async () => {
  await Promise.all(nodes.map((n) => n.stop()));
});

describe('a cluster node\'s status', () => {
  it('counts on its shards the accounts it holds, which add up over the nodes to the accounts there are', async () => {
    const mk = { authorization: `Bearer ${TEST_MANAGEMENT_KEY}` };
    const key = (await nodes[0]!.req('POST', '/v1/keys', { headers: mk, body: { label: 'status' } })).body.key as string;
    for (let i = 0; i < 4; i++) {
      const bound = await nodes[i % 2]!.req('POST', '/ConnectEx', { headers: { 'x-api-key': key }, body: { user: `status-${i}`, password: 'pw', server: 'Sim-P5-Demo' } });
      expect(bound.status).toBe(200);
    }
    const owned = () => nodes.map((n) => n.gw.cluster!.owned().length);
    await until(() => owned().reduce((a, b) => a + b, 0) === 4, 'the four accounts to be held');
    const running: number[] = [];
    for (const n of nodes) {
      const status = await n.req('GET', '/v1/status', { headers: mk });
      expect(status.status).toBe(200);
      expect(status.body.seats).toBe(4);
      running.push((status.body.shards as Array<{ accounts: number }>).reduce((a, s) => a + s.accounts, 0));
    }
    expect(running).toEqual(owned());
  }, 60_000);

  it("shows this node's leases and calls, as /metrics does, and counts an order forwarded to the owner on both nodes, on both nodes' status", async () => {
    const mk = { authorization: `Bearer ${TEST_MANAGEMENT_KEY}` };
    const key = (await nodes[0]!.req('POST', '/v1/keys', { headers: mk, body: { label: 'status-calls' } })).body.key as string;
    const bound = await nodes[0]!.req('POST', '/ConnectEx', { headers: { 'x-api-key': key }, body: { user: 'status-calls', password: 'pw', server: 'Sim-P5-Demo' } });
    expect(bound.status).toBe(200);
    const id = bound.body.id as string;
    await until(() => nodes.some((n) => n.gw.cluster!.owned().includes(id)), 'the account to be held');
    const ownerAt = nodes.findIndex((n) => n.gw.cluster!.owned().includes(id));
    const [owner, other] = [nodes[ownerAt]!, nodes[1 - ownerAt]!];
    const cluster = async (n: TestGateway) => (await n.req('GET', '/v1/status', { headers: mk })).body.cluster as {
      nodeId: string; leases: Record<string, number>; calls: Record<string, number>;
    };
    const [ownerBefore, otherBefore] = [await cluster(owner), await cluster(other)];
    for (const c of [ownerBefore, otherBefore]) {
      expect(Object.keys(c.leases).sort()).toEqual(['acquired', 'handedOver', 'lost', 'takeovers', 'takeoversExpired', 'takeoversHandover']);
      expect(Object.keys(c.calls).sort()).toEqual(['forwarded', 'ownerWaits', 'served', 'unavailable']);
    }
    expect(ownerBefore.leases.acquired).toBeGreaterThanOrEqual(1);

    const order = await other.req('GET', `/OrderSend?${new URLSearchParams({ id, symbol: 'BTCUSD', operation: 'Buy', volume: '0.01' })}`, { headers: { 'x-api-key': key } });
    expect(order.status, JSON.stringify(order.body)).toBe(200);
    const [ownerAfter, otherAfter] = [await cluster(owner), await cluster(other)];
    expect(otherAfter.calls.forwarded).toBeGreaterThan(otherBefore.calls.forwarded!);
    expect(ownerAfter.calls.served).toBeGreaterThan(ownerBefore.calls.served!);
    // The same numbers as /metrics exports.
    const metrics = await (await fetch(`${other.url}/metrics`, { headers: mk })).text();
    expect(metrics).toContain(`tagw_cluster_calls_total{outcome="forwarded"} ${otherAfter.calls.forwarded}`);

    // Every node's counters on either node's status, as each node's next heartbeat wrote them: the
    // forwarding node's and the owner's calls, as each reports its own.
    type Row = { nodeId: string; leases: Record<string, number> | null; calls: Record<string, number> | null };
    const rowOf = async (asked: TestGateway, of: TestGateway) =>
      ((await asked.req('GET', '/v1/status', { headers: mk })).body.cluster.nodes as Row[]).find((r) => r.nodeId === of.gw.cluster!.nodeId)!;
    await until(async () => ((await rowOf(owner, other)).calls?.forwarded ?? 0) >= otherAfter.calls.forwarded!, "the forwarding node's heartbeat with its call", 10_000);
    await until(async () => ((await rowOf(other, owner)).calls?.served ?? 0) >= ownerAfter.calls.served!, "the owner's heartbeat with the call it served", 10_000);
    const ownerRow = await rowOf(other, owner);
    expect(ownerRow.leases!.acquired).toBeGreaterThanOrEqual(1);
    expect(Object.keys(ownerRow.leases!).sort()).toEqual(['acquired', 'handedOver', 'lost', 'takeovers', 'takeoversExpired', 'takeoversHandover']);
  }, 60_000);

  it('`tagw status` against a node prints its leases and calls and a table of the nodes with their NATS link, this one marked', async () => {
    const node = nodes[1]!;
    const env: NodeJS.ProcessEnv = { ...process.env, TAGW_URL: node.url, GATEWAY_MANAGEMENT_KEY: TEST_MANAGEMENT_KEY, DATA_DIR: node.dataDir };
    for (const k of ['TAGW_CONFIG', 'NATS_URL', 'DATABASE_URL']) delete env[k];
    const run = await runBuiltCli(['status'], env);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/^node: +status-b \(owns \d+ accounts?\)$/m);
    // The seats are the cluster's, the accounts by state this node's: the line says so.
    expect(run.stdout).toMatch(/^accounts: +\d+ connecting, \d+ connected, \d+ reconnecting, \d+ refused \(on this node; the others on theirs\)$/m);
    expect(run.stdout).toMatch(/^leases: +\d+ acquired, \d+ handed over, \d+ lost; (0 takeovers|\d+ takeovers? \(\d+ expired, \d+ handed over\))$/m);
    expect(run.stdout).toMatch(/^calls: +\d+ forwarded, \d+ served for other nodes, \d+ unavailable, \d+ owner waits?$/m);
    const table = run.stdout.slice(run.stdout.indexOf('Nodes:\n'));
    expect(table).toMatch(/^NODE +STATE +NATS +ACCOUNTS +HEARTBEAT +TAKEOVERS +EXPIRED +LOST +FORWARDED +SERVED +UNAVAILABLE$/m);
    // Each node's counters as its last heartbeat wrote them (the test above forwarded and served calls).
    expect(table).toMatch(/^status-a +live +up +\d+ +\d+\.\ds ago +\d+ +\d+ +\d+ +\d+ +\d+ +\d+$/m);
    expect(table).toMatch(/^status-b \(this node\) +live +up +\d+ +\d+\.\ds ago +\d+ +\d+ +\d+ +\d+ +\d+ +\d+$/m);
    expect(run.stdout).not.toMatch(/^stepped down:/m);
  }, 60_000);

  it('counts by connection state only the accounts it runs: one handed over to a node that joined leaves its counts and its phase list', async () => {
    const mk = { authorization: `Bearer ${TEST_MANAGEMENT_KEY}` };
    const before = nodes.map((n) => n.gw.cluster!.owned());
    const [joined] = await startClusterGateways(engines, ['status-c'], { shards: 2, leaseMs: 6_000, perNode: () => ({ secretKey }) });
    nodes.push(joined!);
    await until(() => joined!.gw.cluster!.owned().length > 0, 'the joining node to take its share');
    const moved = before.flat().filter((id) => joined!.gw.cluster!.owned().includes(id));
    expect(moved.length).toBeGreaterThan(0);
    type Phases = Record<string, number>;
    const counted = async (n: TestGateway) => Object.values((await n.req('GET', '/v1/status', { headers: mk })).body.accounts as Phases).reduce((a, b) => a + b, 0);
    // Each node's accounts by state add up to the accounts it holds (a handed-over account stayed
    // `connected` in its former owner's counts: tagw status, the dashboard, tagw_broker_connections).
    for (const n of nodes) {
      await until(async () => (await counted(n)) === n.gw.cluster!.owned().length, `${n.gw.cluster!.nodeId}: accounts by state = accounts it holds`, 10_000);
    }
    for (const n of nodes.slice(0, 2)) {
      const list = (await n.req('GET', '/v1/accounts/connections', { headers: mk })).body.accounts as Array<{ id: string; phase: string | null }>;
      for (const id of moved.filter((m) => !n.gw.cluster!.owned().includes(m))) expect(list.find((a) => a.id === id)?.phase, id).toBeNull();
    }
    // Which node runs each account: the route says so, and `tagw accounts list` shows `on <node>`
    // where it said `unknown` (the phase is the owner's).
    const listA = (await nodes[0]!.req('GET', '/v1/accounts/connections', { headers: mk })).body.accounts as Array<{ id: string; owner?: string | null }>;
    for (const n of nodes) for (const id of n.gw.cluster!.owned()) expect(listA.find((a) => a.id === id)?.owner, id).toBe(n.gw.cluster!.nodeId);
    const env: NodeJS.ProcessEnv = { ...process.env, TAGW_URL: nodes[0]!.url, GATEWAY_MANAGEMENT_KEY: TEST_MANAGEMENT_KEY, DATA_DIR: nodes[0]!.dataDir };
    for (const k of ['TAGW_CONFIG', 'NATS_URL', 'DATABASE_URL']) delete env[k];
    const run = await runBuiltCli(['accounts', 'list'], env);
    expect(run.code, run.stderr).toBe(0);
    for (const id of joined!.gw.cluster!.owned()) expect(run.stdout).toMatch(new RegExp(`^${id} .* on status-c `, 'm'));
    expect(run.stdout).not.toMatch(/ unknown /);
    // `accounts show` of one: its node, and no `synced: no` that reads as a broken account.
    const other = joined!.gw.cluster!.owned()[0]!;
    const show = await runBuiltCli(['accounts', 'show', other], env);
    expect(show.code, show.stderr).toBe(0);
    expect(show.stdout, show.stdout).toMatch(/^node: +status-c$/m);
    expect(show.stdout, show.stdout).toMatch(/^synced: +ask status-c$/m);
    const metrics = await (await fetch(`${nodes[0]!.url}/metrics`)).text();
    const gauge = [...metrics.matchAll(/^tagw_broker_connections\{phase="[a-z]+"\} (\d+)$/gm)].reduce((a, m) => a + Number(m[1]), 0);
    expect(gauge).toBe(nodes[0]!.gw.cluster!.owned().length);
  }, 90_000);

  it('a deleted seat is no account without owner (its lease row, released, stayed counted: "1 account without owner" for good)', async () => {
    const mk = { authorization: `Bearer ${TEST_MANAGEMENT_KEY}` };
    const owned = nodes.flatMap((n) => n.gw.cluster!.owned());
    const id = owned[0]!;
    expect((await nodes[1]!.req('DELETE', `/v1/seats/${id}`, { headers: mk })).status).toBe(200);
    await until(() => nodes.every((n) => !n.gw.cluster!.owned().includes(id)), 'the deleted seat\'s account to be let go');
    // Every other account still has its owner: none is without one.
    await until(() => nodes.flatMap((n) => n.gw.cluster!.owned()).length === owned.length - 1, 'the other accounts to be held');
    const status = await nodes[0]!.req('GET', '/v1/status', { headers: mk });
    expect(status.body.cluster.unowned).toBe(0);
  }, 60_000);
});
