// A WebSocket handshake over a raw TCP socket, for what the `ws` client cannot do: choose the
// handshake's Connection header, and tell a socket the server closed right after its 101 (no
// close frame) from one it closed with a code.
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { maskedFrame } from '../../bench/lib/rawWs.js';
import { parseResponses } from './rawHttp.js';

export interface RawUpgrade {
  /** The handshake's answer: 101, or the refusal's status. */
  status: number;
  /** A refusal's JSON body. */
  body: any;
  /** Text frames received so far. */
  frames: string[];
  /** The close frame's code, if the server sent one. */
  closeCode: number | null;
  /** Resolves when the TCP connection ends. */
  ended: Promise<void>;
  isEnded(): boolean;
  sendText(text: string): void;
  /** Resolves with the first frame matching `pred`; rejects when the connection ends first or after timeoutMs. */
  waitFor(pred: (text: string) => boolean, timeoutMs?: number): Promise<string>;
  destroy(): void;
}

export function rawUpgrade(baseUrl: string, path: string, o: { connection?: string; headers?: Record<string, string> } = {}): Promise<RawUpgrade> {
  const u = new URL(baseUrl);
  const sock = net.connect(Number(u.port), u.hostname);
  sock.setNoDelay(true);
  let buf: Buffer = Buffer.alloc(0);
  let ended = false;
  const frames: string[] = [];
  const waiters = new Set<() => void>();
  const wake = () => { for (const w of [...waiters]) w(); };
  const endedP = new Promise<void>((r) => sock.once('close', () => { ended = true; wake(); r(); }));
  sock.on('error', () => undefined);
  return new Promise((resolve, reject) => {
    const up: RawUpgrade = {
      status: 0, body: undefined, frames, closeCode: null, ended: endedP,
      isEnded: () => ended,
      sendText: (text) => void sock.write(maskedFrame(0x1, Buffer.from(text))),
      destroy: () => sock.destroy(),
      waitFor: (pred, timeoutMs = 8_000) => new Promise((res, rej) => {
        const check = () => {
          const f = frames.find(pred);
          if (f !== undefined || ended) {
            waiters.delete(check);
            clearTimeout(timer);
            if (f !== undefined) res(f);
            else rej(new Error(`the connection ended (close frame: ${up.closeCode ?? 'none'}) with no matching frame; got ${JSON.stringify(frames)}`));
          }
        };
        const timer = setTimeout(() => { waiters.delete(check); rej(new Error(`no matching frame in ${timeoutMs} ms; got ${JSON.stringify(frames)}`)); }, timeoutMs);
        waiters.add(check);
        check();
      }),
    };
    endedP.then(() => { if (up.status === 0) reject(new Error('the connection ended before any answer to the handshake')); });
    sock.on('connect', () => {
      const extra = Object.entries(o.headers ?? {}).map(([k, v]) => `${k}: ${v}\r\n`).join('');
      sock.write(`GET ${path} HTTP/1.1\r\nHost: ${u.host}\r\nUpgrade: websocket\r\nConnection: ${o.connection ?? 'Upgrade'}\r\n`
        + `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\nSec-WebSocket-Version: 13\r\n${extra}\r\n`);
    });
    sock.on('data', (chunk: Buffer) => {
      buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
      if (up.status === 0) {
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        up.status = Number(/^HTTP\/1\.1 (\d{3})/.exec(buf.toString('latin1', 0, end))?.[1] ?? NaN);
        if (up.status !== 101) {
          const parsed: Parameters<typeof parseResponses>[1] = [];
          buf = parseResponses(buf, parsed);
          if (parsed.length === 0) {
            up.status = 0; // the refusal's body is still on its way
            return;
          }
          up.body = parsed[0]!.json;
          resolve(up);
          return;
        }
        buf = buf.subarray(end + 4);
        resolve(up);
      }
      while (buf.length >= 2) {
        const opcode = buf[0]! & 0x0f;
        let len = buf[1]! & 0x7f;
        let head = 2;
        if (len === 126) {
          if (buf.length < 4) break;
          len = buf.readUInt16BE(2);
          head = 4;
        } else if (len === 127) {
          if (buf.length < 10) break;
          len = Number(buf.readBigUInt64BE(2));
          head = 10;
        }
        if (buf.length < head + len) break;
        const payload = buf.subarray(head, head + len);
        if (opcode === 0x1) frames.push(payload.toString('utf8'));
        else if (opcode === 0x9) sock.write(maskedFrame(0xa, payload));
        else if (opcode === 0x8) up.closeCode = len >= 2 ? payload.readUInt16BE(0) : 1005;
        buf = buf.subarray(head + len);
      }
      wake();
    });
  });
}
