// GET /v1/proxy/<Operation>?handle= (SPEC §4.4 P5, §4.5 P4). One route record per operation (so
// each appears in the OpenAPI document), all served by the same steps:
//   handle -> session (HandleDirectory: LRU, then one indexed SQLite read) -> rights (§5) ->
//   the platform's parameter schema (400 before anything reaches the broker) -> the account's
//   shard ('session.op'), where the session actor and the account's broker connection live.
// An operation of the other platform answers 404 OPERATION_NOT_ON_PLATFORM naming the right one.
import { z } from 'zod';
import { assertAccountScope, assertCanTrade } from '../../auth/rights.js';
import { apiError } from '../../errors.js';
import type { Services } from '../services.js';
import { methodNotAllowed } from '../allowedMethods.js';
import { queryError } from '../validation.js';
import { one } from '../schemas.js';
import { defineRoute, type AnyRoute } from '../route.js';
import { handleDirectory, handleHash } from './gateway.js';
import { MIN_BUILD } from '../../runtime/hosts/accountOps.js';
import { PROXY_RESPONSES } from './proxyResponses.js';
import { OPERATIONS, stripHandle, type OpDef } from './proxySchemas.js';

/** The operation to use instead, on the other platform. */
const COUNTERPART: Record<string, string> = {
  OrderSend: 'OrderSendSafe', OrderSendSafe: 'OrderSend',
  OrderModify: 'OrderModifySafe', OrderModifySafe: 'OrderModify',
  OrderClose: 'OrderCloseSafe', OrderCloseSafe: 'OrderClose',
  Quote: 'GetQuote', GetQuote: 'Quote',
  QuoteHistory: 'PriceHistoryV2', PriceHistoryV2: 'QuoteHistory', PriceHistory: 'QuoteHistory',
  OrderDelete: 'OrderCloseSafe',
};
/** What the named counterpart does beyond the operation asked for. */
const COUNTERPART_NOTE: Record<string, string> = {
  OrderDelete: ", which also cancels pending orders (pass the pending order's ticket)",
};
/** Behaviour of an operation worth naming in its OpenAPI description. */
const OP_NOTE: Record<string, string> = {
  OrderCloseSafe: " On a pending order's ticket OrderCloseSafe cancels that order (P5 has no OrderDelete); `lots` is then refused.",
};

function describeParams(op: string, def: OpDef): string {
  const plat = (['P5', 'P4'] as const).filter((p) => p in def).join(' and ');
  return `Available on ${plat}. Parameters as SPEC §4.4/§4.5; validated strictly per platform (a parameter the operation does not take is 400 INVALID_PARAMETER).${def.kind === 'trade' ? ' No idempotency id: an Idempotency-Key header is a 400 and nothing is sent (the classic /OrderSend takes clientOrderId).' : ''}${OP_NOTE[op] ?? ''} See docs/gateway.md.`;
}

export function proxyRoutes(s: Services): AnyRoute[] {
  const dir = handleDirectory(s);

  const serve = async (op: string, raw: Record<string, unknown>, principal: NonNullable<Parameters<typeof assertCanTrade>[0]>, headers: Record<string, string | undefined> = {}) => {
    const def = OPERATIONS[op];
    if (!def) throw apiError('ROUTE_NOT_FOUND', `unknown gateway operation '${op}'`);
    if (def.noHandle) return { pong: true, time: new Date(s.clock.now()).toISOString() };
    // Repeated with different values is a 400 naming it, as every single-valued parameter (never
    // "the last one wins": that made the answer depend on the order, 404 one way and 400 the other).
    const handle = one(raw.handle);
    if (Array.isArray(raw.handle) && typeof handle !== 'string') throw apiError('BAD_REQUEST', "parameter 'handle': given more than once with different values");
    if (typeof handle !== 'string' || handle === '') throw apiError('BAD_REQUEST', "parameter 'handle' is required (from POST /v1/connect)");
    const hash = handleHash(handle);
    const session = dir.get(hash) ?? (s.cluster ? await dir.findElsewhere(hash, s.cluster) : undefined);
    // Another customer's handle is as unknown as a made-up one.
    if (!session || session.customer_id !== principal.customerId) {
      throw apiError('SESSION_NOT_FOUND', 'session handle unknown or disconnected: POST /v1/connect for a new one');
    }
    assertAccountScope(principal, session.account_id);
    const schema = def[session.platform];
    if (!schema) {
      const alt = COUNTERPART[op];
      throw apiError('OPERATION_NOT_ON_PLATFORM', `${op} is not a ${session.platform} operation${alt && OPERATIONS[alt]?.[session.platform] ? `; use ${alt}${COUNTERPART_NOTE[op] ?? ''}` : ''}`);
    }
    if (def.kind === 'trade') {
      assertCanTrade(principal);
      // §4.4/§4.5 give the gateway's trade operations no idempotency id (a `clientOrderId` query
      // parameter is refused as unknown). The header must not be ignored silently either: a bot that
      // retried with it would get a second order. Refused before anything is sent.
      if (headers['idempotency-key'] !== undefined) {
        throw apiError('BAD_REQUEST', 'header Idempotency-Key: gateway trade operations take no idempotency id, so nothing was sent; for an idempotent order use the classic /OrderSend with clientOrderId');
      }
      s.storage.assertWritable();
    }
    // Every key of the customer shares the account's one session (SPEC §3): a read-only key (a
    // dashboard, say) must not end it under the bot that trades with it.
    if (op === 'Disconnect' && principal.readOnly) throw apiError('READ_ONLY_KEY', 'a read-only key cannot end the session (it is shared with the keys that trade)');
    const parsed = schema.safeParse(raw);
    if (!parsed.success) throw queryError(parsed.error as z.ZodError);
    // Nor its subscriptions: a read-only key streams (SPEC §2), so it may add one, but ending one
    // (or replacing them) would stop the pushes of the key that trades. Changing an interval is
    // refused in the shard, which knows the session's subscriptions (addOnly).
    const addOnly = principal.readOnly && def.kind === 'subscribe';
    if (addOnly && (/^Un[Ss]ubscribe/.test(op) || (parsed.data as { replace?: boolean }).replace === true)) {
      throw apiError('READ_ONLY_KEY', "a read-only key cannot end the session's subscriptions (they are shared with the keys that trade); it may add its own");
    }
    const result = await s.shards.call(session.account_id, 'session.op', {
      accountId: session.account_id, handleHash: hash, op, args: stripHandle(parsed.data), ...(addOnly ? { addOnly } : {}),
      // A trade is never re-sent after a shard restart: the caller sees 503 and checks OpenedOrders.
    }, { retryOnRestart: def.kind !== 'trade' });
    if (op === 'Disconnect') dir.invalidate(hash);
    return result;
  };

  // Both platforms' schemas, named, so the document can say which platform requires a parameter:
  // asked for by the document only, so not built with the route table (proxySchemas.ts lazyOp).
  const withPlatformDocs = (route: AnyRoute, def: OpDef): AnyRoute => {
    const labels = (['P5', 'P4'] as const).filter((p) => p in def);
    return Object.defineProperties(route, {
      docQuery: { enumerable: true, get: () => labels.map((p) => def[p]!) },
      docQueryLabels: { enumerable: true, value: labels },
    });
  };
  const routes: AnyRoute[] = Object.entries(OPERATIONS).map(([op, def]) => withPlatformDocs(
    defineRoute({
      method: 'get', path: `/v1/proxy/${op}`, family: 'gateway', auth: 'api', tags: ['gateway'],
      orders: def.kind === 'trade', changesState: def.kind !== 'read',
      summary: def.summary, description: describeParams(op, def), response: PROXY_RESPONSES[op as keyof typeof PROXY_RESPONSES],
      errors: ['BAD_REQUEST', 'INVALID_PARAMETER', 'API_KEY_REQUIRED', 'INVALID_API_KEY', 'SESSION_NOT_FOUND', 'OPERATION_NOT_ON_PLATFORM', 'ACCOUNT_SCOPE',
        ...(def.kind === 'trade' ? (['READ_ONLY_KEY', 'TRADE_REQUEST_ERROR', 'STORAGE_UNAVAILABLE'] as const) : op === 'Disconnect' || def.kind === 'subscribe' ? (['READ_ONLY_KEY'] as const) : []), 'NOT_CONNECTED', 'SERVICE_UNAVAILABLE', 'TERMINAL_ERROR',
        ...(op in MIN_BUILD ? (['NOT_ON_THIS_TERMINAL'] as const) : [])],
      handler: async ({ req, principal }) => ({ body: await serve(op, req.query, principal!, req.headers) }),
    }), def));
  routes.push(defineRoute({
    // No key is looked at: like the fallback's 404/405, this answer says only that the route does
    // not exist (in that form), and a 401 here would count toward the failed-auth block.
    method: 'any', path: '/v1/proxy/:operation', family: 'gateway', auth: 'none', tags: ['gateway'],
    summary: 'Unknown gateway operation (404); a known one with another method than GET (405)', successStatus: null, errors: ['ROUTE_NOT_FOUND', 'METHOD_NOT_ALLOWED'],
    handler: ({ params, req }) => {
      const op = params[0]!;
      // Reached by a known operation only with another method than GET.
      if (Object.hasOwn(OPERATIONS, op)) throw methodNotAllowed(`/v1/proxy/${op}`, req.method, ['GET'], 'gateway operations are GET');
      throw apiError('ROUTE_NOT_FOUND', `unknown gateway operation '${op}'`);
    },
  }));
  return routes;
}
