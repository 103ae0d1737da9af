// The OpenAPI document is generated from the route records and their zod schemas at start-up.
import { z } from 'zod';
import { ERROR_STATUS, type ErrorCode, STATUS_TEXT } from '../errors.js';
import type { AnyRoute } from './route.js';
import { ErrorBody } from './schemas.js';

type Json = Record<string, unknown>;

/**
 * JSON Schema of a zod schema for the document. zod puts schemas named with `.meta({ id })` in a
 * local `definitions` and refers to them as `#/definitions/<id>`, which an OpenAPI document resolves
 * from its root, where there is no such key: they are moved to `components.schemas` (`defs`) and
 * referred to there.
 */
function toJson(schema: z.ZodType, io: 'input' | 'output', defs: Record<string, Json>): Json {
  const js = z.toJSONSchema(schema, { io, unrepresentable: 'any', target: 'openapi-3.0' }) as Json;
  const { definitions, ...rest } = js as Json & { definitions?: Record<string, Json> };
  const hoist = (v: Json): Json => nullableEnums(JSON.parse(JSON.stringify(v).replaceAll('"$ref":"#/definitions/', '"$ref":"#/components/schemas/')) as Json);
  for (const [name, def] of Object.entries(definitions ?? {})) {
    const d = hoist(def);
    if (defs[name] !== undefined && JSON.stringify(defs[name]) !== JSON.stringify(d)) {
      throw new Error(`openapi: schema id ${name} has two different JSON forms (input and output?): give them different ids`);
    }
    defs[name] = d;
  }
  return hoist(rest);
}

/** OpenAPI 3.0.3: `nullable: true` does not widen an `enum`; a nullable enum must list null itself
 *  (zod writes it without), or validators refuse the null the route answers. */
function nullableEnums(v: Json): Json {
  if (Array.isArray(v)) {
    v.forEach((x) => nullableEnums(x as Json));
  } else if (v && typeof v === 'object') {
    if (v.nullable === true && Array.isArray(v.enum) && !v.enum.includes(null)) v.enum = [...(v.enum as unknown[]), null];
    for (const x of Object.values(v)) if (x && typeof x === 'object') nullableEnums(x as Json);
  }
  return v;
}

const SECURITY: Record<string, Json[]> = {
  none: [],
  management: [{ managementBearer: [] }, { managementHeader: [] }],
  connection: [{ apiKey: [] }, { apiKeyBearer: [] }, { managementBearer: [] }, { managementHeader: [] }],
  api: [{ apiKey: [] }],
  news: [{ apiKey: [] }, { apiKeyBearer: [] }, { managementBearer: [] }, { managementHeader: [] }],
};

/** What a 429 carries (the failed-auth block sets retry-after only). */
const RATE_LIMIT_HEADERS: Json = {
  'retry-after': { description: 'Seconds to wait before retrying', schema: { type: 'integer' } },
  'RateLimit-Limit': { description: "RATE_LIMITED: the key's limit per second (IETF draft-ietf-httpapi-ratelimit-headers-07)", schema: { type: 'integer' } },
  'RateLimit-Remaining': { description: 'RATE_LIMITED: 0', schema: { type: 'integer' } },
  'RateLimit-Reset': { description: 'RATE_LIMITED: seconds until a request is allowed again', schema: { type: 'integer' } },
  'RateLimit-Policy': { description: 'RATE_LIMITED: `<limit>;w=1` (a one-second window)', schema: { type: 'string' } },
};

/** Response headers, by where they are answered. */
const RETRY_AFTER: Json = { 'retry-after': { description: 'Seconds to wait before retrying', schema: { type: 'integer' } } };
const ALLOW: Json = { allow: { description: 'The methods this path answers', schema: { type: 'string' } } };
const REPLAY: Json = {
  'Idempotent-Replay': { description: "'true' when this is the stored answer of an earlier request with the same clientOrderId / Idempotency-Key (SPEC §4.1)", schema: { type: 'string', enum: ['true'] } },
};
const IDEMPOTENCY_KEY: Json = {
  name: 'Idempotency-Key', in: 'header', required: false, schema: { type: 'string', pattern: '^[A-Za-z0-9_.:-]{1,64}$' },
  description: 'Idempotency id, as the clientOrderId query parameter (both given: they must be equal)',
};

const upperFirst = (s: string) => s.charAt(0).toUpperCase() + s.slice(1);
/**
 * A route's operationId, mechanically, so routes added anywhere get one: a classic route `/OrderSend`
 * (GET) is `orderSend`, a gateway operation `/v1/proxy/OrderSend` is `proxyOrderSend`, anything else the
 * method and the path's words (`POST /v1/seats/:id/keys` is `postSeatsByIdKeys`). A route may name its own.
 */
export function operationIdOf(r: Pick<AnyRoute, 'method' | 'path' | 'operationId'>): string {
  if (r.operationId) return r.operationId;
  const classic = r.method === 'get' || r.method === 'any' ? /^\/([A-Z][A-Za-z0-9]*)$/.exec(r.path) : null;
  if (classic) return classic[1]!.charAt(0).toLowerCase() + classic[1]!.slice(1);
  const proxy = /^\/v1\/proxy\/([A-Z][A-Za-z0-9]*)$/.exec(r.path);
  if (proxy) return `proxy${proxy[1]}`;
  const words = r.path.split('/').filter((w) => w && w !== 'v1').map((w) =>
    (w.startsWith(':') ? `By${upperFirst(w.slice(1))}` : w.split(/[^A-Za-z0-9]+/).filter(Boolean).map(upperFirst).join('')));
  return `${r.method === 'any' ? 'get' : r.method}${words.join('') || 'Root'}`;
}

export function buildOpenApi(routes: AnyRoute[], version: string): Json {
  const operationIds = new Map<string, string>();
  const paths: Record<string, Json> = {};
  const defs: Record<string, Json> = {};
  const errorRef = toJson(ErrorBody, 'output', defs);
  for (const r of routes) {
    const path = r.path.replace(/:([A-Za-z]+)/g, '{$1}');
    const operationId = operationIdOf(r);
    const taken = operationIds.get(operationId);
    if (taken !== undefined && taken !== `${r.method} ${r.path}`) throw new Error(`openapi: operationId ${operationId} of ${r.method} ${r.path} is also ${taken}'s: give one of them an operationId`);
    operationIds.set(operationId, `${r.method} ${r.path}`);
    const op: Json = { operationId, summary: r.summary, tags: r.tags ?? [r.family], security: SECURITY[r.auth] };
    if (r.description) op.description = r.description;
    const parameters: Json[] = [...r.path.matchAll(/:([A-Za-z]+)/g)].map((m) => ({
      name: m[1], in: 'path', required: true, schema: { type: 'string' },
    }));
    const querySchemas = r.query ? [r.query] : (r.docQuery ?? []);
    if (querySchemas.length) {
      // Query helpers preprocess strings, so the JSON Schema of their input side says nothing of
      // which parameters are required: ask the schema itself which ones an empty query lacks.
      const docs = querySchemas.map((q) => {
        const js = toJson(q, 'input', defs);
        const r = q.safeParse({});
        const required = r.success ? [] : r.error.issues.filter((i) => i.path.length === 1 && i.code === 'invalid_type').map((i) => String(i.path[0]));
        return { ...js, required } as Json;
      });
      const props = new Map<string, Json>();
      for (const js of docs) for (const [name, schema] of Object.entries((js.properties ?? {}) as Record<string, Json>)) if (!props.has(name)) props.set(name, schema);
      const requiredInAll = (name: string) => docs.every((js) => ((js.required as string[] | undefined) ?? []).includes(name));
      const requiredBy = (name: string) => docs.flatMap((js, i) => (((js.required as string[] | undefined) ?? []).includes(name) ? [r.docQueryLabels?.[i] ?? `schema ${i + 1}`] : []));
      for (const [name, schema] of props) {
        const all = requiredInAll(name);
        const some = all ? [] : requiredBy(name);
        const description = [schema.description, some.length ? `Required on ${some.join(', ')}.` : undefined].filter(Boolean).join(' ');
        parameters.push({ name, in: 'query', required: all, schema, ...(description ? { description } : {}) });
      }
    }
    if (r.trading) parameters.push(IDEMPOTENCY_KEY);
    if (parameters.length) op.parameters = parameters;
    if (r.body) op.requestBody = { required: true, content: { 'application/json': { schema: toJson(r.body, 'input', defs) } } };
    const responses: Json = {};
    const oks = r.successStatus === null ? [] : [r.successStatus ?? 200, ...(r.otherSuccess ?? [])];
    for (const ok of oks) {
      responses[ok] = {
        description: STATUS_TEXT[ok] ?? 'OK',
        ...(r.trading ? { headers: REPLAY } : {}),
        ...(r.response ? { content: { 'application/json': { schema: toJson(r.response, 'output', defs) } } } : {}),
      };
    }
    // Beside the route's own codes, what the request layer answers for any route of its kind: a
    // body over MAX_BODY_BYTES, a path parameter that is not valid percent-encoding.
    const errors = new Set<ErrorCode>(r.errors ?? []);
    if (r.body) ['PAYLOAD_TOO_LARGE', 'REQUEST_TIMEOUT'].forEach((c) => errors.add(c as ErrorCode));
    if (r.path.includes('/:')) errors.add('BAD_REQUEST');
    // Every API-key request counts toward the key's rate limits (src/auth/keyRateLimit.ts).
    if (r.auth !== 'none' && r.auth !== 'management') errors.add('RATE_LIMITED');
    // Another method on this path is answered 405 with Allow by the fallback (app.ts mountNotFound, allowedMethods.ts);
    // an 'any' route answers every method itself.
    if (r.method !== 'any') errors.add('METHOD_NOT_ALLOWED');
    // What changes state writes to DATA_DIR first: a full disk is 503 (src/store/storageHealth.ts), and
    // so is the database locked past its busy wait; in cluster mode it writes PostgreSQL, and the
    // database unreachable is 503 too (src/errors.ts).
    if (r.method !== 'get' || r.trading || r.changesState) ['STORAGE_UNAVAILABLE', 'STORAGE_BUSY', 'SERVICE_UNAVAILABLE'].forEach((c) => errors.add(c as ErrorCode));
    const errorStatuses = new Set<number>([...errors].map((c) => ERROR_STATUS[c]));
    if (r.auth !== 'none') [401, 429].forEach((st) => errorStatuses.add(st));
    if (r.query || r.body) errorStatuses.add(400);
    for (const st of [...errorStatuses].sort()) {
      const codes = Object.entries(ERROR_STATUS).filter(([code, v]) => v === st && errors.has(code as ErrorCode)).map(([c]) => c);
      responses[st] = {
        description: `${STATUS_TEXT[st]}${codes.length ? ` (${codes.join(', ')})` : ''}`,
        content: { 'application/json': { schema: errorRef } },
        ...(st === 429 ? { headers: RATE_LIMIT_HEADERS } : st === 503 ? { headers: RETRY_AFTER } : st === 405 ? { headers: ALLOW } : {}),
      };
    }
    op.responses = responses;
    const method = r.method === 'any' ? 'get' : r.method;
    paths[path] = { ...(paths[path] ?? {}), [method]: op };
  }
  return {
    openapi: '3.0.3',
    // Relative: resolved against where the document was fetched, so it holds for any HOST/PORT,
    // behind a proxy or TLS terminator too.
    servers: [{ url: '/', description: 'This gateway' }],
    info: {
      title: 'tagw: trading account gateway', version,
      description: 'REST and WebSocket gateway for P4/P5 trading accounts. Errors are JSON {error, message}; match on the HTTP status. See docs/ for decisions the specification leaves open.',
    },
    components: {
      securitySchemes: {
        apiKey: { type: 'apiKey', in: 'header', name: 'x-api-key' },
        apiKeyBearer: { type: 'http', scheme: 'bearer', description: 'API key as Bearer (news and connection routes)' },
        managementBearer: { type: 'http', scheme: 'bearer', description: 'Management key' },
        managementHeader: { type: 'apiKey', in: 'header', name: 'x-management-key' },
      },
      schemas: defs,
    },
    paths,
  };
}
