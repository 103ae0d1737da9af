// What a handler may know about a request. uWS's HttpRequest is only valid synchronously inside
// the route callback, so everything is copied out before the first await.
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';

export type QueryMap = Record<string, string | string[]>;

export interface RequestInfo {
  method: string;
  path: string;
  rawQuery: string;
  query: QueryMap;
  headers: Record<string, string>;
  params: string[];
  ip: string;
  receivedAt: number;
}

/** Repeated keys become arrays; `symbol=A&symbol=B` and `symbol=A,B` are both handled by the schemas. */
export function parseQuery(raw: string): QueryMap {
  const out: QueryMap = Object.create(null) as QueryMap;
  if (!raw) return out;
  for (const [k, v] of new URLSearchParams(raw)) {
    const prev = out[k];
    if (prev === undefined) out[k] = v;
    else if (Array.isArray(prev)) prev.push(v);
    else out[k] = [prev, v];
  }
  return out;
}

export function readRequest(res: HttpResponse, req: HttpRequest, paramCount: number, trustProxy: boolean): RequestInfo {
  const headers: Record<string, string> = {};
  req.forEach((k, v) => {
    headers[k] = v;
  });
  const params: string[] = [];
  for (let i = 0; i < paramCount; i++) params.push(decodeURIComponent(req.getParameter(i)));
  const rawQuery = req.getQuery() ?? '';
  let ip = Buffer.from(res.getRemoteAddressAsText()).toString();
  if (trustProxy && headers['x-forwarded-for']) {
    // The left-most entry is the original client as seen by the first trusted proxy.
    ip = headers['x-forwarded-for'].split(',')[0]!.trim() || ip;
  }
  return {
    method: req.getMethod().toUpperCase(),
    path: req.getUrl(),
    rawQuery,
    query: parseQuery(rawQuery),
    headers,
    params,
    ip,
    receivedAt: performance.now(),
  };
}
