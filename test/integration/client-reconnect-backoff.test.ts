// The stream's reconnect backoff against a server that accepts each connection, says one frame and
// closes it (as the gateway does with an ERROR frame and 4010 when it cannot set an account's stream
// up): the waits grow as after any failure. Before, any frame started the backoff from the bottom
// again, so each client came back every 100-200 ms (the default backoff) for as long as that lasted.
// A connection that stayed open a while (`healthyMs`) does start it from the bottom.
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket, { WebSocketServer } from 'ws';
import { TagwClient } from '../../src/client/index.js';
import { until } from '../helpers/until.js';

let server: WebSocketServer | undefined;
afterEach(async () => {
  for (const c of server?.clients ?? []) c.terminate();
  await new Promise((r) => server?.close(r) ?? r(undefined));
  server = undefined;
});

/** A server answering each connection with `frame` and, after `holdMs`, a close 4010. */
async function flappingServer(holdMs: number): Promise<string> {
  server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await new Promise((r) => server!.once('listening', r));
  server.on('connection', (ws) => {
    ws.send(JSON.stringify({ type: 'ERROR', data: { error: 'SERVICE_UNAVAILABLE', message: 'the account stream is not open here' } }));
    setTimeout(() => ws.close(4010, 'account unavailable'), holdMs);
  });
  return `http://127.0.0.1:${(server.address() as { port: number }).port}`;
}

/** The `delayMs` of the stream's first `n` reconnects. */
async function delays(baseUrl: string, n: number, o: { baseMs: number; maxMs: number }): Promise<number[]> {
  // random() = 0: each wait is exactly half its cap, cap = min(maxMs, baseMs * 2^attempt).
  const client = new TagwClient({ baseUrl, apiKey: 'tagw_k_0000000000000000_x', WebSocket, random: () => 0 });
  const s = client.stream('acct', { backoff: o });
  const got: number[] = [];
  s.onEvent('state', (st, d) => void (st === 'reconnecting' && d?.delayMs !== undefined && got.push(d.delayMs)));
  try {
    await until(() => got.length >= n, `${n} reconnects`);
  } finally {
    client.close();
  }
  return got.slice(0, n);
}

describe('stream reconnect backoff', () => {
  it('grows over connections that each bring one frame and close at once', async () => {
    const url = await flappingServer(0);
    expect(await delays(url, 6, { baseMs: 20, maxMs: 10_000 })).toEqual([10, 20, 40, 80, 160, 320]);
  });

  it('starts from the bottom again after a connection that stayed open for healthyMs (the backoff maxMs)', async () => {
    const url = await flappingServer(400);
    // maxMs 100: each connection (open 400 ms) was healthy, so every wait is the first one.
    expect(await delays(url, 4, { baseMs: 20, maxMs: 100 })).toEqual([10, 10, 10, 10]);
  });
});
