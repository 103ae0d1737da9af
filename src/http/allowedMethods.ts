// Which methods a path answers, from the route table: the Allow of an OPTIONS and of a 405, and the
// 405 itself.
import { apiError, type ApiError } from '../errors.js';
import type { AnyRoute } from './route.js';

/**
 * The methods each route path answers, for the fallback: a path that exists under other methods
 * is a 405 with `Allow`, not a 404 that reads as "no such endpoint". `:param` segments match any
 * one segment; 'any' routes answer every method themselves and never reach the fallback.
 */
export function methodsByPath(routes: readonly AnyRoute[]): (path: string) => string[] {
  const byPattern = new Map<string, { re: RegExp; methods: Set<string> }>();
  for (const r of routes) {
    if (r.method === 'any') continue;
    let entry = byPattern.get(r.path);
    if (!entry) {
      const re = new RegExp(`^${r.path.split('/').map((seg) => (seg.startsWith(':') ? '[^/]+' : seg.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))).join('/')}$`);
      byPattern.set(r.path, (entry = { re, methods: new Set() }));
    }
    entry.methods.add(r.method.toUpperCase());
  }
  const patterns = [...byPattern.values()];
  return (path) => {
    const out = new Set<string>();
    for (const p of patterns) if (p.re.test(path)) for (const m of p.methods) out.add(m);
    return [...out].sort();
  };
}

/** Methods an 'any' route answers, for Allow and the preflight. */
const ANY_METHODS = ['DELETE', 'GET', 'HEAD', 'PATCH', 'POST', 'PUT'];

/**
 * Every method a path answers; empty for a path no route has. Routes of one method win over an
 * 'any' route matching the same path, and an 'any' route that only answers errors (a catch-all
 * such as /v1/proxy/:operation, successStatus null) answers no method.
 */
export function allowedMethods(routes: readonly AnyRoute[]): (path: string) => string[] {
  const byMethod = methodsByPath(routes);
  const anyRoutes = methodsByPath(routes.filter((r) => r.method === 'any' && r.successStatus !== null).map((r) => ({ ...r, method: 'get' as const })));
  return (path) => {
    const specific = byMethod(path);
    return specific.length > 0 ? specific : anyRoutes(path).length > 0 ? ANY_METHODS : [];
  };
}

/** 405 for a path that answers only `methods` (listed in Allow); `hint` ends the message. */
export function methodNotAllowed(path: string, method: string, methods: readonly string[], hint?: string): ApiError {
  return apiError('METHOD_NOT_ALLOWED', `${path} answers ${methods.join(', ')}, not ${method}${hint ? `: ${hint}` : ''}`, { headers: { allow: methods.join(', ') } });
}
