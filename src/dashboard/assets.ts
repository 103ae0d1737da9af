// The dashboard's static files: read once at start (src/dashboard/static and three ESM files from
// node_modules: preact, its hooks, htm, and uPlot), served by uWS with an ETag (a 304 when the
// browser has it), Cache-Control and the browser-safety headers. No build step: the files are
// served as they are, and the hooks module's bare `preact` import is pointed at the served copy.
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { HttpResponse, TemplatedApp } from 'uWebSockets.js';
import type { Metrics } from '../http/metrics.js';
import { endStreamed } from '../http/respond.js';

/** Files longer than this are written as the client reads them (endStreamed). */
const STREAM_ABOVE_BYTES = 16 * 1024;

export const DASHBOARD_PATH = '/dashboard';

/**
 * No inline script or style, nothing from another origin, no framing, no plugins. `connect-src
 * 'self'` covers the gateway's own ws:/wss: (CSP Level 3), which the live view's /v1/stream needs.
 */
export const DASHBOARD_CSP = [
  "default-src 'none'", "script-src 'self'", "style-src 'self'", "img-src 'self' data:", "connect-src 'self'",
  "font-src 'self'", "base-uri 'none'", "form-action 'none'", "frame-ancestors 'none'",
].join('; ');

const SECURITY_HEADERS: Record<string, string> = {
  'content-security-policy': DASHBOARD_CSP,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
};

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml', '.json': 'application/json',
};

export interface Asset { body: Buffer; type: string; etag: string }

function staticDir(): string {
  // From the sources (src/dashboard) or from the build (dist/src/dashboard).
  const candidates = ['./static', '../../../src/dashboard/static'].map((rel) => fileURLToPath(new URL(rel, import.meta.url)));
  const dir = candidates.find((p) => existsSync(join(p, 'index.html')));
  if (!dir) throw new Error(`dashboard files not found (looked in ${candidates.join(', ')})`);
  return dir;
}

/** A file of an npm package, by the package's main entry and a path beside it. */
function packageFile(pkg: string, besideMain: string): string {
  const require = createRequire(import.meta.url);
  return join(dirname(require.resolve(pkg)), besideMain);
}

function asset(path: string, body: Buffer): Asset {
  const type = TYPES[extname(path)] ?? 'application/octet-stream';
  return { body, type, etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"` };
}

/** Every served file by URL path (the index under /dashboard and /dashboard/). */
export function loadAssets(): Map<string, Asset> {
  const out = new Map<string, Asset>();
  const dir = staticDir();
  const walk = (sub: string) => {
    for (const e of readdirSync(join(dir, sub), { withFileTypes: true })) {
      const rel = sub ? `${sub}/${e.name}` : e.name;
      if (e.isDirectory()) walk(rel);
      else out.set(`${DASHBOARD_PATH}/${rel}`, asset(rel, readFileSync(join(dir, rel))));
    }
  };
  walk('');
  const vendor: Array<[string, string, (s: string) => string]> = [
    ['preact.js', packageFile('preact', 'preact.module.js'), (s) => s],
    ['hooks.js', packageFile('preact/hooks', 'hooks.module.js'), (s) => s.replace(/from\s*"preact"/g, 'from"./preact.js"')],
    ['htm.js', packageFile('htm', 'htm.module.js'), (s) => s],
    ['uplot.js', packageFile('uplot', 'uPlot.esm.js'), (s) => s],
    ['uplot.css', packageFile('uplot', 'uPlot.min.css'), (s) => s],
  ];
  for (const [name, file, fix] of vendor) {
    // Source map comments would make the browser ask for files that are not served.
    const text = fix(readFileSync(file, 'utf8')).replace(/\n\/\/# sourceMappingURL=\S+\s*$/, '\n');
    out.set(`${DASHBOARD_PATH}/vendor/${name}`, asset(name, Buffer.from(text)));
  }
  const index = out.get(`${DASHBOARD_PATH}/index.html`)!;
  out.set(DASHBOARD_PATH, index);
  out.set(`${DASHBOARD_PATH}/`, index);
  return out;
}

function send(res: HttpResponse, status: string, headers: Record<string, string>, body: Buffer | undefined, head: boolean): void {
  res.cork(() => {
    res.writeStatus(status);
    for (const k in SECURITY_HEADERS) res.writeHeader(k, SECURITY_HEADERS[k]!);
    for (const k in headers) res.writeHeader(k, headers[k]!);
    if (head) {
      // As ResponseSink does for HEAD: the length by hand, then no body (see src/http/respond.ts).
      res.writeHeader('content-length', String(body?.length ?? 0));
      res.endWithoutBody();
    } else if (body !== undefined && body.length > STREAM_ABOVE_BYTES) {
      // uplot.js is ~145 KB: pipelined and unread, each answer would be held (see endStreamed).
      let aborted = false;
      endStreamed(res, body, () => aborted, () => res.onAborted(() => { aborted = true; }));
    } else {
      res.end(body ?? '');
    }
  });
}

/**
 * GET (and HEAD) /dashboard and /dashboard/*: the files, 304 on a matching If-None-Match. Every answer is
 * revalidated (no-cache): file names carry no content hash, so a newer gateway's files are picked
 * up at once, and a revalidation costs one small request.
 */
export function mountDashboard(app: TemplatedApp, metrics: Metrics, node?: string, assets: Map<string, Asset> = loadAssets()): void {
  // Cluster mode: which node answered, as on every other answer.
  const nodeHeader: Record<string, string> = node === undefined ? {} : { 'x-tagw-node': node };
  const handler = (res: HttpResponse, req: { getUrl(): string; getHeader(name: string): string; getMethod(): string }) => {
    const started = performance.now();
    const head = req.getMethod() === 'head';
    const path = req.getUrl();
    const a = assets.get(path);
    let status: number;
    if (!a) {
      status = 404;
      send(res, '404 Not Found', { 'content-type': 'application/json', ...nodeHeader }, Buffer.from(JSON.stringify({ error: 'ROUTE_NOT_FOUND', message: `no dashboard file ${path}` })), head);
    } else if (req.getHeader('if-none-match') === a.etag) {
      status = 304;
      send(res, '304 Not Modified', { etag: a.etag, 'cache-control': 'no-cache', ...nodeHeader }, undefined, head);
    } else {
      status = 200;
      send(res, '200 OK', { 'content-type': a.type, etag: a.etag, 'cache-control': 'no-cache', ...nodeHeader }, a.body, head);
    }
    metrics.observe('ops', status, (performance.now() - started) / 1000);
  };
  for (const path of [DASHBOARD_PATH, `${DASHBOARD_PATH}/*`]) {
    app.get(path, handler);
    app.head(path, handler);
  }
}
