// Bad input to the SDK ends at once with a TagwError naming it: not a retry loop, not a stream that
// never yields, not an unhandled rejection (which ends a Node process). And the gateway's refusals
// of bad input arrive as TagwErrors with the gateway's code, tried once.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { TagwClient, TagwError, type WebSocketConstructor } from '../../src/client/index.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { until } from '../helpers/until.js';

let g: TestGateway;
let key: string;
let id: string;
const unhandled: unknown[] = [];
const onUnhandled = (e: unknown) => void unhandled.push(e);

beforeAll(async () => {
  process.on('unhandledRejection', onUnhandled);
  g = await startTestGateway();
  key = (await new TagwClient({ baseUrl: g.url, managementKey: g.managementKey }).keys.create({ label: 'bad-input' })).key;
  id = (await new TagwClient({ baseUrl: g.url, apiKey: key }).connectEx({ user: 'sdk-bad', password: 'pw', server: 'Sim-P5-Demo' })).id;
});
afterAll(async () => {
  process.off('unhandledRejection', onUnhandled);
  await g?.stop();
});

/** The error `f` throws (synchronously or not). */
async function errorOf(f: () => unknown): Promise<unknown> {
  try {
    await f();
  } catch (e) {
    return e;
  }
  return undefined;
}

describe('bad options', () => {
  it('a baseUrl that is not an http(s) URL is refused by the constructor', async () => {
    for (const baseUrl of ['localhost:8080', '127.0.0.1:8080', 'ftp://example.test', '']) {
      const err = await errorOf(() => new TagwClient({ baseUrl, apiKey: key, WebSocket }));
      expect(err, baseUrl).toBeInstanceOf(TagwError);
      expect(err, baseUrl).toMatchObject({ code: 'BAD_REQUEST', status: 0 });
      expect((err as Error).message).toContain('baseUrl');
    }
  });

  it('a baseUrl with a user and password, or one that does not parse, is refused by the constructor without repeating them', async () => {
    // Before: every call was retried as NETWORK_ERROR ("Request cannot be constructed from a URL that
    // includes credentials: http://bot:hunter2@..."), the password in the error's message.
    const host = g.url.replace(/^http:\/\//, '');
    for (const baseUrl of [`http://bot:hunter2@${host}`, `http://bot:hunter2@`, `http://bot:hunter2/x@${host}`, 'http://[::1']) {
      const err = await errorOf(() => new TagwClient({ baseUrl, apiKey: key, WebSocket }));
      expect(err, baseUrl).toBeInstanceOf(TagwError);
      expect(err, baseUrl).toMatchObject({ code: 'BAD_REQUEST', status: 0 });
      expect((err as Error).message, baseUrl).toContain('baseUrl');
      expect((err as Error).message, baseUrl).not.toContain('hunter2');
    }
    const noScheme = await errorOf(() => new TagwClient({ baseUrl: `bot:hunter2@${host}`, apiKey: key }));
    expect(noScheme).toMatchObject({ code: 'BAD_REQUEST', status: 0 });
    expect((noScheme as Error).message).not.toContain('hunter2');
  });

  it('an Invalid Date parameter is a TagwError naming it, nothing sent', async () => {
    let tries = 0;
    const counting: typeof fetch = (input, init) => {
      tries++;
      return fetch(input, init);
    };
    const acct = new TagwClient({ baseUrl: g.url, apiKey: key, fetch: counting }).account(id);
    // Before: toISOString's RangeError ("Invalid time value"), not a TagwError.
    const err = await errorOf(() => acct.OrderHistory({ from: new Date(Number.NaN), to: new Date() }));
    expect(err).toBeInstanceOf(TagwError);
    expect(err).toMatchObject({ code: 'BAD_REQUEST', status: 0 });
    expect((err as Error).message).toContain("'from'");
    expect(tries).toBe(0);
  });

  it("a since the gateway would refuse is refused by stream() at once (before: reconnected for ever)", async () => {
    for (const since of ['a b:5', 'e:007', `${'e'.repeat(33)}:1`]) {
      const err = await errorOf(() => new TagwClient({ baseUrl: g.url, apiKey: key, WebSocket }).stream(id, { since }));
      expect(err, since).toBeInstanceOf(TagwError);
      expect(err, since).toMatchObject({ code: 'BAD_REQUEST', status: 0 });
    }
  });

  it('a stream without an API key or without a WebSocket is refused when asked for', async () => {
    const noKey = await errorOf(() => new TagwClient({ baseUrl: g.url, WebSocket }).stream(id));
    expect(noKey).toBeInstanceOf(TagwError);
    expect(noKey).toMatchObject({ code: 'API_KEY_REQUIRED', status: 0 });
    // Node 20 has no global WebSocket (it is behind a flag).
    const noWs = await errorOf(() => new TagwClient({ baseUrl: g.url, apiKey: key, WebSocket: undefined as never }).stream(id));
    if (!(globalThis as { WebSocket?: unknown }).WebSocket) {
      expect(noWs).toBeInstanceOf(TagwError);
      expect(noWs).toMatchObject({ code: 'NO_WEBSOCKET', status: 0 });
    }
  });

  it('a WebSocket that throws when constructed (a browser refusing ws:// from an https page) ends the stream with a TagwError', async () => {
    const Refusing = class {
      constructor() {
        throw new DOMException("An insecure WebSocket connection may not be initiated from a page loaded over HTTPS.", 'SecurityError');
      }
    } as unknown as WebSocketConstructor;
    const s = new TagwClient({ baseUrl: g.url, apiKey: key, WebSocket: Refusing }).stream(id);
    const errors: TagwError[] = [];
    s.onEvent('error', (e) => errors.push(e));
    const err = await errorOf(async () => {
      for await (const _ of s) void _;
    });
    expect(err).toBeInstanceOf(TagwError);
    expect(err).toMatchObject({ code: 'WEBSOCKET_ERROR', status: 0 });
    expect((err as Error).message).toContain('insecure WebSocket');
    // On Node the key went as a header: the message says what to do if this WebSocket takes none.
    expect((err as Error).message).toContain("webSocketKey: 'query'");
    expect(errors).toEqual([err]);
    await new Promise((r) => setTimeout(r, 50)); // let a stray rejection surface
    expect(unhandled).toEqual([]);
  });
});

describe("the gateway's refusals", () => {
  it('a subscription it refuses is an ERROR frame on the stream, which goes on', async () => {
    const s = new TagwClient({ baseUrl: g.url, apiKey: key, WebSocket }).stream(id, { symbols: ['NOPE', 'BTCUSD'] });
    const refused: Array<{ error: string; message: string }> = [];
    let quotes = 0;
    s.on('ERROR', (f) => refused.push(f.data));
    s.on('QUOTE', () => void quotes++);
    try {
      await until(() => refused.length > 0 && quotes > 0, 'the ERROR frame, and quotes of the other symbol');
    } finally {
      s.close();
    }
    expect(refused[0]!.error).toMatch(/^[A-Z_]+$/);
    expect(refused[0]!.message).toContain('NOPE');
  });

  it('arrive with its code and status, tried once', async () => {
    let tries = 0;
    const counting: typeof fetch = (input, init) => {
      tries++;
      return fetch(input, init);
    };
    const acct = new TagwClient({ baseUrl: g.url, apiKey: key, fetch: counting, retry: { baseMs: 1, maxMs: 2 } }).account(id);
    const cases: Array<[() => Promise<unknown>, string, number]> = [
      [() => acct.OrderSend({ symbol: 'BTCUSD', operation: 'Buy', volume: -1 }), 'BAD_REQUEST', 400],
      [() => acct.OrderSend({ symbol: 'BTCUSD', operation: 'Buy', volume: 0.01, clientOrderId: 'has spaces' }), 'BAD_REQUEST', 400],
      [() => acct.OrderSend({ symbol: 'NOPE', operation: 'Buy', volume: 0.01 }), 'TRADE_REQUEST_ERROR', 400],
      [() => acct.OrderClose({ ticket: 999_999 }), 'TRADE_REQUEST_ERROR', 400],
    ];
    for (const [call, code, status] of cases) {
      tries = 0;
      const err = await errorOf(call);
      expect(err).toBeInstanceOf(TagwError);
      expect(err).toMatchObject({ code, status });
      expect(tries).toBe(1);
    }
    // The same clientOrderId with other parameters: 422, the first order untouched.
    await acct.OrderSend({ symbol: 'BTCUSD', operation: 'Buy', volume: 0.01, clientOrderId: 'bad-input-reused' });
    tries = 0;
    const reused = await errorOf(() => acct.OrderSend({ symbol: 'BTCUSD', operation: 'Buy', volume: 0.02, clientOrderId: 'bad-input-reused' }));
    expect(reused).toMatchObject({ code: 'IDEMPOTENCY_KEY_REUSED', status: 422 });
    expect(tries).toBe(1);
  });
});
