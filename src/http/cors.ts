// CORS for browser clients on other origins (CORS_ORIGINS, an allowlist; default none).
//
// An origin on the list gets Access-Control-* headers on every response (errors included, so the
// page reads the real status and error code) and on the preflight. An origin not on the list gets
// no CORS headers at all: the browser refuses to hand the response to the page, and the request
// is otherwise answered exactly as it would be without an Origin. With the list empty nothing is
// read or written per request (the hot path is untouched).
//
// WebSocket upgrades carry no CORS, so their Origin is checked here too (see websocketOriginAllowed).
import type { HttpRequest } from 'uWebSockets.js';
import { apiError } from '../errors.js';

/** Request headers a browser page may send (the preflight's Access-Control-Allow-Headers): every
 *  header the API reads from a client, the management key's own (SPEC §5.8) included. */
export const CORS_ALLOW_HEADERS = 'x-api-key, authorization, x-management-key, idempotency-key, content-type, x-request-id';

/** Response headers a page may read besides the CORS-safelisted ones: idempotent replays, throttles,
 *  the per-key rate limit's fields (src/auth/keyRateLimit.ts), the request id (src/http/requestId.ts)
 *  and where /news found its events (src/http/routes/news.ts). */
export const CORS_EXPOSE_HEADERS = [
  'idempotent-replay', 'retry-after', 'ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset', 'ratelimit-policy', 'x-request-id',
  'x-calendar-source',
].join(', ');

/** How long a browser may cache a preflight answer (seconds; Chromium caps it at 7200). */
export const CORS_MAX_AGE_SEC = 600;

export class CorsPolicy {
  private readonly allowed: Set<string>;
  constructor(origins: readonly string[]) {
    this.allowed = new Set(origins);
  }

  /** A policy only when some origin is configured: callers skip CORS entirely otherwise. */
  static of(origins: readonly string[]): CorsPolicy | undefined {
    return origins.length > 0 ? new CorsPolicy(origins) : undefined;
  }

  /**
   * The request's Origin if it is on the list, else undefined. Browsers send the origin in
   * canonical form already; an exact match is the rule (no suffix or pattern matching).
   */
  allows(origin: string): string | undefined {
    return origin !== '' && this.allowed.has(origin) ? origin : undefined;
  }

  /** Headers of a preflight answer to an allowed origin, for a path that answers `methods`. */
  static preflightHeaders(origin: string, methods: readonly string[]): Record<string, string> {
    return {
      'access-control-allow-origin': origin,
      'access-control-allow-methods': methods.join(', '),
      'access-control-allow-headers': CORS_ALLOW_HEADERS,
      'access-control-max-age': String(CORS_MAX_AGE_SEC),
      vary: 'origin',
    };
  }
}

/**
 * Whether a WebSocket upgrade may proceed, by its Origin. Clients that are not browsers send no
 * Origin and are let through (the API key is what authenticates them). A browser always sends
 * one: its own origin (the dashboard, served by the gateway) is accepted by comparing the
 * Origin's host with the Host header; another origin must be on the list. A key alone would let
 * any page use a key it was given; the list is the operator's statement of which pages may.
 */
export function websocketOriginAllowed(origin: string, host: string, cors: CorsPolicy | undefined): boolean {
  if (origin === '') return true;
  if (cors?.allows(origin)) return true;
  const i = origin.indexOf('://');
  return i > 0 && host !== '' && origin.slice(i + 3).toLowerCase() === host.toLowerCase();
}

const policies = new WeakMap<object, CorsPolicy | undefined>();

/**
 * Refuses (403) a WebSocket upgrade from a browser page whose origin is neither the gateway's own
 * nor on the allowlist; read inside uWS's upgrade handler (the request is gone after it returns).
 */
export function assertWebsocketOrigin(req: Pick<HttpRequest, 'getHeader'>, config: { corsOrigins: readonly string[] }): void {
  let cors = policies.get(config);
  if (cors === undefined && !policies.has(config)) policies.set(config, (cors = CorsPolicy.of(config.corsOrigins)));
  const origin = req.getHeader('origin');
  if (!websocketOriginAllowed(origin, req.getHeader('host'), cors)) {
    throw apiError('FORBIDDEN', `origin ${origin} may not open WebSockets here: the operator lists allowed origins in CORS_ORIGINS`);
  }
}
