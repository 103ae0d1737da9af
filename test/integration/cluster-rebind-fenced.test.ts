// Cluster mode: a re-bind whose copy to PostgreSQL finds that the account's lease moved on during
// the call (docs/cluster.md, "Not built yet" until this test). The owner's shard had bound the new
// login and written it into its node's SQLite; PostgreSQL, the cluster's record, keeps the binding
// before it and the call answers 503. The node must not keep the refused change: its SQLite goes
// back to PostgreSQL's binding, so the account, when the node runs it again, runs on the login the
// cluster has, and its next binding copy (an upgrade) does not carry the refused login into
// PostgreSQL. Before, the change stayed in the node's SQLite: the account came back on the refused
// login and the next upgrade wrote it to PostgreSQL. A real gateway in cluster mode (nats-server,
// embedded PostgreSQL through a TCP proxy that holds the copy statement, a bridged simulator); the
// lease is taken over in PostgreSQL by another owner while the copy is held, as a node taking an
// expired lease does.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startProxiedClusterGateway, type ClusterEngines, type ProxiedClusterGateway } from '../helpers/cluster.js';
import { TEST_MANAGEMENT_KEY, type TestGateway } from '../helpers/gateway.js';
import type { TcpProxy } from '../helpers/tcpProxy.js';
import { until } from '../helpers/until.js';

let cluster: ProxiedClusterGateway;
let engines: ClusterEngines;
let proxy: TcpProxy;
let gw: TestGateway;
const logs: string[] = [];
const mk = { authorization: `Bearer ${TEST_MANAGEMENT_KEY}` };
/** The owner's binding copy (bindingRecords.ts SYNC_SQL). */
const BINDING_COPY = 'UPDATE account_bindings SET server';

beforeAll(async () => {
  cluster = await startProxiedClusterGateway('rebind-fenced', { clusterOwnerWaitMs: 15_000, logs });
  ({ engines, proxy, gw } = cluster);
}, 90_000);
afterAll(async () => {
  await cluster?.stop();
});

interface Binding { login: string; build: number | null }
const pgBinding = async (id: string) => (await engines.pool.query<Binding>('SELECT login, build FROM account_bindings WHERE seat_id = $1', [id])).rows[0];
const sqliteBinding = (id: string) => gw.gw.services.db.prepare<[string], Binding>('SELECT login, build FROM account_bindings WHERE seat_id = ?').get(id);
const lease = async (id: string) => (await engines.pool.query<{ owner: string | null; epoch: number }>('SELECT owner, epoch FROM account_leases WHERE account_id = $1', [id])).rows[0]!;

describe('a re-bind whose lease moved on before its copy reached PostgreSQL', () => {
  it('answers 503, and the node keeps PostgreSQL\'s binding: the account comes back on the old login, and an upgrade does not carry the refused one into PostgreSQL', async () => {
    const made = await gw.req('POST', '/v1/keys', { headers: mk, body: { label: 'bot' } });
    expect(made.status).toBe(201);
    const api = { 'x-api-key': made.body.key as string };
    const first = await gw.req('POST', '/ConnectEx', { headers: api, body: { user: 'fenced-old', password: 'pw', server: 'Sim-P5-Demo' } });
    expect(first.status, first.text).toBe(200);
    const id = first.body.id as string;
    await until(() => gw.gw.cluster!.owned().includes(id), 'the node to own the account');
    const before = await lease(id);

    // The copy of the re-bind is held 2 s on its way; meanwhile another owner takes the lease for
    // 2 s (the epoch moves on), then this node gets it back at its next round.
    let taken: Promise<unknown> | undefined;
    proxy.watch((dir, chunk) => {
      if (dir !== 'up' || taken || !chunk.includes(BINDING_COPY)) return undefined;
      taken = engines.pool.query(
        "UPDATE account_leases SET owner = 'another-node', epoch = epoch + 1, expires_at = now() + interval '2 seconds' WHERE account_id = $1", [id]);
      return { delayMs: 2_000 };
    });
    let rebind;
    try {
      rebind = await gw.req('POST', `/ConnectEx?id=${id}`, { headers: api, body: { user: 'fenced-new', password: 'pw', server: 'Sim-P5-Demo' } });
    } finally {
      proxy.watch(undefined);
    }
    await taken;
    expect({ status: rebind.status, error: rebind.body?.error }).toEqual({ status: 503, error: 'SERVICE_UNAVAILABLE' });
    expect(await pgBinding(id)).toMatchObject({ login: 'fenced-old' });

    // Back on this node, at a later epoch: from the binding the cluster has.
    await until(async () => gw.gw.cluster!.owned().includes(id) && (await lease(id)).epoch > before.epoch + 1, 'the node to own the account again');
    await until(() => sqliteBinding(id)?.login === 'fenced-old', 'the node\'s SQLite to hold PostgreSQL\'s binding', 10_000);
    // Its next binding copy (an upgrade) writes the row the node runs: still the old login.
    const up = await gw.req('POST', `/v1/accounts/${id}/upgrade`, { headers: mk, body: { build: 2_345 } });
    expect(up.status, up.text).toBe(200);
    expect(await pgBinding(id)).toEqual({ login: 'fenced-old', build: 2_345 });
    expect(sqliteBinding(id)).toEqual({ login: 'fenced-old', build: 2_345 });
  }, 60_000);
});
