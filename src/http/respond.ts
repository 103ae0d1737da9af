// Response helpers honouring uWS's rules: once onAborted fired the response must not be touched,
// and writes from async code go inside cork() so status, headers and body leave in one syscall.
import type { HttpResponse, us_socket_context_t } from 'uWebSockets.js';
import { type ApiError, STATUS_TEXT } from '../errors.js';
import { aroundAsyncUpgrade } from './corkAnchor.js';
import { CORS_EXPOSE_HEADERS } from './cors.js';

export interface Reply {
  status?: number;
  body: unknown;
  /** Send this text as is instead of JSON-encoding `body`. */
  raw?: string;
  contentType?: string;
  headers?: Record<string, string>;
}

/** Errors after which the connection is closed rather than kept: the rest of the request is not read, or cannot be framed. */
const closingErrors = new WeakSet<ApiError>();
/** Marks `e` as one whose answer closes the connection. */
export function closing(e: ApiError): ApiError {
  closingErrors.add(e);
  return e;
}
export const closesConnection = (e: ApiError) => closingErrors.has(e);

/** Status lines built once, not per response. */
const STATUS_LINE: Record<number, string> = {};
const statusLine = (status: number) => (STATUS_LINE[status] ??= `${status} ${STATUS_TEXT[status] ?? ''}`);

function writeCorsHeaders(res: HttpResponse, origin: string): void {
  res.writeHeader('access-control-allow-origin', origin);
  res.writeHeader('access-control-expose-headers', CORS_EXPOSE_HEADERS);
  res.writeHeader('vary', 'origin');
}

/**
 * What send() hands to the cork callback: cork runs it synchronously, so one module-level function
 * and one reused record serve every response (a closure per response was ~100 bytes of garbage).
 */
let corked: ResponseSink | undefined;
const corkedReply = { status: 200, body: '', headers: undefined as Record<string, string> | undefined, contentType: '', close: false };
function writeCorked(): void {
  const sink = corked!;
  const r = corkedReply;
  const { status, body, headers, contentType, close } = r;
  corked = undefined;
  r.body = '';
  r.headers = undefined;
  sink.writeInCork(status, body, headers, contentType, close);
}

export class ResponseSink {
  aborted = false;
  done = false;
  /** The request's Origin when it is on the CORS allowlist: the response carries CORS headers for it. */
  cors: string | undefined = undefined;
  /** Cluster mode: this node's id, sent as x-tagw-node (which node answered). */
  node: string | undefined = undefined;
  /** Sent back as x-request-id (src/http/requestId.ts). */
  requestId: string | undefined = undefined;
  private watching = false;
  /**
   * `watch` false: the caller calls watchAbort() itself once it knows the reply comes later.
   * `head`: the request is a HEAD, answered with status and headers only. uWS would write the body
   * anyway, and the client, which reads none after a HEAD, would take it for the start of the next
   * response on the connection.
   */
  constructor(readonly res: HttpResponse, watch = true, private readonly head = false) {
    if (watch) this.watchAbort();
  }

  /**
   * uWS needs onAborted registered before the route handler returns whenever the reply is sent
   * later; a reply sent inside the handler (a cached quote) needs none, which saves a native call
   * and a closure per request.
   */
  watchAbort(): void {
    if (this.watching) return;
    this.watching = true;
    this.res.onAborted(() => {
      this.aborted = true;
      if (this.abortHandlers) for (const f of this.abortHandlers.splice(0)) f();
    });
  }

  private abortHandlers: Array<() => void> | undefined;

  /** Runs `f` if the client goes away before the reply is sent (uWS takes one onAborted per response). */
  onAbort(f: () => void): void {
    (this.abortHandlers ??= []).push(f);
    this.watchAbort();
  }

  get open(): boolean {
    return !this.aborted && !this.done;
  }

  private paused = false;

  /**
   * The reply comes later: watch for the client going away, and stop reading the connection until
   * the reply is written. uWS (this build and upstream, by design) closes a connection when a
   * request arrives while the previous one's reply is pending, after that request may already have
   * been acted on; paused, a request the client pipelines in a later packet waits in the kernel and
   * is parsed once this reply went out, so replies leave in request order. (Requests that arrive in
   * the same packet are parsed before any of this can run: see `afterThisRead` in app.ts.)
   */
  deferred(): void {
    this.watchAbort();
    if (this.paused || !this.open) return;
    this.paused = true;
    this.res.pause();
  }

  send(status: number, body: string, headers: Record<string, string> | undefined, contentType = 'application/json', close = false): void {
    if (!this.open) return;
    this.done = true;
    // Before the end: uWS forbids touching a response once it ended.
    if (this.paused) this.res.resume();
    corked = this;
    corkedReply.status = status;
    corkedReply.body = body;
    corkedReply.headers = headers;
    corkedReply.contentType = contentType;
    corkedReply.close = close;
    this.res.cork(writeCorked);
  }

  /** Status, headers and body: only inside the cork that send() opened (see writeCorked). */
  writeInCork(status: number, body: string, headers: Record<string, string> | undefined, contentType: string, close: boolean): void {
    // uWS answers 200 OK when no status is written.
    if (status !== 200) this.res.writeStatus(statusLine(status));
    this.res.writeHeader('content-type', contentType);
    if (headers) for (const k in headers) this.res.writeHeader(k, headers[k]!);
    if (this.cors !== undefined) writeCorsHeaders(this.res, this.cors);
    if (this.requestId !== undefined) this.res.writeHeader('x-request-id', this.requestId);
    if (this.node !== undefined) this.res.writeHeader('x-tagw-node', this.node);
    if (this.head) {
      // The length is written by hand: this uWS build's endWithoutBody(length) leaves the
      // response unfinished. (No HEAD reaches a route that closes the connection.)
      this.res.writeHeader('content-length', String(Buffer.byteLength(body)));
      this.res.endWithoutBody();
    } else if (!close && body.length > STREAM_ABOVE_CHARS) {
      this.endStreamed(Buffer.from(body));
    } else {
      this.res.end(body, close);
    }
  }

  /**
   * A large answer (/openapi.json, ~420 KB; /metrics, ~17 KB) written only as fast as the client reads: what the
   * socket does not take at once is kept here, not in uWS's buffer, and sent from onWritable. While
   * it is pending, a request pipelined behind it in the same read makes uWS close the connection
   * (as for any reply that comes later), so a client that pipelines such requests and reads none
   * holds one answer, not one per request (2000 of them held ~830 MB: test/integration/http-pipelining-unread).
   */
  private endStreamed(body: Buffer): void {
    endStreamed(this.res, body, () => this.aborted, () => this.watchAbort());
  }

  /**
   * Writes the 101's status and x-tagw-node ahead of uWS's upgrade(), which writes its status only
   * when none was (a header written first would make it a 200). Inside the upgrade handler or a
   * cork, right before `res.upgrade`.
   */
  private upgradeHeaders(): void {
    if (this.node === undefined) return;
    this.res.writeStatus('101 Switching Protocols');
    this.res.writeHeader('x-tagw-node', this.node);
  }

  /** Completes a WebSocket upgrade inside uWS's upgrade handler, which is corked already and
   *  finishes the upgrade through its HTTP parser: no cork of its own, no anchor (upgradeLater). */
  upgradeNow<T>(userData: T, key: string, protocol: string, extensions: string, context: us_socket_context_t): void {
    this.done = true;
    this.upgradeHeaders();
    this.res.upgrade(userData, key, protocol, extensions, context);
  }

  /**
   * Completes a WebSocket upgrade from async code (after an await): every such upgrade goes through
   * here. Inside res.cork() (outside one uWS.js prints a warning at every upgrade), with another
   * socket of the thread corked around it, so this response's cork() cannot run its post-response
   * logic on the new WebSocket's memory (src/http/corkAnchor.ts says what that did: uWebSockets
   * issue 1928, a socket closed under its client with no frame). Upgrades inside uWS's upgrade
   * handler are not affected (uWS finishes them through the HTTP parser) and need neither.
   */
  upgradeLater<T>(userData: T, key: string, protocol: string, extensions: string, context: us_socket_context_t): void {
    this.done = true;
    aroundAsyncUpgrade(() => this.res.cork(() => {
      this.upgradeHeaders();
      this.res.upgrade(userData, key, protocol, extensions, context);
    }));
  }

  json(status: number, body: unknown, headers?: Record<string, string>, close = false): void {
    this.send(status, JSON.stringify(body), headers, 'application/json', close);
  }
}

/**
 * Ends `res` with `body` at the pace the client reads (ResponseSink.endStreamed says why): what the
 * socket does not take now is sent from onWritable. `watch` registers an onAborted (uWS requires one
 * for a reply still pending when the handler returns); `aborted` says whether it fired.
 */
export function endStreamed(res: HttpResponse, body: Buffer, aborted: () => boolean, watch: () => void): void {
  const start = res.getWriteOffset();
  const [ok, done] = res.tryEnd(body, body.length);
  if (ok || done) return;
  watch();
  res.onWritable((offset) => (aborted() ? true : res.tryEnd(body.subarray(offset - start), body.length)[0]));
}

/** Answers longer than this (in UTF-16 units, so at least as many bytes) are streamed (endStreamed). */
const STREAM_ABOVE_CHARS = 16 * 1024;

export function sendError(sink: ResponseSink, e: ApiError, close = false): void {
  sink.json(e.status, e.toBody(), e.headers, close);
}
