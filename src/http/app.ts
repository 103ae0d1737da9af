// Binds route records to a uWS app: each route's handler copies the request and hands it to its
// Exchange (exchange.ts); OPTIONS on every path, and the JSON 404/405 of a path no route matched.
import type { HttpRequest, HttpResponse, TemplatedApp } from 'uWebSockets.js';
import { apiError, toApiError } from '../errors.js';
import { allowedMethods, methodNotAllowed, methodsByPath } from './allowedMethods.js';
import { CorsPolicy } from './cors.js';
import { serve, type HttpDeps } from './exchange.js';
import { assertOneContentLength, readRequest, type RequestInfo } from './request.js';
import { QueryMemo } from './queryMemo.js';
import { requestIdOf } from './requestId.js';
import { closesConnection, ResponseSink, sendError } from './respond.js';
import type { AnyRoute } from './route.js';

function paramCount(path: string): number {
  return (path.match(/\/:/g) ?? []).length;
}

export function mountRoutes(app: TemplatedApp, routes: AnyRoute[], deps: HttpDeps): void {
  const methodsOf = allowedMethods(routes);
  for (const route of routes) {
    const n = paramCount(route.path);
    // Not for trading calls: each carries a new clientOrderId or ticket, so kept copies would only
    // live long enough to be promoted by the GC, never be hit; unless the route names the parameter
    // that varies, and the rest of its query is kept.
    const keep = !route.secretQuery && (!route.trading || route.queryVaries !== undefined);
    const memo = route.query ? new QueryMemo(route.query, { keep, varies: route.queryVaries }) : undefined;
    // Only 'any' routes (and the fallback below) see HEAD: uWS matches get() to GET alone.
    const anyMethod = route.method === 'any';
    /** The route's label in /metrics: its template, never the raw URL (ids stay out of label values). */
    const label = `${route.method.toUpperCase()} ${route.path}`;
    /** What readRequest would ask uWS for, known here for a route of one method (uWS matches get() to GET alone). */
    const fixedMethod = anyMethod ? undefined : route.method === 'delete' ? 'DELETE' : route.method.toUpperCase();
    const handler = (res: HttpResponse, req: HttpRequest) => {
      const method = anyMethod ? req.getMethod() : '';
      // uWS gives an OPTIONS to an 'any' route before the preflight handler: answered the same way.
      if (method === 'options') return preflight(res, req, deps, methodsOf);
      const sink = new ResponseSink(res, false, method === 'head');
      sink.node = deps.node;
      if (deps.cors) sink.cors = deps.cors.allows(req.getHeader('origin'));
      let info: RequestInfo;
      try {
        info = readRequest(res, req, n, deps.address, route.trading === true, fixedMethod);
        assertOneContentLength(req, info.headers['content-length']);
      } catch (err) {
        // Thrown from a uWS callback it would end the process: answered here instead, with its
        // request id and counted under the route as any answer.
        const receivedAt = performance.now();
        sink.requestId = requestIdOf(req.getHeader('x-request-id') || undefined);
        const e = toApiError(err);
        sendError(sink, e, closesConnection(e));
        deps.metrics.observe(route.family, e.status, (performance.now() - receivedAt) / 1000, label);
        return;
      }
      serve(route, info, sink, deps, memo, label);
    };
    switch (route.method) {
      case 'get': app.get(route.path, handler); break;
      case 'post': app.post(route.path, handler); break;
      case 'put': app.put(route.path, handler); break;
      case 'patch': app.patch(route.path, handler); break;
      case 'delete': app.del(route.path, handler); break;
      case 'any': app.any(route.path, handler); break;
    }
  }
}

/**
 * OPTIONS on a route: 204 with Allow, plus the CORS preflight headers when the Origin is on the
 * allowlist (none otherwise: the browser then refuses the real request). An unknown path stays a 404.
 */
function preflight(res: HttpResponse, req: HttpRequest, deps: HttpDeps, methodsOf: (path: string) => string[]): void {
  const receivedAt = performance.now();
  const path = req.getUrl();
  const origin = deps.cors?.allows(req.getHeader('origin'));
  const sink = new ResponseSink(res);
  sink.requestId = requestIdOf(req.getHeader('x-request-id') || undefined);
  sink.cors = origin;
  sink.node = deps.node;
  const methods = methodsOf(path);
  if (methods.length === 0) {
    sendError(sink, apiError('ROUTE_NOT_FOUND', `no route for OPTIONS ${path}`));
  } else {
    const allow = [...methods, 'OPTIONS'];
    sink.cors = undefined; // the preflight headers below say it all
    sink.send(204, '', { allow: allow.join(', '), ...(origin ? CorsPolicy.preflightHeaders(origin, allow) : {}) }, 'text/plain');
  }
  deps.metrics.observe('ops', methods.length === 0 ? 404 : 204, (performance.now() - receivedAt) / 1000);
}

/** Answers OPTIONS on every route (see preflight); mounted before the not-found fallback. */
export function mountPreflight(app: TemplatedApp, deps: HttpDeps, routes: readonly AnyRoute[]): void {
  const methodsOf = allowedMethods(routes);
  app.options('/*', (res, req) => preflight(res, req, deps, methodsOf));
}

/** The fallback for every request no route matched: JSON 405 (the path exists under other methods) or 404, never uWS's empty default. */
export function mountNotFound(app: TemplatedApp, deps: HttpDeps, routes: readonly AnyRoute[] = []): void {
  const allowed = methodsByPath(routes);
  app.any('/*', (res, req) => {
    const info = readRequest(res, req, 0, deps.address);
    const sink = new ResponseSink(res, true, info.method === 'HEAD');
    sink.node = deps.node;
    if (deps.cors) sink.cors = deps.cors.allows(req.getHeader('origin'));
    sink.requestId = requestIdOf(info.headers['x-request-id']);
    const methods = allowed(info.path);
    let e = methods.length > 0 ? methodNotAllowed(info.path, info.method, methods) : apiError('ROUTE_NOT_FOUND', `no route for ${info.method} ${info.path}`);
    try {
      assertOneContentLength(req, info.headers['content-length']);
    } catch (err) {
      e = toApiError(err);
    }
    sendError(sink, e, closesConnection(e));
    deps.metrics.observe('ops', e.status, (performance.now() - info.receivedAt) / 1000, 'unmatched');
  });
}
