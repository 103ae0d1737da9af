// The OpenAPI document is generated from the route records and their zod schemas at start-up.
import { z } from 'zod';
import { ERROR_STATUS, STATUS_TEXT } from '../errors.js';
import type { AnyRoute } from './route.js';
import { ErrorBody } from './schemas.js';

type Json = Record<string, unknown>;

function toJson(schema: z.ZodType, io: 'input' | 'output'): Json {
  return z.toJSONSchema(schema, { io, unrepresentable: 'any', target: 'openapi-3.0' }) as Json;
}

const SECURITY: Record<string, Json[]> = {
  none: [],
  management: [{ managementBearer: [] }, { managementHeader: [] }],
  connection: [{ apiKey: [] }, { managementBearer: [] }, { managementHeader: [] }],
  api: [{ apiKey: [] }],
  news: [{ apiKey: [] }, { apiKeyBearer: [] }],
};

export function buildOpenApi(routes: AnyRoute[], version: string): Json {
  const paths: Record<string, Json> = {};
  for (const r of routes) {
    const path = r.path.replace(/:([A-Za-z]+)/g, '{$1}');
    const op: Json = { summary: r.summary, tags: r.tags ?? [r.family], security: SECURITY[r.auth] };
    if (r.description) op.description = r.description;
    const parameters: Json[] = [...r.path.matchAll(/:([A-Za-z]+)/g)].map((m) => ({
      name: m[1], in: 'path', required: true, schema: { type: 'string' },
    }));
    if (r.query) {
      const js = toJson(r.query, 'input');
      const props = (js.properties ?? {}) as Record<string, Json>;
      const required = new Set((js.required as string[] | undefined) ?? []);
      for (const [name, schema] of Object.entries(props)) {
        parameters.push({ name, in: 'query', required: required.has(name), schema, ...(schema.description ? { description: schema.description } : {}) });
      }
    }
    if (parameters.length) op.parameters = parameters;
    if (r.body) op.requestBody = { required: true, content: { 'application/json': { schema: toJson(r.body, 'input') } } };
    const ok = r.successStatus ?? 200;
    const responses: Json = {
      [ok]: { description: STATUS_TEXT[ok] ?? 'OK', ...(r.response ? { content: { 'application/json': { schema: toJson(r.response, 'output') } } } : {}) },
    };
    const errorStatuses = new Set<number>((r.errors ?? []).map((c) => ERROR_STATUS[c]));
    if (r.auth !== 'none') [401, 429].forEach((st) => errorStatuses.add(st));
    if (r.query || r.body) errorStatuses.add(400);
    for (const st of [...errorStatuses].sort()) {
      const codes = Object.entries(ERROR_STATUS).filter(([code, v]) => v === st && (r.errors ?? []).includes(code as never)).map(([c]) => c);
      responses[st] = {
        description: `${STATUS_TEXT[st]}${codes.length ? ` (${codes.join(', ')})` : ''}`,
        content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
      };
    }
    op.responses = responses;
    const method = r.method === 'any' ? 'get' : r.method;
    paths[path] = { ...(paths[path] ?? {}), [method]: op };
  }
  return {
    openapi: '3.0.3',
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
      schemas: { Error: toJson(ErrorBody, 'output') },
    },
    paths,
  };
}
