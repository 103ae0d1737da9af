// Another customer's broker login tried with a wrong password: the refusal is the broker's, reached by
// the same check at the broker an unbound login gets (SPEC §7: 400), not an answer made at once from
// the stored password. Answered at once, it came back sooner than any broker check could, and the
// difference told an attacker which logins are bound at this gateway. Not a timed test: the broker
// (an in-process simulator behind the bridge) is watched for the login attempt itself.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createCustomer } from '../../src/auth/bootstrap.js';
import { mgmt, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { startBridgeSim, type BridgeSim } from '../helpers/sim-helpers.js';

let bs: BridgeSim;
let t: TestGateway;
beforeAll(async () => {
  bs = await startBridgeSim();
  t = await startTestGateway({ brokerMode: 'bridge', bridgeUrl: bs.url });
}, 30_000);
afterAll(async () => {
  await t?.stop();
  await bs?.close();
});

describe("another customer's bound login", () => {
  it('with a wrong password is checked at the broker (as an unbound login is) before the 400; with the right one 409', async () => {
    const user = String(60_000 + Math.floor(Math.random() * 5_000));
    const login = { platform: 'P5', user, password: 'owner-pw', server: 'Sim-P5-Demo' };
    expect((await t.req('POST', '/v1/broker-accounts', { headers: mgmt(t.managementKey), body: login })).status).toBe(201);
    const other = createCustomer(t.gw.services.tenancy, 'prober');
    const key = (await t.req('POST', '/v1/keys', { headers: mgmt(other.managementKey), body: { label: 'b' } })).body.key as string;
    const server = bs.sim.server('Sim-P5-Demo')!;
    const attempts = vi.spyOn(server, 'login');
    try {
      const tries: Array<[string, string, Record<string, string>]> = [
        ['POST', '/v1/broker-accounts', { ...login, password: 'guess-1' }],
        ['POST', '/ConnectEx', { user, password: 'guess-2', server: 'Sim-P5-Demo' }],
      ];
      for (const [method, path, body] of tries) {
        attempts.mockClear();
        const r = await t.req(method, path, { headers: { 'x-api-key': key }, body });
        expect([r.status, r.body.error], r.text).toEqual([400, 'BROKER_AUTH_FAILED']);
        expect(attempts.mock.calls.map(([l]) => l), path).toEqual([user]);
        expect(attempts.mock.calls[0]![1]).toBe(body.password);
      }
      const seat = await t.req('POST', '/v1/seats', { headers: mgmt(other.managementKey), body: { user, password: 'guess-3', server: 'Sim-P5-Demo' } });
      expect([seat.status, seat.body.error]).toEqual([400, 'BROKER_AUTH_FAILED']);
      // The holder of the password learns the login is bound (it could log in anyway): 409.
      const right = await t.req('POST', '/v1/broker-accounts', { headers: { 'x-api-key': key }, body: login });
      expect([right.status, right.body.error]).toEqual([409, 'BROKER_LOGIN_IN_USE']);
    } finally {
      attempts.mockRestore();
    }
  }, 30_000);
});
