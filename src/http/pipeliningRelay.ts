// The pipelining listener (HTTP_PIPELINING_PORT, opt-in): Node's own HTTP/1.1 server, whose parser
// takes pipelined requests and whose responses leave in request order, relaying each request to
// the gateway's uWS app over keep-alive connections to a private Unix socket of that app. uWS (this build, and upstream by
// design) closes a connection on which a request arrives while a reply is pending; here uWS only
// ever sees one request at a time per relayed connection, so every pipelined request is answered.
//
// The requests of one client connection run one after the other, in the order sent (RFC 9112
// §9.3.2: a pipelined order must not overtake the one before it); different connections run in
// parallel. The client's address reaches the auth throttle, rate limits and logs through one
// header with a per-process secret (src/http/clientAddress.ts); what the client sends under that
// name is dropped. Everything else (auth, body limits, metrics per route, draining) is the uWS
// app's own handling of the relayed request, the same as on the main port.
import { readFileSync } from 'node:fs';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import https from 'node:https';
import net from 'node:net';
import tls from 'node:tls';
import { ConfigError, type Config } from '../config.js';
import { apiError, type ApiError } from '../errors.js';
import type { Logger } from '../log.js';
import { errorMessage } from '../util/errorMessage.js';
import { SHUTDOWN_RETRY_AFTER_S, shuttingDown } from './admission.js';
import { RELAY_HEADER, type ClientAddress } from './clientAddress.js';
import { uwsAddressText } from '../util/ipAddress.js';
import { tlsFilesOf, type Listener, type TlsFiles } from './listener.js';
import type { Metrics } from './metrics.js';
import { requestIdOf } from './requestId.js';

export interface RelayOptions {
  /** The uWS app's private Unix socket (src/http/listener.ts listenPrivate); TLS when `tls` is set. */
  upstreamPath: string;
  /** The same certificate as the main listener; undefined: plain HTTP. */
  tls: TlsFiles | undefined;
  /** Holds the relay secret. */
  address: ClientAddress;
  log: Logger;
}

/** Hop-by-hop request headers (RFC 9110 §7.6.1), Expect (Node answered 100 Continue already) and the relay's own header. */
const DROPPED_REQUEST = new Set(['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'upgrade', 'expect', RELAY_HEADER]);
const DROPPED_RESPONSE = new Set(['connection', 'keep-alive', 'transfer-encoding']);

/** Node keeps idle upstream sockets this long: less than uWS's own 10 s HTTP idle timeout, so a reused socket is never one uWS is closing. */
const UPSTREAM_IDLE_MS = 5_000;
/** Matches uWS's idle timeouts on the main port: headers within 10 s, an idle keep-alive connection closed after 10 s. */
const HEADERS_TIMEOUT_MS = 10_000;
const KEEP_ALIVE_MS = 10_000;
/**
 * Requests queued on one connection before it is read no further (Node's own flood guard counts
 * bytes of answers, and queued requests have none yet); reading resumes below half of it. What
 * was already read is parsed first, so the queue can pass this by one read's worth (64 KiB).
 */
const MAX_QUEUED = 256;
/** At shutdown, how long the listen socket stays open at most while connections keep arriving (each turn of the event loop accepts one). */
const ACCEPT_BACKLOG_BOUND_MS = 2_000;
/** At shutdown, how long connections ended by the relay (FIN) may stay open for their client to close them: what it still sends is read, not left to a reset. */
const CLOSE_LINGER_MS = 1_000;

/**
 * One turn of the event loop, a poll phase included: the second setImmediate runs in the check
 * phase of the turn after the first one's.
 */
const nextTurn = () => new Promise<void>((resolve) => setImmediate(() => setImmediate(resolve)));

/** The raw header pairs of `raw` without the names in `dropped` nor those the Connection header lists. */
function keptHeaders(raw: readonly string[], dropped: ReadonlySet<string>): string[] {
  let listed: Set<string> | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i]!.toLowerCase() === 'connection') {
      for (const t of raw[i + 1]!.split(',')) (listed ??= new Set()).add(t.trim().toLowerCase());
    }
  }
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    if (dropped.has(name) || listed?.has(name)) continue;
    out.push(raw[i]!, raw[i + 1]!);
  }
  return out;
}

interface Conn {
  socket: net.Socket;
  queue: Array<{ req: IncomingMessage; res: ServerResponse }>;
  busy: boolean;
  /** No more requests run on this connection (it closed, or an answer closed it). */
  stopped: boolean;
  /** Node's parser refused what followed the queued requests: answered once they are. */
  refusal?: NodeJS.ErrnoException;
  /** Reading stopped: MAX_QUEUED requests wait. */
  paused: boolean;
}

export class PipeliningRelay {
  /** Requests received (/metrics). */
  requests = 0;
  private readonly server: http.Server;
  private readonly agent: http.Agent;
  private readonly request: typeof http.request;
  private readonly conns = new WeakMap<net.Socket, Conn>();
  /** Open connections, as accepted (for TLS, the TCP sockets under `httpSockets`). */
  private readonly sockets = new Set<net.Socket>();
  /** Open connections as the HTTP server reads them (the TLS sockets, with TLS): the keys of `conns`. */
  private readonly httpSockets = new Set<net.Socket>();
  /** Connections accepted so far: stopAccepting closes the listen socket after a turn that accepted none. */
  private accepted = 0;
  /** The gateway stopped accepting: requests read from now on are answered 503 here, not relayed. */
  private closing = false;
  /** Called when the last connection closed (endConnections waits for it). */
  private onAllClosed: (() => void) | undefined;

  constructor(private readonly o: RelayOptions) {
    // Host is checked here (forward), so that its absence gets a JSON answer like every refusal.
    const serverOptions: http.ServerOptions = { keepAliveTimeout: KEEP_ALIVE_MS, headersTimeout: HEADERS_TIMEOUT_MS, requestTimeout: 0, noDelay: true, requireHostHeader: false };
    const onRequest = (req: IncomingMessage, res: ServerResponse) => this.onRequest(req, res);
    this.server = o.tls ? https.createServer({ ...serverOptions, ...secureOptions(o.tls) }, onRequest) : http.createServer(serverOptions, onRequest);
    // The peer is this process's own Unix socket, in a directory only this user can enter: nothing to verify.
    const agentOptions = { keepAlive: true, timeout: UPSTREAM_IDLE_MS, scheduling: 'lifo' as const, rejectUnauthorized: false };
    this.agent = o.tls ? new https.Agent(agentOptions) : new http.Agent(agentOptions);
    this.request = o.tls ? https.request : http.request;
    this.server.on('connection', (s: net.Socket) => {
      this.accepted++;
      this.sockets.add(s);
      s.once('close', () => {
        this.sockets.delete(s);
        if (this.sockets.size === 0) this.onAllClosed?.();
      });
    });
    this.server.on(o.tls ? 'secureConnection' : 'connection', (s: net.Socket) => {
      this.httpSockets.add(s);
      s.once('close', () => this.httpSockets.delete(s));
    });
    this.server.on('upgrade', (req: IncomingMessage, socket: net.Socket, head: Buffer) => this.onUpgrade(req, socket, head));
    this.server.on('clientError', (err: NodeJS.ErrnoException, socket: net.Socket) => {
      const c = this.conns.get(socket);
      // Requests before the bad one still run and are answered first, in order.
      if (c?.busy) c.refusal = err;
      else refuseFraming(err, socket);
    });
  }

  /** Open connections (/metrics). */
  get connections(): number {
    return this.sockets.size;
  }

  /** Requests read and not answered yet: queued behind another on their connection, or on their way to the app (shutdown waits for them). */
  get pending(): number {
    let n = 0;
    for (const s of this.httpSockets) {
      const c = this.conns.get(s);
      if (c) n += (c.busy ? 1 : 0) + c.queue.length;
    }
    return n;
  }

  /** Listens on host:port; the port bound. */
  listen(host: string, port: number): Promise<number> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen({ host, port, exclusive: true }, () => {
        this.server.off('error', reject);
        resolve((this.server.address() as net.AddressInfo).port);
      });
    });
  }

  /** SIGHUP: the certificate files again, for new connections (checked by the main listener first). */
  reloadTls(): void {
    if (this.o.tls) (this.server as https.Server).setSecureContext(secureOptions(this.o.tls));
  }

  /**
   * Shutdown, once the gateway drained (src/gateway.ts): requests read from now on are answered
   * 503 (not run) by the relay itself, every answer closes its connection, and the listen socket
   * closes once a turn of the event loop accepted no connection (or after ACCEPT_BACKLOG_BOUND_MS,
   * whatever DRAIN_TIMEOUT_MS: as on the main port, what waits in the backlog is answered). Node accepts
   * one connection per turn, so a backlog takes as many turns to empty; closing the listen socket
   * before would have the kernel reset the connections still in it, their requests unanswered.
   */
  async stopAccepting(): Promise<void> {
    this.closing = true;
    const deadline = Date.now() + ACCEPT_BACKLOG_BOUND_MS;
    for (let seen = -1; seen !== this.accepted && Date.now() < deadline;) {
      seen = this.accepted;
      await nextTurn();
    }
    // The listen socket only: Node's http close would also destroy the connections with no request
    // in progress, which resets one whose next request is still unread.
    net.Server.prototype.close.call(this.server);
  }

  /**
   * Ends the connections still open: what already arrived is read and answered first (a turn of
   * the event loop), then a connection with no request in progress gets a FIN (the others close
   * after their answer); the relay reads on until its client closes, up to CLOSE_LINGER_MS, so that
   * nothing it sends is left unread (the kernel would answer that with a reset).
   */
  async endConnections(): Promise<void> {
    await nextTurn();
    for (const s of this.httpSockets) if (!this.conns.get(s)?.busy) s.end();
    if (this.sockets.size > 0) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, CLOSE_LINGER_MS);
        this.onAllClosed = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
    this.onAllClosed = undefined;
    for (const s of this.sockets) s.destroy();
    this.agent.destroy();
    // Every connection is gone: this only stops Node's checks of their timeouts.
    this.server.close();
  }

  private connOf(socket: net.Socket): Conn {
    // The socket is the key: what is queued on it and how it ends.
    let c = this.conns.get(socket);
    if (!c) this.conns.set(socket, (c = { socket, queue: [], busy: false, stopped: false, paused: false }));
    return c;
  }

  private onRequest(req: IncomingMessage, res: ServerResponse): void {
    this.requests++;
    // uWS writes its own Date header: passed on, not doubled.
    res.sendDate = false;
    const c = this.connOf(req.socket);
    // Parsed after an answer that closes the connection: it never runs, and Node closes the
    // connection once that answer is written.
    if (c.stopped) return;
    c.queue.push({ req, res });
    if (c.queue.length >= MAX_QUEUED && !c.paused) {
      c.paused = true;
      handleOf(c.socket)?.readStop();
    }
    if (!c.busy) this.next(c);
  }

  private next(c: Conn): void {
    const item = c.stopped ? undefined : c.queue.shift();
    if (!item) {
      c.busy = false;
      if (c.refusal && !c.stopped) refuseFraming(c.refusal, c.socket);
      return;
    }
    c.busy = true;
    if (c.paused && c.queue.length < MAX_QUEUED / 2) {
      c.paused = false;
      handleOf(c.socket)?.readStart();
    }
    this.forward(item.req, item.res, c);
  }

  /** No more requests run on the connection; the ones queued (never sent to the gateway), to be answered as such. */
  private stop(c: Conn): ServerResponse[] {
    c.stopped = true;
    return c.queue.splice(0).map((q) => q.res);
  }

  /** Answers `e` instead of relaying; the connection closes after it and the requests queued behind it (503, with `e`'s retry-after). */
  private refuse(res: ServerResponse, c: Conn, e: ApiError): void {
    const behind = this.stop(c);
    answerError(res, e, behind.length === 0);
    notRun(behind, e.headers?.['retry-after']);
    res.once('close', () => this.next(c));
  }

  private forward(req: IncomingMessage, res: ServerResponse, c: Conn): void {
    // Read after the gateway stopped accepting (its private socket is closed): answered as the
    // gateway answers while it drains, once the rest of this read was parsed (the check phase of
    // this turn), so that the requests pipelined behind it are answered too (not run).
    if (this.closing) return void setImmediate(() => this.refuse(res, c, shuttingDown()));
    const headers = keptHeaders(req.rawHeaders, DROPPED_REQUEST);
    if (req.headers.host === undefined) {
      // HTTP/1.1 requires Host (RFC 9112 §3.2); an HTTP/1.0 client (ApacheBench) may omit it, and
      // uWS, which speaks 1.1 only, would not answer without one.
      if (req.httpVersionMinor >= 1) return this.refuse(res, c, apiError('BAD_REQUEST', 'an HTTP/1.1 request needs a Host header'));
      headers.push('host', 'localhost');
    }
    headers.push(RELAY_HEADER, this.o.address.relayHeader(uwsAddressText(req.socket.remoteAddress ?? '')));
    const up = this.request({
      agent: this.agent, socketPath: this.o.upstreamPath, method: req.method, path: req.url,
      headers: headers as unknown as http.OutgoingHttpHeaders, setHost: false,
    });
    let answered = false;
    up.on('response', (ur) => {
      answered = true;
      // The gateway closes after this answer (a 503 while shutting down, a 408, ...), or it stopped
      // accepting meanwhile: so does this connection, once the requests queued behind it were
      // answered that they did not run.
      const behind = this.closing || /\bclose\b/i.test(ur.headers.connection ?? '') ? this.stop(c) : undefined;
      const out = keptHeaders(ur.rawHeaders, DROPPED_RESPONSE);
      if (behind?.length === 0) out.push('connection', 'close');
      res.writeHead(ur.statusCode ?? 502, ur.statusMessage, out);
      ur.pipe(res);
      // Not run because the gateway stopped accepting: retry after what a restart takes.
      if (behind) notRun(behind, ur.headers['retry-after'] ?? (this.closing ? String(SHUTDOWN_RETRY_AFTER_S) : undefined));
    });
    up.on('error', (err) => {
      if (answered || res.destroyed) return void res.destroy();
      // The gateway ended the connection without an answer: a request its HTTP parser refuses
      // (docs/http.md "Request framing"), or a shutdown past its drain.
      this.o.log.debug('pipelining relay: no answer from the gateway', { err: errorMessage(err) });
      const behind = this.stop(c);
      const retryAfter = this.closing ? String(SHUTDOWN_RETRY_AFTER_S) : undefined;
      answerError(res, apiError('SERVICE_UNAVAILABLE', 'the gateway ended the request without an answer: its HTTP parser refused it, or it is shutting down; retry it on a new connection', {
        ...(retryAfter ? { headers: { 'retry-after': retryAfter } } : {}),
      }), behind.length === 0);
      notRun(behind, retryAfter);
    });
    res.once('close', () => {
      // The client went away before its answer was written: so does the relayed request (the
      // gateway treats it as any client that left), and nothing queued behind it runs.
      if (!res.writableFinished) {
        c.stopped = true;
        c.queue.length = 0;
        up.destroy();
      }
      this.next(c);
    });
    // Most requests have no body: ended at once, without a pipe.
    if (req.headers['content-length'] === undefined && req.headers['transfer-encoding'] === undefined) up.end();
    else req.pipe(up);
  }

  /** A WebSocket upgrade: the request, with the relay header, to the gateway, then bytes both ways. */
  private onUpgrade(req: IncomingMessage, socket: net.Socket, head: Buffer): void {
    const headers = keptHeaders(req.rawHeaders, new Set([RELAY_HEADER]));
    headers.push(RELAY_HEADER, this.o.address.relayHeader(uwsAddressText(socket.remoteAddress ?? '')));
    const lines = [`${req.method} ${req.url} HTTP/1.1`];
    for (let i = 0; i < headers.length; i += 2) lines.push(`${headers[i]}: ${headers[i + 1]}`);
    const up = this.o.tls
      ? tls.connect({ path: this.o.upstreamPath, rejectUnauthorized: false })
      : net.connect({ path: this.o.upstreamPath });
    up.write(`${lines.join('\r\n')}\r\n\r\n`);
    if (head.length > 0) up.write(head);
    up.pipe(socket);
    socket.pipe(up);
    up.on('error', () => socket.destroy());
    socket.on('error', () => up.destroy());
    up.on('close', () => socket.end());
    socket.on('close', () => up.destroy());
  }
}

/**
 * The socket's native handle. Node's HTTP parser reads it directly, so `socket.pause()` does not
 * stop it (and a paused parser fails on the next read, HPE_PAUSED); stopping the handle's reads
 * does, once the read being parsed is done. Undefined once the socket is closed.
 */
const handleOf = (s: net.Socket) => (s as unknown as { _handle?: { readStop(): number; readStart(): number } | null })._handle ?? undefined;

function secureOptions(t: TlsFiles): tls.SecureContextOptions {
  return {
    cert: readFileSync(t.certFile), key: readFileSync(t.keyFile),
    ...(t.caFile ? { ca: readFileSync(t.caFile) } : {}), ...(t.passphrase ? { passphrase: t.passphrase } : {}),
  };
}

/** A JSON error answer; `close`: the connection ends after it. */
/** A header Node may have joined into an array (sent twice): the first, as uWS reads it. */
const singleHeader = (v: string | string[] | undefined): string | undefined => (Array.isArray(v) ? v[0] : v);

function answerError(res: ServerResponse, e: ApiError, close: boolean): void {
  if (res.headersSent) return void res.destroy();
  const body = JSON.stringify(e.toBody());
  const id = requestIdOf(singleHeader(res.req.headers['x-request-id']));
  res.writeHead(e.status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'x-request-id': id, ...(close ? { connection: 'close' } : {}), ...e.headers });
  res.end(body);
}

/**
 * Answers requests queued behind an answer that closed the connection: 503, not run (they were
 * never sent to the gateway), with the closing answer's retry-after; the last one closes.
 */
function notRun(queued: readonly ServerResponse[], retryAfter: string | undefined): void {
  queued.forEach((res, i) => answerError(res, apiError('SERVICE_UNAVAILABLE', 'not run: the answer to the request before it on this connection closed the connection; retry it on a new connection', {
    ...(retryAfter ? { headers: { 'retry-after': retryAfter } } : {}),
  }), i === queued.length - 1));
}

/** A request Node's parser refused (framing, header size, header timeout): JSON, then the connection closes. */
function refuseFraming(err: NodeJS.ErrnoException, socket: net.Socket): void {
  if (!socket.writable || err.code === 'ECONNRESET') return void socket.destroy();
  const e = err.code === 'ERR_HTTP_REQUEST_TIMEOUT' || err.code === 'ERR_HTTP_HEADERS_TIMEOUT'
    ? apiError('REQUEST_TIMEOUT', 'the request headers did not arrive in time')
    : apiError('BAD_REQUEST', `malformed HTTP request (${err.code ?? 'parse error'})`);
  const body = JSON.stringify(e.toBody());
  socket.end(`HTTP/1.1 ${e.status} ${e.status === 408 ? 'Request Timeout' : 'Bad Request'}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nx-request-id: ${requestIdOf(undefined)}\r\nconnection: close\r\n\r\n${body}`);
}

/** The opt-in pipelining listener (docs/http.md "The pipelining port"), relaying to a private Unix socket of the app. */
export async function startPipeliningRelay(config: Config, listener: Listener, address: ClientAddress, metrics: Metrics, log: Logger): Promise<{ server: PipeliningRelay; port: number }> {
  const upstreamPath = await listener.listenPrivate();
  const server = new PipeliningRelay({ upstreamPath, tls: tlsFilesOf(config), address, log });
  const host = config.pipeliningHost ?? config.host;
  let port: number;
  try {
    port = await server.listen(host, config.pipeliningPort!);
  } catch (err) {
    listener.close();
    throw new ConfigError(`cannot listen on ${host}:${config.pipeliningPort} (HTTP_PIPELINING_PORT): ${errorMessage(err)}`);
  }
  metrics.counter('tagw_http_pipelining_requests_total', () => server.requests);
  metrics.gauge('tagw_http_pipelining_connections', () => server.connections);
  log.info('pipelining listener', { url: `${listener.secure ? 'https' : 'http'}://${host.includes(':') ? `[${host}]` : host}:${port}` });
  return { server, port };
}
