// Cluster mode: a re-bind whose broker probe (the new login tried on a connection of its own) lasts
// longer than the account stays on its node: the lease lapses, another owner holds it for a moment,
// and the node takes the account back (a later epoch, started again from the binding before) while
// the probe still runs. The bind must land on the account as it runs now: the node's SQLite,
// PostgreSQL and the broker connection all on the new login. Before, the bind wrote the new login
// into SQLite and gave it to the entry it had found before the probe (stopped at the release), so
// the account ran on the old login while SQLite and PostgreSQL said the new one (200). A real
// gateway in cluster mode (nats-server, embedded PostgreSQL, a bridged simulator reached through a
// TCP proxy that holds the probe's connection); the lease is given to another owner in PostgreSQL,
// as a node taking an expired lease does.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useClusterEngines } from '../helpers/cluster.js';
import { startTestGateway, TEST_MANAGEMENT_KEY, type TestGateway } from '../helpers/gateway.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcpProxy.js';
import { until } from '../helpers/until.js';

const engines = useClusterEngines();
let bridge: TcpProxy;
let gw: TestGateway;
const SERVER = 'Sim-P5-Demo';

beforeAll(async () => {
  bridge = await startTcpProxy(engines.sim.port);
  gw = await startTestGateway({
    brokerMode: 'bridge', bridgeUrl: `tcp://127.0.0.1:${bridge.port}`, shards: 1, secretKey: randomBytes(32).toString('hex'),
    reconnectBaseMs: 50, reconnectCapMs: 300, bindWaitMs: 1_000,
    natsUrl: engines.nats.url, databaseUrl: engines.databaseUrl, nodeId: 'slow-probe', clusterLeaseMs: 1_500, clusterOwnerWaitMs: 15_000,
  });
}, 90_000);
afterAll(async () => {
  await gw?.stop().catch(() => undefined);
  await bridge?.close();
});

interface Binding { login: string }
const pgBinding = async (id: string) => (await engines.pool.query<Binding>('SELECT login FROM account_bindings WHERE seat_id = $1', [id])).rows[0]?.login;
const sqliteBinding = (id: string) => gw.gw.services.db.prepare<[string], Binding>('SELECT login FROM account_bindings WHERE seat_id = ?').get(id)?.login;
const epoch = async (id: string) => (await engines.pool.query<{ epoch: number }>('SELECT epoch FROM account_leases WHERE account_id = $1', [id])).rows[0]!.epoch;
/** The logins the simulator has account connections of (its account event sinks). */
const connected = () => [...engines.sim.sim.server(SERVER)!.sinks].filter(([, s]) => s.size > 0).map(([acc]) => acc.data.login).sort();

describe('a re-bind whose broker probe outlasts the account\'s lease, which comes back to the node', () => {
  it('lands on the account as it runs now: SQLite, PostgreSQL and the broker connection on the new login', async () => {
    const made = await gw.req('POST', '/v1/keys', { headers: { authorization: `Bearer ${TEST_MANAGEMENT_KEY}` }, body: { label: 'bot' } });
    expect(made.status).toBe(201);
    const api = { 'x-api-key': made.body.key as string };
    const first = await gw.req('POST', '/ConnectEx', { headers: api, body: { user: 'probe-old', password: 'pw', server: SERVER } });
    expect(first.status, first.text).toBe(200);
    const id = first.body.id as string;
    await until(() => gw.gw.cluster!.owned().includes(id) && connected().includes('probe-old'), 'the account to run on its login');
    const before = await epoch(id);

    // The next connection to the bridge (the probe) is held until this node has the account back:
    // meanwhile another owner holds the lease for 1 s, then this node takes it again. (It was held
    // 4 s a chunk, some 12 s for the probe's round trips, where only the take-back had to fit.)
    let probe: number | undefined;
    let known = Number.POSITIVE_INFINITY;
    let back!: () => void;
    const isBack = new Promise<void>((r) => (back = r));
    bridge.watch((dir, _chunk, conn) => {
      if (dir !== 'up' || conn <= known) return undefined;
      if (probe === undefined) probe = conn;
      return conn === probe ? { until: isBack } : undefined;
    });
    const rebind = gw.req('POST', `/ConnectEx?id=${id}`, { headers: api, body: { user: 'probe-new', password: 'pw', server: SERVER } });
    known = 0; // every connection opened from here: the probe is the first
    await until(() => probe !== undefined, 'the probe to connect');
    // Taken back = its shard runs it again (onAcquired fires once the shard's adopt resolved): the
    // lease alone is held a moment before the shard hears of it, and a bind that finished its probe
    // in between was answered 503 "moving between nodes" (seen in CI under load: a clean answer, but
    // not the case this test is about).
    const node = gw.gw.cluster!;
    const previous = node.onAcquired;
    let adoptedAgain = false;
    node.onAcquired = (ids) => {
      previous(ids);
      if (ids.includes(id)) adoptedAgain = true;
    };
    await engines.pool.query("UPDATE account_leases SET owner = 'another-node', epoch = epoch + 1, expires_at = now() + interval '1 second' WHERE account_id = $1", [id]);
    try {
      await until(async () => adoptedAgain && node.owned().includes(id) && (await epoch(id)) > before + 1, 'the node to own and run the account again');
    } finally {
      node.onAcquired = previous;
      back();
    }
    const r = await rebind;
    bridge.watch(undefined);
    expect(r.status, r.text).toBe(200);
    expect(await pgBinding(id)).toBe('probe-new');
    expect(sqliteBinding(id)).toBe('probe-new');
    await until(() => connected().join() === 'probe-new', 'the account\'s broker connection on the new login', 10_000);
  }, 60_000);
});
