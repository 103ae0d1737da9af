// A WebSocket that comes back: opens, watches for silence, and reopens with jittered backoff after
// any close it did not ask for. The stream and gateway-socket clients build on it; what a frame
// means is theirs. Works with the browser's WebSocket and with `ws` in Node (injected).
import type { SOCKET_CLOSE } from '../stream/closeCodes.js';
import { type BackoffOptions, retryWait } from './backoff.js';
import type { ClosedVerdict } from './errors.js';

type Code<K extends keyof typeof SOCKET_CLOSE> = (typeof SOCKET_CLOSE)[K]['code'];
/** The close codes the SDK acts on, typed against the server's table (a change there fails the type check). */
export const CLOSE: { readonly KEY_REVOKED: Code<'KEY_REVOKED'>; readonly SESSION_ENDED: Code<'SESSION_ENDED'> } = { KEY_REVOKED: 4001, SESSION_ENDED: 4013 };

/** What the SDK uses of a WebSocket: the browser API, which `ws` implements too. */
export interface WebSocketLike {
  readonly readyState: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  onopen: ((ev: any) => void) | null;
  onmessage: ((ev: any) => void) | null;
  onclose: ((ev: any) => void) | null;
  onerror: ((ev: any) => void) | null;
}
/** The browser's WebSocket, or one that also takes `{ headers }` as its second argument (`ws`, undici's):
 *  the SDK passes that only when the client sends the key as a header (`webSocketKey`). */
export type WebSocketConstructor = new (url: string, options?: any) => WebSocketLike;

/** Where the next attempt goes, and the headers of its upgrade (the API key, when it goes as one). */
export interface SocketTarget {
  url: string;
  headers?: Record<string, string> | undefined;
}

export type SocketState = 'connecting' | 'open' | 'reconnecting' | 'closed';

export interface SocketHooks {
  /** The URL of the next attempt (it may carry a resume position); a throw ends the socket. */
  url(): Promise<SocketTarget>;
  opened(send: (msg: unknown) => void): void;
  frame(text: string): void;
  /** The socket cannot be opened at all (its URL could not be made, the WebSocket constructor threw:
   *  a bad URL, a browser refusing ws:// from an https page): it has stopped, for good. */
  failed(error: unknown, withHeaders: boolean): void;
  /** A close the socket did not ask for; return 'stop' for codes that retrying cannot fix, and the
   *  wait the gateway asked for (retry-after) when it said one. */
  closed(code: number, reason: string, everOpened: boolean): Promise<ClosedVerdict> | ClosedVerdict;
  state?(s: SocketState, detail?: { code?: number; reason?: string; delayMs?: number }): void;
}

export interface SocketOptions {
  WebSocket: WebSocketConstructor;
  backoff: BackoffOptions;
  /** No frame at all for this long: the connection is taken as dead (a stall) and replaced. 0 = off. */
  silenceMs: number;
  /** An upgrade not answered within this long (a frozen gateway, a black-holed route: TCP connects,
   *  nothing comes back) is given up and tried again. */
  connectTimeoutMs: number;
  /** A connection open at least this long was healthy: the next failure's backoff starts from the
   *  bottom again. Default: the backoff's `maxMs`. */
  healthyMs?: number;
  random?: () => number;
}

const decoder = new TextDecoder();
function textOf(data: unknown): string {
  if (typeof data === 'string') return data;
  if (data instanceof ArrayBuffer) return decoder.decode(data);
  if (ArrayBuffer.isView(data)) return decoder.decode(data as Uint8Array);
  return String(data);
}

export class ReconnectingSocket {
  private sock: WebSocketLike | null = null;
  private attempt = 0;
  private stopped = false;
  private silenceTimer: ReturnType<typeof setTimeout> | null = null;
  private retryTimer: ReturnType<typeof setTimeout> | null = null;
  private connectTimer: ReturnType<typeof setTimeout> | null = null;
  private lastFrameAt = 0;
  /** When the current connection opened (0: it has not). */
  private openedAt = 0;
  /** Times a connection was replaced (stall, close, gap): for tests and metrics. */
  reconnects = 0;

  constructor(private readonly o: SocketOptions, private readonly h: SocketHooks) {}

  start(): void {
    void this.open();
  }

  send(msg: unknown): boolean {
    const s = this.sock;
    if (!s || s.readyState !== 1) return false;
    s.send(typeof msg === 'string' ? msg : JSON.stringify(msg));
    return true;
  }

  /** Drops the current connection (if any) and opens a new one at once: used on a gap. */
  restart(reason: string): void {
    if (this.stopped) return;
    this.abandon(4000, reason);
    this.reconnects++;
    this.h.state?.('reconnecting', { reason });
    void this.open();
  }

  close(): void {
    if (this.stopped) return;
    this.stopped = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.abandon(1000, 'client closed');
    this.h.state?.('closed');
  }

  private async open(): Promise<void> {
    if (this.stopped) return;
    this.h.state?.('connecting');
    let sock: WebSocketLike;
    let withHeaders = false;
    try {
      const target = await this.h.url();
      if (this.stopped) return;
      withHeaders = target.headers !== undefined;
      sock = target.headers ? new this.o.WebSocket(target.url, { headers: target.headers }) : new this.o.WebSocket(target.url);
    } catch (e) {
      // Nothing a retry changes: said once, and stopped (a throw here was an unhandled rejection).
      this.close();
      this.h.failed(e, withHeaders);
      return;
    }
    let everOpened = false;
    this.sock = sock;
    this.connectTimer = setTimeout(() => {
      this.connectTimer = null;
      if (this.sock !== sock || everOpened) return;
      this.abandon(4000, 'upgrade not answered');
      this.scheduleRetry(undefined, `no answer to the upgrade within ${this.o.connectTimeoutMs} ms`);
    }, this.o.connectTimeoutMs);
    this.openedAt = 0;
    sock.onopen = () => {
      everOpened = true;
      this.openedAt = Date.now();
      this.clearConnect();
      this.armSilence();
      this.h.state?.('open');
      this.h.opened((m) => sock.send(typeof m === 'string' ? m : JSON.stringify(m)));
    };
    sock.onmessage = (ev: { data: unknown }) => {
      this.lastFrameAt = Date.now();
      this.h.frame(textOf(ev.data));
    };
    sock.onerror = () => undefined; // the close event that follows says what happened
    sock.onclose = (ev: { code?: number; reason?: string }) => {
      if (this.sock !== sock) return;
      this.sock = null;
      this.clearSilence();
      this.clearConnect();
      void this.afterClose(ev.code ?? 1006, ev.reason ?? '', everOpened);
    };
  }

  private async afterClose(code: number, reason: string, everOpened: boolean): Promise<void> {
    if (this.stopped) return;
    const verdict = await this.h.closed(code, reason, everOpened);
    if (verdict === 'stop') {
      this.close();
      return;
    }
    this.scheduleRetry(code, reason, verdict === 'retry' ? 0 : verdict.retryAfterMs);
  }

  private scheduleRetry(code?: number, reason?: string, atLeastMs = 0): void {
    if (this.stopped) return;
    // The backoff starts from the bottom again after a connection that stayed open a while, not after
    // any frame: a gateway answering each connection with an ERROR frame and a close (4010, the
    // account's stream not set up) got a new one from every client each 100-200 ms for as long as
    // that lasted.
    if (this.openedAt > 0 && Date.now() - this.openedAt >= (this.o.healthyMs ?? this.o.backoff.maxMs)) this.attempt = 0;
    this.openedAt = 0;
    const delayMs = retryWait(this.attempt++, this.o.backoff, this.o.random ?? Math.random, atLeastMs);
    this.reconnects++;
    this.h.state?.('reconnecting', { ...(code !== undefined ? { code } : {}), ...(reason !== undefined ? { reason } : {}), delayMs });
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      void this.open();
    }, delayMs);
  }

  /** Stops listening to the current socket and closes it without waiting for its close frame (a
   *  stalled TCP connection would never deliver one). */
  private abandon(code: number, reason: string): void {
    const s = this.sock;
    this.sock = null;
    this.clearSilence();
    this.clearConnect();
    if (!s) return;
    s.onopen = s.onmessage = s.onclose = null;
    s.onerror = () => undefined;
    const t = (s as { terminate?: () => void }).terminate;
    try {
      if (typeof t === 'function') t.call(s);
      else s.close(code, reason);
    } catch {
      // Closing a socket that never finished opening can throw in some runtimes; it is gone either way.
    }
  }

  private armSilence(): void {
    if (this.o.silenceMs <= 0) return;
    this.lastFrameAt = Date.now();
    const check = () => {
      const quietFor = Date.now() - this.lastFrameAt;
      if (quietFor >= this.o.silenceMs) {
        this.silenceTimer = null;
        this.abandon(4000, 'silent');
        this.scheduleRetry(4000, `no frame for ${quietFor} ms (heartbeat timeout)`);
        return;
      }
      this.silenceTimer = setTimeout(check, this.o.silenceMs - quietFor);
    };
    this.silenceTimer = setTimeout(check, this.o.silenceMs);
  }

  private clearConnect(): void {
    if (this.connectTimer) clearTimeout(this.connectTimer);
    this.connectTimer = null;
  }

  private clearSilence(): void {
    if (this.silenceTimer) clearTimeout(this.silenceTimer);
    this.silenceTimer = null;
  }
}
