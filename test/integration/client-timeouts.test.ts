// The SDK never waits forever for a gateway that stopped answering (docs/client.md "Timeouts"):
// - a frozen gateway (SIGSTOP: the kernel still accepts its TCP connections, nothing answers): the
//   stream's upgrade is given up after `connectTimeoutMs` and tried again, and once the gateway runs
//   again the stream resumes where it was (recovered:true, nothing missed, nothing twice);
// - an answer whose body stops halfway: the call ends with TIMEOUT after `timeoutMs` (the bound
//   covers the body, not only the headers);
// - a stream closed while it asks over HTTP why its upgrade was refused: the question is dropped with
//   it (its connection closed at once, not held for timeoutMs, which kept the process alive);
// - client.close(): every call in flight ends ABORTED (its connection closed, its retry wait dropped),
//   every stream and session socket of the client closes, and later calls fail at once.
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { TagwClient, TagwError, type Resumed } from '../../src/client/index.js';
import { cleanupProcesses, startProcess } from '../helpers/process.js';
import { until } from '../helpers/until.js';

const cleanup: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
  cleanupProcesses();
});

describe('a frozen gateway', () => {
  it('the stream gives up an unanswered upgrade and tries again; after the thaw it resumes with nothing missed', async () => {
    const gw = startProcess({ STREAM_HEARTBEAT_MS: '200' });
    const url = await gw.listening;
    const mk = (JSON.parse(readFileSync(join(gw.dir, 'bootstrap.json'), 'utf8')) as { managementKey: string }).managementKey;
    const key = (await new TagwClient({ baseUrl: url, managementKey: mk }).keys.create({ label: 'frozen' })).key;
    const client = new TagwClient({ baseUrl: url, apiKey: key, WebSocket });
    const id = (await client.connectEx({ user: 'sdk-frozen', password: 'pw', server: 'Sim-P5-Demo' })).id;
    const s = client.stream(id, { heartbeatTimeoutMs: 1_000, connectTimeoutMs: 500, backoff: { baseMs: 20, maxMs: 100 } });
    cleanup.push(() => s.close());
    const trades: number[] = [];
    const resumed: Resumed[] = [];
    s.on('TRADE', (f) => trades.push(f.data.ticket));
    s.on('RESUMED', (f) => resumed.push(f.data));
    await until(() => s.position !== undefined, 'the initial snapshot');
    await client.account(id).OrderSend({ symbol: 'BTCUSD', operation: 'Buy', volume: 0.01 });
    await until(() => trades.length === 1, 'the first TRADE');

    gw.child.kill('SIGSTOP');
    cleanup.push(() => void gw.child.kill('SIGCONT'));
    // The silence replaces the socket (1), then each upgrade nobody answers is given up (2, 3).
    await until(() => s.reconnects >= 3, 'upgrades given up while the gateway is frozen');
    gw.child.kill('SIGCONT');

    await until(() => resumed.length > 0, 'RESUMED after the thaw');
    expect(resumed[0]!.recovered).toBe(true);
    await client.account(id).OrderSend({ symbol: 'BTCUSD', operation: 'Sell', volume: 0.01 });
    await until(() => trades.length === 2, 'the TRADE after the thaw');
    expect(new Set(trades).size).toBe(2);
  }, 60_000);
});

describe('an answer that stops halfway', () => {
  it('ends with TIMEOUT: the per-try bound covers the body', async () => {
    const server = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '64' });
      res.write('{"balance":'); // and nothing more
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    cleanup.push(() => new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    }));
    const port = (server.address() as { port: number }).port;
    let tries = 0;
    const counting: typeof fetch = (input, init) => {
      tries++;
      return fetch(input, init);
    };
    const client = new TagwClient({ baseUrl: `http://127.0.0.1:${port}`, apiKey: 'tagw_api_x', fetch: counting, timeoutMs: 300, retry: { attempts: 2, baseMs: 1, maxMs: 2 } });
    const err = await client.account('acct').AccountSummary().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TagwError);
    expect(err).toMatchObject({ code: 'TIMEOUT', status: 0 });
    expect(tries).toBe(2); // a read: tried again after the timeout
  }, 20_000);
});

describe('close() while the stream asks why its upgrade was refused', () => {
  it("drops the question's connection at once and says nothing more", async () => {
    // Upgrades answered 503 (the SDK then asks /Ping over HTTP why), /Ping never answered.
    const pings = new Set<import('node:http').IncomingMessage>();
    let pingsSeen = 0;
    const server = createServer((req, res) => {
      if (req.url?.startsWith('/Ping')) {
        pingsSeen++;
        pings.add(req);
        req.socket.on('close', () => pings.delete(req));
        return;
      }
      res.writeHead(503, { 'content-type': 'application/json' }).end('{"error":"SERVICE_UNAVAILABLE","message":"later"}');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    cleanup.push(() => new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    }));
    const port = (server.address() as { port: number }).port;
    const s = new TagwClient({ baseUrl: `http://127.0.0.1:${port}`, apiKey: 'tagw_api_x', WebSocket }).stream('acct');
    const after: string[] = [];
    s.onEvent('error', (e) => after.push(e.code));
    await until(() => pings.size > 0, 'the /Ping question');
    s.close();
    await until(() => pings.size === 0, "the question's connection closed");
    expect(pingsSeen).toBe(1);
    expect(after).toEqual([]);
  }, 20_000);
});

describe('client.close()', () => {
  it('ends the calls in flight and their retry waits, closes its streams and sockets, refuses later calls', async () => {
    // Accepts and never answers: every call waits for its timeout (60 s here).
    const held = new Set<import('node:net').Socket>();
    const server = createServer(() => undefined);
    server.on('connection', (c) => {
      held.add(c);
      c.on('close', () => held.delete(c));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    cleanup.push(() => new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    }));
    const port = (server.address() as { port: number }).port;
    // A second server answering 429 with a long wait: a call sleeping before its retry.
    const limited = createServer((_req, res) => void res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '8' }).end('{"error":"RATE_LIMITED","message":"slow down","retryAfterMs":8000}'));
    await new Promise<void>((r) => limited.listen(0, '127.0.0.1', r));
    cleanup.push(() => new Promise<void>((r) => {
      limited.closeAllConnections();
      limited.close(() => r());
    }));
    const client = new TagwClient({ baseUrl: `http://127.0.0.1:${port}`, apiKey: 'tagw_api_x', WebSocket, timeoutMs: 60_000 });
    const sleeper = new TagwClient({ baseUrl: `http://127.0.0.1:${(limited.address() as { port: number }).port}`, apiKey: 'tagw_api_x' });
    const inFlight = client.account('acct').OrderSend({ symbol: 'BTCUSD', operation: 'Buy', volume: 0.01 }).catch((e: unknown) => e);
    const waiting = sleeper.account('acct').AccountSummary().catch((e: unknown) => e);
    const s = client.stream('acct');
    const states: string[] = [];
    s.onEvent('state', (st) => states.push(st));
    await until(() => held.size >= 2, 'the call and the upgrade waiting');

    client.close();
    sleeper.close();
    const err = await inFlight;
    expect(err).toBeInstanceOf(TagwError);
    expect(err).toMatchObject({ code: 'ABORTED', status: 0 });
    expect((err as TagwError).clientOrderId).toMatch(/^sdk-/); // it may have been placed: look, or resend with it
    expect(await waiting).toMatchObject({ code: 'ABORTED' });
    expect(states).toContain('closed');
    await until(() => held.size === 0, 'every connection closed');
    expect(await client.account('acct').AccountSummary().catch((e: unknown) => e)).toMatchObject({ code: 'ABORTED' });
  }, 20_000);
});
