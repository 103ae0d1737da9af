// Keys stay out of what gets logged (docs/client.md "Keys"): on Node the stream's and /ws's upgrade
// carries the API key as the x-api-key header, not in the URL (proxies and access logs keep URLs);
// a client, its transport and its errors print no key however deeply they are inspected; a redirect
// is not followed (fetch would send x-api-key on to wherever it points).
import { createServer, type IncomingHttpHeaders } from 'node:http';
import { inspect } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { TagwClient } from '../../src/client/index.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcpProxy.js';
import { until } from '../helpers/until.js';

let g: TestGateway;
let proxy: TcpProxy;
let key: string;
let id: string;
/** The request head of every upgrade that went through the proxy. */
const upgrades: string[] = [];

beforeAll(async () => {
  g = await startTestGateway();
  proxy = await startTcpProxy(Number(new URL(g.url).port));
  proxy.watch((dir, chunk) => {
    const text = chunk.toString('latin1');
    if (dir === 'up' && /^GET [^\r\n]+\r\n/.test(text) && /upgrade: websocket/i.test(text)) upgrades.push(text.split('\r\n\r\n')[0]!);
  });
  key = (await new TagwClient({ baseUrl: g.url, managementKey: g.managementKey }).keys.create({ label: 'secrets' })).key;
  id = (await new TagwClient({ baseUrl: g.url, apiKey: key }).connectEx({ user: 'sdk-secrets', password: 'pw', server: 'Sim-P5-Demo' })).id;
});
afterAll(async () => {
  await proxy?.close();
  await g?.stop();
});

const requestLine = (head: string) => head.split('\r\n')[0]!;

describe('the API key on a socket', () => {
  it('/v1/stream: sent as x-api-key, not in the URL; the stream works', async () => {
    upgrades.length = 0;
    const client = new TagwClient({ baseUrl: proxy.url, apiKey: key, WebSocket });
    const s = client.stream(id, { symbols: ['BTCUSD'] });
    let quotes = 0;
    s.on('QUOTE', () => void quotes++);
    await until(() => quotes > 0, 'a quote');
    s.close();
    expect(upgrades).toHaveLength(1);
    expect(requestLine(upgrades[0]!)).toMatch(/^GET \/v1\/stream\?/);
    expect(requestLine(upgrades[0]!)).not.toContain(key);
    expect(upgrades[0]!.toLowerCase()).toContain(`x-api-key: ${key.toLowerCase()}`);
  });

  it('/ws of a gateway session: the same', async () => {
    upgrades.length = 0;
    const session = await new TagwClient({ baseUrl: proxy.url, apiKey: key, WebSocket }).connect(id);
    const ws = session.socket();
    let quotes = 0;
    ws.on('QUOTE', () => void quotes++);
    await session.op.Subscribe({ symbol: 'BTCUSD' });
    await until(() => quotes > 0, 'a quote on /ws');
    ws.close();
    expect(upgrades).toHaveLength(1);
    expect(requestLine(upgrades[0]!)).toMatch(/^GET \/ws\?/);
    expect(requestLine(upgrades[0]!)).not.toContain(key);
  });

  it("webSocketKey: 'query' puts it in the URL (a browser's WebSocket cannot send headers)", async () => {
    upgrades.length = 0;
    const s = new TagwClient({ baseUrl: proxy.url, apiKey: key, WebSocket, webSocketKey: 'query' }).stream(id);
    let snapshot = false;
    s.on('POSITIONS', () => void (snapshot = true));
    await until(() => snapshot, 'the snapshot');
    s.close();
    expect(requestLine(upgrades[0]!)).toContain(`apiKey=${key}`);
  });
});

describe('printing a client', () => {
  it('neither the client nor its errors show a key', async () => {
    const mk = g.managementKey;
    const client = new TagwClient({ baseUrl: g.url, apiKey: key, managementKey: mk, WebSocket });
    const err = await client.account('00000000-0000-4000-8000-000000000000').AccountSummary().catch((e: unknown) => e);
    for (const shown of [inspect(client, { depth: Infinity, showHidden: true }), JSON.stringify(client), inspect(err, { depth: Infinity, showHidden: true })]) {
      expect(shown).not.toContain(key);
      expect(shown).not.toContain(mk);
    }
    // The keys still work.
    expect((await client.whoami()).keyId).toBeTruthy();
    expect(Array.isArray((await client.keys.list()).keys)).toBe(true);
  });
});

describe('a redirect', () => {
  it('is not followed: the key goes nowhere else, and the call ends with REDIRECT, tried once', async () => {
    const elsewhere: IncomingHttpHeaders[] = [];
    const other = createServer((req, res) => {
      elsewhere.push(req.headers);
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"balance":1}');
    });
    let asked = 0;
    const redirecting = createServer((_req, res) => {
      asked++;
      res.writeHead(302, { location: `http://127.0.0.1:${(other.address() as { port: number }).port}/AccountSummary` }).end();
    });
    for (const s of [other, redirecting]) await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
    try {
      const client = new TagwClient({ baseUrl: `http://127.0.0.1:${(redirecting.address() as { port: number }).port}`, apiKey: key, retry: { baseMs: 1, maxMs: 2 } });
      const err = await client.account(id).AccountSummary().catch((e: unknown) => e);
      expect(err).toMatchObject({ code: 'REDIRECT', status: 302 });
      expect((err as Error).message).toContain('/AccountSummary');
      expect(elsewhere).toEqual([]);
      expect(asked).toBe(1);
    } finally {
      for (const s of [other, redirecting]) await new Promise<void>((r) => s.close(() => r()));
    }
  });
});
