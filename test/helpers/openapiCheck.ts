// Checks a response of the real gateway against its own OpenAPI document (issue 14 item 8): the
// integration tests' request helper (helpers/gateway.ts `req`) passes every response through
// `checkResponse`, so each status and JSON body any test receives is one the document promises.
// It fails loudly (throws) for a route or a status the document does not list, and for a body
// that does not match the operation's schema. Exceptions, each a behaviour of the HTTP layer
// rather than of a route: CORS preflights (OPTIONS), and the fallback's 404/405 for paths or
// methods no route serves (those bodies must still be the Error schema), and the dashboard's static
// files (HTML, scripts), which are pages for a browser, not API operations.
import { Ajv, type ValidateFunction } from 'ajv';
import { DASHBOARD_PATH } from '../../src/dashboard/assets.js';

type Json = Record<string, any>;
interface PathEntry { template: string; re: RegExp; literal: number; item: Record<string, Json> }
/** compiled: by operation and status; bySchema: by the schema's JSON, the one validator of each schema. */
interface Checker { paths: PathEntry[]; ajv: Ajv; compiled: Map<string, ValidateFunction>; bySchema: Map<string, ValidateFunction>; doc: Json }

const checkers = new WeakMap<object, Checker>();

function checkerOf(doc: Json): Checker {
  let c = checkers.get(doc);
  if (c) return c;
  const paths = Object.entries(doc.paths as Record<string, Record<string, Json>>).map(([template, item]) => {
    const segs = template.split('/');
    const re = new RegExp(`^${segs.map((s) => (/^\{.+\}$/.test(s) ? '[^/]+' : s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))).join('/')}$`);
    return { template, re, literal: segs.filter((s) => !/^\{.+\}$/.test(s)).length, item };
  });
  // A literal path (/v1/proxy/OrderSend) before a template that also matches it (/v1/proxy/{operation}).
  paths.sort((a, b) => b.literal - a.literal);
  c = { paths, ajv: new Ajv({ strict: false, allErrors: true, validateFormats: false }), compiled: new Map(), bySchema: new Map(), doc };
  checkers.set(doc, c);
  return c;
}

function validator(c: Checker, key: string, schema: Json): ValidateFunction {
  let v = c.compiled.get(key);
  if (!v) {
    // Compiled once per distinct schema: 904 of the document's 990 response schemas are the same
    // $ref to Error, and a compile walks all the components beside it (~2.4 ms each): compiling
    // every response's schema took 2.4 CPU-s, once per schema 0.5 (2026-11-28).
    const text = JSON.stringify(schema);
    v = c.bySchema.get(text);
    if (!v) {
      // The schema's $refs point at #/components/...: compiled with the components beside it.
      v = c.ajv.compile({ allOf: [schema], components: c.doc.components });
      c.bySchema.set(text, v);
    }
    c.compiled.set(key, v);
  }
  return v;
}

export class ResponseCheckError extends Error {}

export function checkResponse(doc: Json, method: string, url: string, status: number, contentType: string | null, text: string): void {
  const c = checkerOf(doc);
  const m = method.toLowerCase() === 'head' ? 'get' : method.toLowerCase();
  if (m === 'options') return;
  const raw = url.split('?')[0]!;
  let path = raw;
  try {
    path = decodeURI(raw);
  } catch {
    // Not valid percent-encoding: matched as sent (the gateway answers it 400).
  }
  if (path === DASHBOARD_PATH || path.startsWith(`${DASHBOARD_PATH}/`)) return;
  const what = `${method} ${path} answered ${status}`;
  const json = contentType?.includes('application/json') && text !== '' ? (JSON.parse(text) as unknown) : undefined;
  const errorBody = () => {
    const v = validator(c, 'Error', { $ref: '#/components/schemas/Error' });
    if (json === undefined || !v(json)) throw new ResponseCheckError(`${what}: not the Error schema: ${text.slice(0, 300)}`);
  };
  const entries = c.paths.filter((p) => p.re.test(path));
  const op = entries.map((p) => p.item[m]).find((o) => o !== undefined);
  const fallback = status === 404 || status === 405;
  if (!op) {
    if (fallback) return errorBody();
    throw new ResponseCheckError(`${what}, but /openapi.json has no ${m.toUpperCase()} operation for this path: add the route's record to the routes the document is built from`);
  }
  const spec = op.responses?.[String(status)] ?? op.responses?.default;
  if (!spec) {
    // The fallback's 405 to another method is documented on the operation; a 404 of the fallback
    // for a path that only looks like a template (e.g. /v1/seats/x/y/z) is not the operation's.
    if (fallback && (json as { error?: string } | undefined)?.error === 'ROUTE_NOT_FOUND') return errorBody();
    throw new ResponseCheckError(`${what}, a status ${op.operationId} does not document (it lists ${Object.keys(op.responses ?? {}).join(', ')}): ${text.slice(0, 300)}`);
  }
  const schema = spec.content?.['application/json']?.schema as Json | undefined;
  if (!schema || json === undefined) {
    if (status >= 400 && schema) errorBody();
    return;
  }
  const v = validator(c, `${op.operationId} ${status}`, schema);
  if (!v(json)) {
    throw new ResponseCheckError(`${what}: the body does not match ${op.operationId}'s ${status} schema: ${c.ajv.errorsText(v.errors, { separator: '; ' }).slice(0, 800)}; body ${text.slice(0, 400)}`);
  }
}
