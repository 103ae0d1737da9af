// A broker server the bridge does not know answers 400 BAD_REQUEST "unknown broker server X" in
// cluster mode too, as on one node (docs/accounts-and-trading.md; connection.bridge.test.ts), on
// every path that binds a login. In cluster mode the binding is in PostgreSQL before the owner's
// shard binds it, so the owner may have started the account from it already, its login refused by
// the bridge, when the bind arrives: the bind then skipped its own try of the login (the same
// password) and answered 400 BROKER_AUTH_FAILED "the broker refused this login and password", a
// wrong password, for a server name that is wrong (seen operating a three-node cluster: 5 of 6
// POST /v1/seats). One cluster node on real nats-server and PostgreSQL, bridged to a simulator.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startClusterGateways, useClusterEngines } from '../helpers/cluster.js';
import { mgmt, type TestGateway } from '../helpers/gateway.js';

const engines = useClusterEngines();
let node: TestGateway;

beforeAll(async () => {
  [node] = await startClusterGateways(engines, ['unknown-server-a'], { shards: 1, leaseMs: 6_000 });
}, 60_000);
afterAll(async () => {
  await node?.stop();
});

const seatCount = async () => (await node.req('GET', '/v1/seats', { headers: mgmt(node.managementKey) })).body.seats.length as number;

describe('a broker server the bridge does not know, in cluster mode', { timeout: 60_000 }, () => {
  it('answers 400 BAD_REQUEST naming the server on every binding path, never BROKER_AUTH_FAILED, and leaves no seat', async () => {
    const key = (await node.req('POST', '/v1/keys', { headers: mgmt(node.managementKey), body: { label: 'u' } })).body.key as string;
    const before = await seatCount();
    const answers: Array<{ path: string; status: number; body: unknown }> = [];
    for (let i = 0; i < 4; i++) {
      const body = { user: `nosuch-${process.pid}-${i}`, password: 'pw', server: 'NoSuchServer' };
      for (const [path, headers, extra] of [
        ['/v1/seats', mgmt(node.managementKey), {}],
        ['/ConnectEx', { 'x-api-key': key }, {}],
        ['/v1/broker-accounts', mgmt(node.managementKey), { platform: 'P5' }],
      ] as const) {
        const r = await node.req('POST', path, { headers, body: { ...body, user: `${body.user}-${path.length}`, ...extra } });
        answers.push({ path, status: r.status, body: r.body });
      }
    }
    expect(answers.filter((a) => a.status !== 400 || JSON.stringify(a.body) !== JSON.stringify({ error: 'BAD_REQUEST', message: 'unknown broker server NoSuchServer' })))
      .toEqual([]);
    expect(await seatCount()).toBe(before);
  });
});
