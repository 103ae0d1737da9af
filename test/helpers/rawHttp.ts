// HTTP/1.1 over a raw TCP socket, for what fetch cannot do: pipelining, malformed framing, bodies
// the server refuses mid-way. Responses are framed by Content-Length (all the gateway sends).
import net from 'node:net';

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
  /** The body parsed as JSON, if it is JSON. */
  json: any;
}

export interface RawConnection {
  socket: net.Socket;
  write(data: string | Buffer): void;
  /** Responses parsed so far, in the order they arrived. */
  responses: RawResponse[];
  /** Resolves once `n` responses arrived; rejects if the connection ends first (with what arrived). */
  waitFor(n: number): Promise<RawResponse[]>;
  /** Resolves when the server closed the connection: 'end' (FIN) or 'reset' (ECONNRESET). */
  closed: Promise<'end' | 'reset'>;
  /** Bytes received that are not (yet) a whole response. */
  rest(): string;
  end(): void;
}

export function parseResponses(buf: Buffer, out: RawResponse[]): Buffer {
  for (;;) {
    const headEnd = buf.indexOf('\r\n\r\n');
    if (headEnd < 0) return buf;
    const lines = buf.subarray(0, headEnd).toString('latin1').split('\r\n');
    const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? '')?.[1] ?? NaN);
    const headers: Record<string, string> = {};
    for (const l of lines.slice(1)) {
      const i = l.indexOf(':');
      if (i > 0) headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
    }
    // 1xx (100 Continue) carries no body and is not the final response.
    const length = status >= 100 && status < 200 ? 0 : Number(headers['content-length'] ?? 0);
    if (buf.length < headEnd + 4 + length) return buf;
    const body = buf.subarray(headEnd + 4, headEnd + 4 + length).toString('utf8');
    let json: unknown;
    try {
      json = body ? JSON.parse(body) : undefined;
    } catch {
      json = undefined;
    }
    out.push({ status, headers, body, json });
    buf = buf.subarray(headEnd + 4 + length);
  }
}

/** `localAddress`: the client's own address (any of 127.0.0.0/8 on Linux), to tell clients apart by IP. */
export function rawConnect(port: number, host = '127.0.0.1', localAddress?: string): Promise<RawConnection> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ port, host, ...(localAddress ? { localAddress } : {}) });
    socket.setNoDelay(true);
    const responses: RawResponse[] = [];
    let buf: Buffer = Buffer.alloc(0);
    const waiters: Array<{ n: number; resolve: (r: RawResponse[]) => void; reject: (e: Error) => void }> = [];
    let ended = false;
    const settle = () => {
      for (const w of waiters.splice(0)) {
        if (responses.length >= w.n) w.resolve(responses.slice(0, w.n));
        else if (ended) w.reject(new Error(`connection closed after ${responses.length} of ${w.n} responses; rest: ${JSON.stringify(buf.toString('latin1').slice(0, 300))}`));
        else waiters.push(w);
      }
    };
    socket.on('data', (d: Buffer) => {
      buf = parseResponses(Buffer.concat([buf, d]), responses);
      settle();
    });
    const closed = new Promise<'end' | 'reset'>((res) => {
      let how: 'end' | 'reset' = 'end';
      socket.on('error', (e: NodeJS.ErrnoException) => {
        if (e.code === 'ECONNRESET' || e.code === 'EPIPE') how = 'reset';
      });
      socket.on('close', () => {
        ended = true;
        settle();
        res(how);
      });
    });
    socket.once('connect', () =>
      resolve({
        socket, responses, closed,
        write: (data) => socket.write(data),
        waitFor: (n) => new Promise((res, rej) => {
          waiters.push({ n, resolve: res, reject: rej });
          settle();
        }),
        rest: () => buf.toString('latin1'),
        end: () => socket.end(),
      }));
    socket.once('error', reject);
  });
}

/** A GET request's bytes. */
export function rawGet(path: string, headers: Record<string, string> = {}): string {
  return `GET ${path} HTTP/1.1\r\nHost: t\r\n${Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n`;
}
