// The checks every request and every WebSocket upgrade passes before anything else, in one order:
// draining (503), the failed-auth throttle (429), the key (401 counts toward the throttle). Shared by
// the HTTP routes (http/exchange.ts) and both sockets (/v1/stream, /ws), so they cannot drift apart.
import type { AuthMode, Authenticator, Principal } from '../auth/authenticator.js';
import type { AuthThrottle } from '../auth/throttle.js';
import { apiError, type ApiError } from '../errors.js';
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import type { ClientAddress } from './clientAddress.js';
import { readRequest, singleParam, type QueryMap, type RequestInfo } from './request.js';
import { requestIdOf } from './requestId.js';
import { ResponseSink } from './respond.js';

export interface AdmissionDeps {
  auth: Authenticator;
  throttle: AuthThrottle;
  /** `refused`: requests turned away while draining, so shutdown can tell when they stopped coming. */
  inflight: { draining: boolean; refused?: number };
}

/** Seconds a client turned away by a shutdown should wait: about what a restart takes. */
export const SHUTDOWN_RETRY_AFTER_S = 2;

/** The answer to a request that arrives while the gateway shuts down (it does not run), with `headers` besides retry-after. */
export function shuttingDown(headers: Record<string, string> = {}): ApiError {
  return apiError('SERVICE_UNAVAILABLE', 'server is shutting down', { headers: { ...headers, 'retry-after': String(SHUTDOWN_RETRY_AFTER_S) } });
}

/**
 * Draining and throttle checks, then authentication; undefined for routes without auth. The
 * client's address is read (`client.ip`, a copy out of uWS per read) only while some address is
 * blocked: almost never, so the hot path does not pay for it.
 */
export function admit(deps: AdmissionDeps, client: Pick<RequestInfo, 'ip'>, mode: AuthMode, headers: Record<string, string>, v1: boolean): Principal | undefined {
  if (deps.inflight.draining) {
    deps.inflight.refused = (deps.inflight.refused ?? 0) + 1;
    throw shuttingDown({ connection: 'close' });
  }
  if (mode !== 'none' && deps.throttle.anyBlocked()) {
    const wait = deps.throttle.blockedFor(client.ip);
    if (wait > 0) throw apiError('AUTH_THROTTLED', 'too many failed auth attempts, slow down', { headers: { 'retry-after': String(wait) } });
  }
  return deps.auth.authenticate(mode, headers, v1);
}

/** What a WebSocket upgrade is answered from, read inside uWS's upgrade handler (the request is
 *  gone after it): the handshake headers (readRequest copies only those routes use), the request,
 *  and the sink a refusal is written to. Shared by /v1/stream and /ws. */
export function readUpgrade(res: HttpResponse, req: HttpRequest, address: ClientAddress): {
  key: string; protocol: string; extensions: string; connection: string; info: RequestInfo; sink: ResponseSink;
} {
  const info = readRequest(res, req, 0, address);
  const sink = new ResponseSink(res);
  // A refusal is a response like any other: it carries the request's id (docs/operations.md).
  sink.requestId = requestIdOf(info.headers['x-request-id']);
  return {
    key: req.getHeader('sec-websocket-key'), protocol: req.getHeader('sec-websocket-protocol'), extensions: req.getHeader('sec-websocket-extensions'),
    connection: req.getHeader('connection'), info, sink,
  };
}

/**
 * A WebSocket handshake (RFC 6455 §4.2.1): a Sec-WebSocket-Key, and `Connection: Upgrade`. One that
 * says `Connection: close` instead is refused, not upgraded: this uWS build closes such a socket
 * as it ends the 101 when its upgrade completes from async code (ResponseSink.upgradeLater runs it
 * outside the response's own cork), so it would work or not depending on the path. (uWS reads the
 * first Connection header, as here.)
 */
export function assertHandshake(u: { key: string; connection: string }): void {
  if (!u.key) throw apiError('BAD_REQUEST', 'not a WebSocket upgrade request');
  if (!u.connection.split(',').some((t) => t.trim().toLowerCase() === 'upgrade')) {
    throw apiError('BAD_REQUEST', "not a WebSocket upgrade request: the handshake must say 'Connection: Upgrade' (RFC 6455)");
  }
}

/** A WebSocket upgrade: the API key may also come as ?apiKey= (SPEC §5.3); the header wins when both are sent. */
export function admitSocket(deps: AdmissionDeps, client: Pick<RequestInfo, 'ip'>, headers: Record<string, string>, query: QueryMap): Principal {
  const apiKey = headers['x-api-key'] ?? singleParam(query, 'apiKey');
  return admit(deps, client, 'api', apiKey === undefined ? headers : { ...headers, 'x-api-key': apiKey }, true)!;
}

/** A refusal: a 401 counts toward the failed-auth throttle of the client's IP. */
export function noteRefusal(deps: Pick<AdmissionDeps, 'throttle'>, client: Pick<RequestInfo, 'ip'>, e: ApiError): void {
  if (e.status === 401) deps.throttle.fail(client.ip);
}
