// A bridge connection the gateway itself closes while its login is under way (an account removed or
// re-bound, a bind's probe given up, the seat of a login the bridge refused removed again) is not the
// bridge failing: no "cannot connect to the bridge ... took the connection but the login did not
// complete" line. Before, each such close during the hello logged it (seen operating three cluster
// nodes: POST /v1/seats with a server the bridge does not know, answered 400 'unknown broker server',
// then that warning naming a bridge that served every other account: 'broker connection is not
// connected', 'connection lost during hello'). A bridge that takes the connection and never answers
// is still reported (tls.test.ts). A listener that never answers stands for the bridge here.
import { createServer, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BridgeBrokerConnection } from '../../src/broker/bridge.js';
import { until } from '../helpers/until.js';

const sockets: Socket[] = [];
let hellos = 0;
const silent = createServer((s) => {
  sockets.push(s);
  s.on('data', () => hellos++);
  s.on('error', () => {});
});
let port = 0;

beforeAll(async () => {
  await new Promise<void>((r) => silent.listen(0, '127.0.0.1', () => r()));
  port = (silent.address() as { port: number }).port;
});
afterAll(() => {
  for (const s of sockets) s.destroy();
  silent.close();
});

const connection = (errors: Error[], requestTimeoutMs: number) => new BridgeBrokerConnection({
  host: '127.0.0.1', port, server: 'Sim-P5-Demo', login: 'closed-by-client', password: 'pw', requestTimeoutMs, onConnectError: (e) => errors.push(e),
});

describe('a bridge connection closed by the gateway during its login', () => {
  it('reports no bridge failure; one the bridge leaves unanswered still does', async () => {
    const errors: Error[] = [];
    const c = connection(errors, 10_000);
    const before = hellos;
    const login = c.connect().then(() => 'connected', (e: unknown) => e);
    await until(() => hellos > before, 'the hello to reach the listener');
    await c.disconnect();
    expect(await login).toBeInstanceOf(Error);
    expect(errors.map((e) => e.message)).toEqual([]);
    // The same listener, left unanswered: the line the operator needs.
    const timedOut: Error[] = [];
    await connection(timedOut, 200).connect().catch(() => undefined);
    expect(timedOut.map((e) => e.message)).toEqual([expect.stringMatching(/took the connection but the login did not complete/)]);
  });
});
