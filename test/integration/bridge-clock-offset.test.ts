// ServerInfo.clockOffsetMs in a bridge's hello (a simulator process started with --start): the
// connection keeps a whole number of ms and drops anything else, so a malformed bridge cannot put
// the gateway's market "now" at NaN.
import { createServer, type Server } from 'node:net';
import { afterEach, expect, it } from 'vitest';
import { BridgeBrokerConnection } from '../../src/broker/bridge.js';
import { BRIDGE_PROTOCOL_VERSION, LineReader } from '../../src/broker/bridgeProtocol.js';

const SERVER = { name: 'Sim-P5-Demo', platform: 'P5', build: 4620, company: 'x', timeZone: { description: 'GMT+2', standardOffsetMinutes: 120, dst: 'US' } };
let srv: Server | undefined;
afterEach(() => new Promise<void>((resolve) => (srv ? srv.close(() => resolve()) : resolve())));

/** A bridge answering the hello with `clockOffsetMs`, serverTime, and every other request with []. */
async function bridgeWith(clockOffsetMs: unknown): Promise<number> {
  srv = createServer((socket) => {
    const reader = new LineReader((line) => {
      const f = JSON.parse(line) as { id: number; op: string };
      const result = f.op === 'hello' ? { version: BRIDGE_PROTOCOL_VERSION, server: { ...SERVER, clockOffsetMs } }
        : f.op === 'serverTime' ? { timeMsc: 1, serverTimeMsc: 1 } : [];
      socket.write(JSON.stringify({ id: f.id, result }) + '\n');
    });
    socket.on('data', (d: Buffer) => reader.push(d.toString()));
  });
  await new Promise<void>((resolve) => srv!.listen(0, '127.0.0.1', resolve));
  return (srv.address() as { port: number }).port;
}

it.each([
  [-6_294_000_000, -6_294_000_000],
  [0, 0],
  ['-5', undefined],
  [1.5, undefined],
  [null, undefined],
  [1e300, undefined],
])('hello clockOffsetMs %s -> %s', async (sent, kept) => {
  const c = new BridgeBrokerConnection({ host: '127.0.0.1', port: await bridgeWith(sent), server: 'Sim-P5-Demo', login: '1', password: 'x' });
  await c.connect();
  expect(c.server.clockOffsetMs).toBe(kept);
  await c.disconnect();
});
