// Shared set-up of the gateway-route tests: broker accounts on the simulator's P4 and P5 servers,
// keys, sessions and a /ws client.
import WebSocket from 'ws';
import { expect } from 'vitest';
import { mgmt, type TestGateway } from './gateway.js';

export interface Acct { id: string; key: string; handle: string }

let login = 70_000 + Math.floor(Math.random() * 10_000);

export async function brokerAccount(t: TestGateway, platform: 'P4' | 'P5'): Promise<string> {
  const r = await t.req('POST', '/v1/broker-accounts', {
    headers: mgmt(t.managementKey),
    body: { platform, user: String(login++), password: 'secret-pw', server: platform === 'P5' ? 'Sim-P5-Demo' : 'Sim-P4-Demo' },
  });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return r.body.id as string;
}

export async function apiKey(t: TestGateway, seatId: string, opts: { readOnly?: boolean; accountScoped?: boolean } = {}): Promise<string> {
  const r = await t.req('POST', `/v1/seats/${seatId}/keys`, { headers: mgmt(t.managementKey), body: { label: 'gw', ...opts } });
  expect(r.status).toBe(201);
  return r.body.key as string;
}

export async function connect(t: TestGateway, id: string, key?: string): Promise<string> {
  const r = await t.req('POST', '/v1/connect', { headers: key ? { authorization: `Bearer ${key}` } : mgmt(t.managementKey), body: { brokerAccountId: id } });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body.handle as string;
}

export async function account(t: TestGateway, platform: 'P4' | 'P5'): Promise<Acct> {
  const id = await brokerAccount(t, platform);
  const key = await apiKey(t, id);
  return { id, key, handle: await connect(t, id) };
}

/** GET /v1/proxy/<op>?handle=...&<query> with the account's key. */
export function op(t: TestGateway, a: Acct, name: string, query: Record<string, string | number | boolean | string[]> = {}, key = a.key) {
  const qs = new URLSearchParams();
  qs.set('handle', a.handle);
  for (const [k, v] of Object.entries(query)) {
    if (Array.isArray(v)) for (const x of v) qs.append(k, x);
    else qs.set(k, String(v));
  }
  return t.req('GET', `/v1/proxy/${name}?${qs}`, { headers: { 'x-api-key': key } });
}

/** `yyyy-MM-ddTHH:mm:ss` on a server clock `offsetH` hours from UTC. */
export function serverTime(utcMs: number, offsetH: number): string {
  return new Date(utcMs + offsetH * 3_600_000).toISOString().slice(0, 19);
}

export interface WsClient {
  ws: WebSocket;
  frames: Array<{ type: string; data: any }>;
  closed: Promise<{ code: number; reason: string }>;
  waitFor(pred: (f: { type: string; data: any }) => boolean, timeoutMs?: number): Promise<{ type: string; data: any }>;
}

export async function openWs(t: Pick<TestGateway, 'url'>, handle: string, key: string): Promise<WsClient> {
  const ws = new WebSocket(`${t.url.replace('http', 'ws')}/ws?handle=${encodeURIComponent(handle)}`, { headers: { 'x-api-key': key } });
  const frames: WsClient['frames'] = [];
  const waiters: Array<() => void> = [];
  ws.on('message', (m) => {
    frames.push(JSON.parse(m.toString()));
    for (const w of waiters.splice(0)) w();
  });
  const closed = new Promise<{ code: number; reason: string }>((r) => ws.on('close', (code, reason) => r({ code, reason: reason.toString() })));
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('unexpected-response', (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)));
    ws.once('error', reject);
  });
  return {
    ws, frames, closed,
    waitFor: (pred, timeoutMs = 8_000) => new Promise((resolve, reject) => {
      const check = () => {
        const f = frames.find(pred);
        if (f) {
          clearTimeout(timer);
          resolve(f);
          return true;
        }
        return false;
      };
      const timer = setTimeout(() => reject(new Error(`no matching frame in ${timeoutMs} ms; got ${frames.map((f) => f.type).join(',')}`)), timeoutMs);
      const loop = () => {
        if (!check()) waiters.push(loop);
      };
      loop();
      // Closed (its frames all delivered before 'close'): none will come; say how it closed.
      void closed.then((c) => {
        if (check()) return;
        clearTimeout(timer);
        reject(new Error(`the socket closed (${c.code} ${c.reason}) with no matching frame; got ${frames.map((f) => f.type).join(',')}`));
      });
    }),
  };
}

/** The HTTP status a refused /ws upgrade answers. */
export function wsRefusal(t: TestGateway, query: string, headers: Record<string, string> = {}): Promise<number> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`${t.url.replace('http', 'ws')}/ws?${query}`, { headers });
    ws.once('unexpected-response', (_req, res) => {
      resolve(res.statusCode ?? 0);
      ws.terminate();
    });
    ws.once('open', () => {
      ws.close();
      reject(new Error('upgrade was accepted'));
    });
    ws.once('error', () => undefined);
  });
}
