// A minimal WebSocket client for the stream bench's load processes: handshake, then frames parsed
// straight off the TCP stream with no per-frame event, Buffer or string. `ws` costs several µs a
// frame, so at 100k frames/s two client processes saturated this 2-core machine and the latency
// measured was theirs. Not a general client: no fragmentation (uWS sends whole frames), no
// extensions; pings are answered, a close frame ends the socket.
import { randomBytes } from 'node:crypto';
import { connect, type Socket } from 'node:net';

export interface RawWs {
  /** A masked text frame. */
  send(text: string): void;
  /** Stops reading (a deliberately slow reader: the server's buffers for it fill up). */
  pause(): void;
  terminate(): void;
}

/** A text or binary frame's payload: buf[start, end). Valid only during the call. */
export type OnFrame = (buf: Buffer, start: number, end: number) => void;

export function maskedFrame(opcode: number, payload: Buffer): Buffer {
  const n = payload.length;
  const head = n < 126 ? 2 : n < 65_536 ? 4 : 10;
  const out = Buffer.allocUnsafe(head + 4 + n);
  out[0] = 0x80 | opcode;
  if (n < 126) out[1] = 0x80 | n;
  else if (n < 65_536) {
    out[1] = 0x80 | 126;
    out.writeUInt16BE(n, 2);
  } else {
    out[1] = 0x80 | 127;
    out.writeBigUInt64BE(BigInt(n), 2);
  }
  const mask = randomBytes(4);
  mask.copy(out, head);
  for (let i = 0; i < n; i++) out[head + 4 + i] = payload[i]! ^ mask[i & 3]!;
  return out;
}

export function openRawWs(url: string, onFrame: OnFrame): Promise<RawWs> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const sock: Socket = connect(Number(u.port), u.hostname);
    sock.setNoDelay(true);
    let pending: Buffer | null = null;
    let upgraded = false;
    const api: RawWs = {
      send: (text) => void sock.write(maskedFrame(0x1, Buffer.from(text))),
      pause: () => void sock.pause(),
      terminate: () => sock.destroy(),
    };
    sock.once('error', reject);
    sock.on('connect', () => {
      sock.write(`GET ${u.pathname}${u.search} HTTP/1.1\r\nHost: ${u.host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n`
        + `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\nSec-WebSocket-Version: 13\r\n\r\n`);
    });
    sock.on('data', (chunk: Buffer) => {
      let buf = pending ? Buffer.concat([pending, chunk]) : chunk;
      pending = null;
      let i = 0;
      if (!upgraded) {
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) {
          pending = buf;
          return;
        }
        const status = buf.toString('latin1', 0, buf.indexOf('\r\n'));
        if (!/^HTTP\/1\.1 101/.test(status)) {
          sock.destroy();
          reject(new Error(`upgrade refused: ${status}`));
          return;
        }
        upgraded = true;
        resolve(api);
        i = end + 4;
      }
      while (buf.length - i >= 2) {
        const opcode = buf[i]! & 0x0f;
        let len = buf[i + 1]! & 0x7f;
        let head = 2;
        if (len === 126) {
          if (buf.length - i < 4) break;
          len = buf.readUInt16BE(i + 2);
          head = 4;
        } else if (len === 127) {
          if (buf.length - i < 10) break;
          len = Number(buf.readBigUInt64BE(i + 2));
          head = 10;
        }
        if (buf.length - i < head + len) break;
        const start = i + head;
        const end = start + len;
        if (opcode === 0x1 || opcode === 0x2 || opcode === 0x0) onFrame(buf, start, end);
        else if (opcode === 0x9) sock.write(maskedFrame(0xa, buf.subarray(start, end)));
        else if (opcode === 0x8) {
          sock.destroy();
          return;
        }
        i = end;
      }
      if (i < buf.length) pending = buf.subarray(i);
      buf = chunk; // let the concatenated buffer go
    });
  });
}
