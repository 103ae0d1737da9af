// A gateway-route session (SPEC §4.3-4.5): POST /v1/connect -> handle -> /v1/proxy/<Operation>
// calls and the `/ws?handle=` socket of its pushes. The session renews its handle when the gateway
// no longer knows it (404 SESSION_NOT_FOUND: disconnected, or the account re-bound), repeats the
// subscriptions made through it, and its socket comes back after drops like the stream's.
import type { BackoffOptions } from './backoff.js';
import { type ClosedVerdict, refusalOf, socketError, TagwError } from './errors.js';
import type { GatewayFrame, GatewayFrameOf } from './frames.js';
import type { CallOptions, Transport } from './http.js';
import { FrameChannel, LATEST_MARKET_DATA } from './queue.js';
import { PROXY_OPERATIONS } from './routes.js';
import { CLOSE, ReconnectingSocket, type SocketState, type WebSocketConstructor } from './socket.js';
import { DEFAULT_CONNECT_TIMEOUT_MS, DEFAULT_STREAM_BACKOFF, wsUrl } from './stream.js';
import type { Json, ProxyOperation, ProxyParams } from './types.js';

type ProxyArgs<O extends ProxyOperation> = {} extends ProxyParams<O> ? [params?: ProxyParams<O>, options?: CallOptions] : [params: ProxyParams<O>, options?: CallOptions];
/** One method per gateway operation: `session.op.GetQuote({ symbol: 'EURUSD' })`. */
export type ProxyApi = { [O in ProxyOperation]: (...args: ProxyArgs<O>) => Promise<Json> };

export interface GatewaySocketOptions {
  /** No frame for this long and the socket is replaced. Default 0 (off): /ws sends no heartbeats,
   *  so a quiet subscription would look dead; set it above your slowest subscription's interval. */
  silenceMs?: number;
  /** An upgrade not answered within this long is given up and tried again. Default 10 s. */
  connectTimeoutMs?: number;
  backoff?: Partial<BackoffOptions>;
  /** A `for await` slower than the socket gets the newest QUOTE/BOOK of each symbol and CANDLE of each
   *  bar series, not a backlog (a bar's closed frame is kept). Default true, as on the stream. */
  coalesce?: boolean;
}

export type GatewaySocketEvents = {
  state: [SocketState, { code?: number; reason?: string; delayMs?: number } | undefined];
  error: [TagwError];
};

export class GatewaySession {
  readonly op: ProxyApi;
  private current: string;
  /** Subscribe* calls made through this session, replayed on a renewed handle. */
  private readonly subscriptions = new Map<string, [ProxyOperation, Record<string, unknown>]>();
  private renewing: Promise<string> | null = null;

  constructor(private readonly t: Transport, private readonly WebSocket: WebSocketConstructor | undefined, readonly brokerAccountId: string, handle: string, private readonly random?: () => number) {
    this.current = handle;
    const op = {} as Record<string, (p?: Record<string, unknown>, o?: CallOptions) => Promise<Json>>;
    for (const name of Object.keys(PROXY_OPERATIONS) as ProxyOperation[]) op[name] = (p, o) => this.call(name, (p ?? {}) as never, o);
    this.op = op as unknown as ProxyApi;
  }

  get handle(): string {
    return this.current;
  }

  /** Calls an operation. A read is retried like any safe call; a trade operation (it carries no
   *  idempotency id) is never re-sent after a lost answer: check OpenedOrders instead. */
  async call<O extends ProxyOperation>(op: O, params: ProxyParams<O> | Record<string, never> = {}, opts: CallOptions = {}): Promise<Json> {
    const kind = PROXY_OPERATIONS[op];
    const p = params as Record<string, unknown>;
    const once = (handle: string) => this.t.call<Json>({
      method: 'GET', path: `/v1/proxy/${op}`, auth: 'api', safety: kind === 'trade' ? 'unsafe' : 'safe', query: { ...(p as Record<string, never>), handle }, signal: opts.signal,
    });
    let r;
    try {
      r = await once(this.current);
    } catch (e) {
      // An unknown handle means nothing was done: renew it and try once more (a trade too).
      if (!(e instanceof TagwError && e.code === 'SESSION_NOT_FOUND') || op === 'Disconnect') throw e;
      r = await once(await this.renew(this.current));
    }
    if (kind === 'subscribe') this.remember(op, p);
    if (op === 'Disconnect') this.subscriptions.clear();
    return r.body;
  }

  /** A fresh handle (POST /v1/connect), unless another caller renewed `stale` already. */
  renew(stale: string): Promise<string> {
    if (this.current !== stale) return Promise.resolve(this.current);
    this.renewing ??= (async () => {
      try {
        const r = await this.t.call<{ handle: string }>({ method: 'POST', path: '/v1/connect', auth: 'api', safety: 'safe', body: { brokerAccountId: this.brokerAccountId } });
        this.current = r.body.handle;
        for (const [op, p] of this.subscriptions.values()) {
          await this.t.call({ method: 'GET', path: `/v1/proxy/${op}`, auth: 'api', safety: 'safe', query: { ...(p as Record<string, never>), handle: this.current } });
        }
        return this.current;
      } finally {
        this.renewing = null;
      }
    })();
    return this.renewing;
  }

  /** The `/ws` socket of this session's pushes (QUOTE, CANDLE, BOOK), reconnecting. */
  socket(o: GatewaySocketOptions = {}): GatewaySocketClient {
    if (!this.WebSocket) throw new TagwError({ code: 'NO_WEBSOCKET', status: 0, message: 'no WebSocket: pass one to new TagwClient({ WebSocket }) (Node 20: the `ws` package)' });
    return new GatewaySocketClient(this, this.t, this.WebSocket, o, this.random);
  }

  private remember(op: ProxyOperation, p: Record<string, unknown>): void {
    const symbols = p.symbol ?? p.symbols;
    const key = `${op.replace(/^Un[Ss]ubscribe/, 'Subscribe')}|${JSON.stringify(symbols ?? '*')}|${String(p.timeframe ?? '')}`;
    if (/^Un[Ss]ubscribe/.test(op)) {
      if (symbols === undefined) this.subscriptions.clear();
      else this.subscriptions.delete(key);
    } else {
      this.subscriptions.set(key, [op, p]);
    }
  }
}

export class GatewaySocketClient implements AsyncIterable<GatewayFrame> {
  private readonly channel: FrameChannel<GatewayFrame, GatewaySocketEvents>;
  private readonly sock: ReconnectingSocket;
  /** The HTTP question in flight about a refused upgrade or an ended session: close() aborts it. */
  private probe: AbortController | null = null;
  private readonly untrack: () => void;

  constructor(private readonly session: GatewaySession, t: Transport, WebSocket: WebSocketConstructor, o: GatewaySocketOptions, random?: () => number) {
    t.socketAuth(); // no API key: refused now
    this.channel = new FrameChannel<GatewayFrame, GatewaySocketEvents>(() => this.close(), undefined, o.coalesce === false ? undefined : LATEST_MARKET_DATA);
    this.sock = new ReconnectingSocket(
      { WebSocket, backoff: { ...DEFAULT_STREAM_BACKOFF, ...o.backoff }, silenceMs: o.silenceMs ?? 0, connectTimeoutMs: o.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS, ...(random ? { random } : {}) },
      {
        url: async () => {
          const auth = t.socketAuth();
          return { url: `${wsUrl(t.baseUrl)}/ws?${new URLSearchParams({ handle: this.session.handle, ...auth.query })}`, headers: auth.headers };
        },
        opened: () => undefined,
        frame: (text) => {
          try {
            this.channel.push(JSON.parse(text) as GatewayFrame);
          } catch {
            // not a frame
          }
        },
        closed: (code, reason, everOpened) => this.onClosed(code, reason, everOpened),
        failed: (e, withHeaders) => this.fail(socketError(e, withHeaders)),
        state: (s, d) => this.channel.emit('state', s, d),
      },
    );
    this.untrack = t.track(this);
    this.sock.start();
  }

  get reconnects(): number {
    return this.sock.reconnects;
  }

  on<T extends GatewayFrame['type']>(type: T, listener: (frame: GatewayFrameOf<T>) => void): () => void;
  on(type: '*', listener: (frame: GatewayFrame) => void): () => void;
  on(type: string, listener: (frame: any) => void): () => void {
    return this.channel.onFrame(type, listener);
  }

  onEvent<K extends keyof GatewaySocketEvents>(event: K, listener: (...args: GatewaySocketEvents[K]) => void): () => void {
    return this.channel.onEvent(event, listener);
  }

  close(): void {
    this.untrack();
    this.probe?.abort();
    this.sock.close();
    this.channel.end();
  }

  [Symbol.asyncIterator](): AsyncIterator<GatewayFrame> {
    return this.channel[Symbol.asyncIterator]();
  }

  private async onClosed(code: number, reason: string, everOpened: boolean): Promise<ClosedVerdict> {
    if (code === CLOSE.KEY_REVOKED) return this.fail(new TagwError({ code: 'KEY_REVOKED', status: 401, message: reason || 'API key revoked' }));
    if (code !== CLOSE.SESSION_ENDED && everOpened) return 'retry';
    // Session ended (4013) or the upgrade refused: find out over HTTP. An unknown handle is renewed
    // (and its subscriptions made again); a key or scope refusal ends the socket.
    const probe = (this.probe = new AbortController());
    const refused = await refusalOf(() => this.session.call('ConnectionStatus', {}, { signal: probe.signal }));
    if (this.probe === probe) this.probe = null;
    if (probe.signal.aborted) return 'stop';
    if (refused.final) return this.fail(refused.final);
    return refused.retryAfterMs !== undefined ? { retryAfterMs: refused.retryAfterMs } : 'retry';
  }

  private fail(e: TagwError): 'stop' {
    this.channel.fail(e);
    return 'stop';
  }
}
