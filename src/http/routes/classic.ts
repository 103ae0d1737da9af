// Classic routes (SPEC §4.1): root-level paths addressed with ?id=<account uuid> (alias accountId)
// and x-api-key. Every route is a thin record: access checks here in the main thread, the work in
// the account's shard ('account.op' / 'account.trade'). /GetQuote keeps a 250 ms cache here, in
// front of the shard hop, so cached quotes cost no cross-thread round trip; cached=0 bypasses it.
import { z } from 'zod';
import { LATEST_TIME_MS } from '../../market/serverClock.js';
import type { ErrorCode } from '../../errors.js';
import { apiError } from '../../errors.js';
import type { TradeOp } from '../../market/orderSchemas.js';
import type { OrderTypeInput } from '../../market/orders.js';
import type { Services } from '../services.js';
import { accepting, aliasConflict, isCalendarDate, one, qComment, qInt, qList, qLots, qNumber, qPrice, qPriceOrNone, qString, qSymbol, qTicket, repeated, strictParams } from '../schemas.js';
import type { SeatRow } from '../../store/tenancy.js';
import { defineRoute, type AnyRoute } from '../route.js';
import type { ArgsOf, ResultOf } from '../../runtime/protocol.js';
import type { RequestInfo } from '../request.js';
import type { Reply } from '../respond.js';
import type { CallOptions } from '../../runtime/shardSet.js';
import { AccountAccess } from './classicAccess.js';
import { CLASSIC_RESPONSES } from './classicResponses.js';

export const QUOTE_CACHE_MS = 250;

/** A date-time parameter as epoch ms, or undefined when it is not one. Strict: a calendar date that
 *  does not exist (2026-02-30) is refused, not rolled over, and so is an epoch beyond year 9999. */
export function parseTimeParam(s: string): number | undefined {
  const t = s.trim();
  let ms: number;
  if (/^\d+$/.test(t)) {
    if (t.length > 13) return undefined;
    ms = t.length <= 10 ? Number(t) * 1000 : Number(t);
  } else {
    const date = /^(\d{4})-(\d{2})-(\d{2})/.exec(t);
    if (!date) return undefined;
    if (!isCalendarDate(Number(date[1]), Number(date[2]), Number(date[3]))) return undefined;
    ms = Date.parse(/(Z|[+-]\d\d:?\d\d)$/i.test(t) ? t : `${t}Z`);
  }
  return Number.isFinite(ms) && ms >= 0 && ms <= LATEST_TIME_MS ? ms : undefined;
}

/** `yyyy-MM-ddTHH:mm:ss` (UTC, SPEC §4 conventions), any ISO 8601 with a zone, or epoch seconds/ms. */
export const qTime = () =>
  z.preprocess((v) => {
    const s = one(v);
    if (typeof s !== 'string' || s.trim() === '') return s;
    return parseTimeParam(s) ?? s;
  }, z.number({ error: 'expected a date-time yyyy-MM-ddTHH:mm:ss (UTC), an ISO 8601 date-time with a zone, or epoch seconds/ms, up to year 9999' }))
    // What a client sends (the OpenAPI document would otherwise show the parsed number).
    .meta({ type: 'string', description: 'yyyy-MM-ddTHH:mm:ss (UTC), an ISO 8601 date-time with a zone, or epoch seconds / milliseconds' });

// An empty `id=` is a missing id (400 ACCOUNT_ID_REQUIRED asking for ?id=), not a malformed one.
const idParam = () => z.preprocess((v) => (v === '' ? undefined : v), qString().optional());
const idFields = {
  id: idParam().describe('Account UUID'),
  accountId: idParam().describe('Alias of id'),
};
const symbolsFields = {
  symbol: qList().optional().describe('Symbol names: repeat the parameter or comma-separate'),
  symbols: qList().optional().describe('Alias of symbol'),
};

/** Parameter and alias. Both given with different values is refused (400, naming the alias), as a
 *  parameter given twice is (`one`), and as the gateway proxy does by merging an alias into its
 *  parameter: `volume=0.01&lots=0.05` filled 0.01, `id=A&accountId=B` answered for A. */
const ALIASES: ReadonlyArray<readonly [string, string]> = [['id', 'accountId'], ['volume', 'lots'], ['lots', 'volume'], ['stopLimitPrice', 'stoplimit']];
function withAliases<S extends z.ZodRawShape>(shape: S, strict = false) {
  const pairs = ALIASES.filter(([a, b]) => a in shape && b in shape && Object.keys(shape).indexOf(a) < Object.keys(shape).indexOf(b));
  return (strict ? strictParams(shape) : z.object(shape)).superRefine((v, ctx) => {
    const q = v as Record<string, unknown>;
    for (const [a, b] of pairs) {
      if (q[a] !== undefined && q[b] !== undefined && q[a] !== q[b]) {
        ctx.addIssue({ code: 'custom', path: [b], message: aliasConflict(a) });
      }
    }
  });
}

const baseErrors: ErrorCode[] = [
  'ACCOUNT_ID_REQUIRED', 'API_KEY_REQUIRED', 'INVALID_API_KEY', 'NO_SUBSCRIPTION', 'ACCOUNT_SCOPE', 'NOT_FOUND',
  'TERMINAL_ERROR', 'NOT_CONNECTED', 'SERVICE_UNAVAILABLE', 'AUTH_THROTTLED',
];

interface ClassicSpec {
  path: string;
  summary: string;
  fields?: z.ZodRawShape;
  /** Names symbol/symbols lists (merged into `symbols`). */
  many?: boolean;
  errors?: readonly ErrorCode[];
}

/** An order type as the classic routes read it (`parseOrderType`): a name, any case, or its code 0-7.
 *  Typed so (the SDK's `operation: 0` as well as `'Buy'`); any other text stays a string here and is
 *  refused by the order's own check. */
const orderTypeText = () => accepting<OrderTypeInput | (string & {})>()(qString());

/** Exported with their literal types: the SDK (src/client) derives its parameter types from them. */
export const READ_ROUTE_DEFS = [
  { path: 'Account', summary: "The holder's full profile (personal data of the broker account owner)" },
  { path: 'AccountSummary', summary: 'Balance, equity, profit, margin, leverage, currency; synced=false while reconnecting (last-known values)' },
  { path: 'AccountDetails', summary: 'Account number, name, server and time zone, currency, margin-call/stop-out levels, group, type, leverage' },
  { path: 'IsInvestor', summary: 'Whether the connection uses an investor (read-only) password' },
  { path: 'OpenedOrders', summary: 'Open positions and pending orders (UTC times)' },
  { path: 'OpenedOrdersTickets', summary: 'Tickets of open positions and pending orders' },
  { path: 'ClosedOrders', summary: 'Last 100 orders that left the book or were closed (UTC times)' },
  { path: 'OpenedOrder', summary: 'One open position or pending order', fields: { ticket: qTicket() } },
  { path: 'Symbols', summary: 'Full metadata of every symbol' },
  { path: 'SymbolList', summary: 'Symbol names' },
  { path: 'ServerTimezone', summary: "Offset of the broker server's clock from UTC" },
  { path: 'ServerTimezoneInfo', summary: "The broker server's time zone: description, DST rule, current offset" },
  { path: 'Mails', summary: 'Broker mails: always [] (SPEC §1)' },
  { path: 'GetQuoteMany', summary: 'Latest quotes of several symbols', many: true, errors: ['NOT_ON_THIS_TERMINAL'] },
  { path: 'MarketWatchMany', summary: 'Market watch rows (quote, spread, digits) of several symbols', many: true, errors: ['NOT_ON_THIS_TERMINAL'] },
  { path: 'IsTradeSessionMany', summary: 'Whether trading is open now, per symbol', many: true, errors: ['NOT_ON_THIS_TERMINAL'] },
  { path: 'IsQuoteSessionMany', summary: 'Whether quoting is open now, per symbol', many: true, errors: ['NOT_ON_THIS_TERMINAL'] },
  { path: 'GetTickValueMany', summary: 'Tick value and size per symbol', many: true, errors: ['NOT_ON_THIS_TERMINAL'] },
  {
    path: 'TickValueWithSize', summary: 'Tick value, tick size, point, contract size per symbol, and the tick value for `lots`', many: true,
    fields: { lots: qLots().optional(), volume: qLots().optional().describe('Alias of lots') }, errors: ['NOT_ON_THIS_TERMINAL'],
  },
  { path: 'SymbolParamsMany', summary: 'symbolInfo of several symbols', many: true, errors: ['NOT_ON_THIS_TERMINAL'] },
  { path: 'SymbolParams', summary: 'symbolInfo of a symbol (stopsLevel = limitPoints, freezeLevel, ...)', fields: { symbol: qSymbol() } },
  { path: 'SymbolSessions', summary: 'Session arrays of a symbol: always empty (SPEC §1)', fields: { symbol: qSymbol() } },
  { path: 'IsTradeSession', summary: 'Whether trading of the symbol is open now', fields: { symbol: qSymbol() } },
  { path: 'IsQuoteSession', summary: 'Whether quoting of the symbol is open now', fields: { symbol: qSymbol() } },
  {
    path: 'RequiredMargin', summary: 'Margin needed to open a position',
    fields: {
      symbol: qSymbol().optional(), lots: qLots().optional(), volume: qLots().optional().describe('Alias of lots'), type: orderTypeText().optional(),
      operation: orderTypeText().optional(), price: qPrice().optional(),
    },
  },
  {
    path: 'OrderHistory', summary: 'Orders and deals in [from, to) (UTC); consistent with /OrderSend as soon as it answered',
    fields: { from: qTime().optional(), to: qTime().optional() },
  },
  {
    path: 'BalanceHistory', summary: 'Balance operations in [from, to) (P5 only; 501 on P4)',
    fields: { from: qTime().optional(), to: qTime().optional() }, errors: ['NOT_ON_THIS_TERMINAL'],
  },
] as const satisfies readonly ClassicSpec[];
const READ_ROUTES: readonly ClassicSpec[] = READ_ROUTE_DEFS;
export const ID_FIELDS = idFields;

/** Slippage (deviation) in points: not negative. */
const qSlippage = () => qNumber().pipe(z.number().min(0).max(100_000));

/** Exported with their literal types for the SDK, as READ_ROUTE_DEFS. Value ranges as on /v1/proxy's
 *  order operations (0 stays MT's "none" for prices): a value no order can have is 400 before the
 *  clientOrderId is claimed, not sent to become a final broker rejection (or, a negative slippage,
 *  taken). */
export const TRADE_FIELDS = {
  OrderSend: {
    symbol: qSymbol(), operation: orderTypeText().describe('Buy, Sell, BuyLimit, SellLimit, BuyStop, SellStop, BuyStopLimit, SellStopLimit (P5) or the code 0-7'),
    volume: qLots().optional(), lots: qLots().optional().describe('Alias of volume'), price: qPriceOrNone().optional(), slippage: qSlippage().optional(),
    stoploss: qPriceOrNone().optional(), takeprofit: qPriceOrNone().optional(), comment: qComment().optional(), magic: qInt().pipe(z.number().int().min(0).max(2 ** 31 - 1)).optional(),
    expiration: qTime().optional(), stopLimitPrice: qPrice().optional(), stoplimit: qPrice().optional().describe('Alias of stopLimitPrice'),
    clientOrderId: z.preprocess(one, z.string(repeated)).optional()
      .describe('Idempotency id: 1-64 of A-Z a-z 0-9 _ . : - (or header Idempotency-Key)'),
  },
  OrderModify: {
    ticket: qTicket(), stoploss: qPriceOrNone().optional(), takeprofit: qPriceOrNone().optional(), price: qPriceOrNone().optional(),
    expiration: qTime().optional(), stopLimitPrice: qPrice().optional(), stoplimit: qPrice().optional(),
    clientOrderId: qString().optional(),
  },
  OrderClose: {
    ticket: qTicket(), lots: qLots().optional(), volume: qLots().optional(), price: qPriceOrNone().optional(), slippage: qSlippage().optional(),
    comment: qComment().optional(), clientOrderId: qString().optional(),
  },
  OrderDelete: { ticket: qTicket(), clientOrderId: qString().optional() },
  OrderCloseBy: { ticket: qTicket(), byTicket: qTicket(), comment: qComment().optional(), clientOrderId: qString().optional() },
} satisfies Record<TradeOp, z.ZodRawShape>;
const tradeFields: Record<TradeOp, z.ZodRawShape> = TRADE_FIELDS;

/** Query parameters that address the call rather than describe the trade (`stoplimit` is folded into stopLimitPrice). */
const NOT_TRADE_ARGS = new Set(['id', 'accountId', 'clientOrderId', 'stoplimit']);
type TradeCall = ArgsOf<'account.trade'>;
/** A trade is never re-sent after a shard restart (its outcome is the record's to tell). */
const NO_RETRY: CallOptions = { retryOnRestart: false };
const REPLAY_HEADERS: Readonly<Record<string, string>> = Object.freeze({ 'idempotent-replay': 'true' });

/** A trade operation's query schema: strict, with its aliases. */
export const tradeQuery = (op: TradeOp) => withAliases({ ...idFields, ...tradeFields[op] }, true);
/** /OrderSend's clientOrderId, validated alone (QueryMemo's varying parameter). */
export const ORDER_SEND_VARIES = { param: 'clientOrderId', schema: z.object({ clientOrderId: TRADE_FIELDS.OrderSend.clientOrderId }), anyString: true };

const TRADE_SUMMARY: Record<TradeOp, string> = {
  OrderSend: 'Place a market or pending order; idempotent with clientOrderId / Idempotency-Key',
  OrderModify: 'Change SL/TP (and price/expiration of a pending order)',
  OrderClose: 'Close a position, wholly or partly',
  OrderDelete: 'Cancel a pending order',
  OrderCloseBy: 'Close a position by an opposite one',
};

export function classicRoutes(s: Services): AnyRoute[] {
  const access = new AccountAccess(s);
  // Serialized once per refresh: a cache hit writes the stored bytes, no JSON.stringify per request.
  const quoteCache = new Map<string, { at: number; raw: string }>();
  const routes: AnyRoute[] = [];
  const fetchQuote = async (row: SeatRow, symbol: string) => {
    const body = await s.shards.call(row.id, 'account.op', { accountId: row.id, op: 'GetQuote', args: { symbol } });
    const raw = JSON.stringify(body);
    if (quoteCache.size > 100_000) quoteCache.clear();
    quoteCache.set(`${row.id}|${symbol}`, { at: s.clock.now(), raw });
    return { body: null, raw, contentType: 'application/json' };
  };
  const quoteReply = (row: SeatRow, q: { symbol: string; cached?: string | undefined }) => {
    if (q.cached !== '0') {
      const hit = quoteCache.get(`${row.id}|${q.symbol}`);
      // Aged by the injected clock (a test can hold it still); one stepped back serves no entry from its future.
      const age = hit ? s.clock.now() - hit.at : -1;
      if (hit && age >= 0 && age < QUOTE_CACHE_MS) return { body: null, raw: hit.raw, contentType: 'application/json' };
    }
    return fetchQuote(row, q.symbol);
  };

  for (const spec of READ_ROUTES) {
    const query = withAliases({ ...idFields, ...(spec.many ? symbolsFields : {}), ...spec.fields });
    routes.push(defineRoute({
      method: 'get', path: `/${spec.path}`, family: 'classic', auth: 'api', tags: ['classic'], summary: spec.summary,
      query, errors: [...baseErrors, 'BAD_REQUEST', ...(spec.errors ?? [])],
      ...(CLASSIC_RESPONSES[spec.path] ? { response: CLASSIC_RESPONSES[spec.path] } : {}),
      handler: async ({ query: q, principal }) => {
        const row = await access.resolve(principal!, q as { id?: string; accountId?: string }, false);
        const args: Record<string, unknown> = { ...(q as Record<string, unknown>) };
        delete args.id;
        delete args.accountId;
        if (spec.many) {
          args.symbols = [...((q as { symbol?: string[] }).symbol ?? []), ...((q as { symbols?: string[] }).symbols ?? [])];
          delete args.symbol;
        }
        return { body: await s.shards.call(row.id, 'account.op', { accountId: row.id, op: spec.path, args }) };
      },
    }));
  }

  routes.push(defineRoute({
    method: 'get', path: '/GetQuote', family: 'classic', auth: 'api', tags: ['classic'],
    summary: 'Latest bid/ask of a symbol, from a 250 ms cache unless cached=0',
    query: withAliases({ ...idFields, symbol: qSymbol(), cached: qString().pipe(z.enum(['0', '1'], { error: 'use 0 to bypass the 250 ms quote cache or 1 (default)' })).optional().describe('0 bypasses the 250 ms quote cache') }),
    errors: [...baseErrors, 'BAD_REQUEST'], response: CLASSIC_RESPONSES.GetQuote!,
    // Not async: a cache hit answers in the same tick, without a promise per hop.
    handler: ({ query: q, principal }) => {
      const row = access.resolve(principal!, q, false);
      return row instanceof Promise ? row.then((r) => quoteReply(r, q)) : quoteReply(row, q);
    },
  }));

  routes.push(defineRoute({
    method: 'get', path: '/CheckConnect', family: 'classic', auth: 'api', tags: ['classic'],
    summary: "Reports the account's connection and restores it (an ongoing reconnect wait is cut short)",
    query: withAliases(idFields), errors: baseErrors,
    handler: async ({ query: q, principal }) => {
      const row = await access.resolve(principal!, q, false);
      const st = await s.shards.call(row.id, 'account.check', { accountId: row.id });
      return { body: { connected: st.connected, connection: st.phase, state: st.state, server: st.server, platform: st.platform, build: st.build } };
    },
  }));

  routes.push(defineRoute({
    method: 'get', path: '/Ping', family: 'classic', auth: 'api', tags: ['classic'],
    summary: 'Liveness of the gateway for this account (does not touch the broker)',
    query: withAliases(idFields), errors: baseErrors,
    handler: async ({ query: q, principal }) => {
      await access.resolve(principal!, q, false);
      return { body: { pong: true, time: new Date(s.clock.now()).toISOString() } };
    },
  }));

  for (const op of Object.keys(tradeFields) as TradeOp[]) {
    // The answer's mapping, made once per operation: not an async frame and closures per order.
    const answered = (r: ResultOf<'account.trade'>): Reply => {
      s.tradeOutcomes?.note(op, r);
      return r.replay
        ? { status: r.status, body: null, raw: r.json, contentType: 'application/json', headers: REPLAY_HEADERS }
        : { status: r.status, body: null, raw: r.json, contentType: 'application/json' };
    };
    const failed = (error: unknown): never => {
      s.tradeOutcomes?.note(op, { error });
      throw error;
    };
    const trade = (row: SeatRow, query: Record<string, unknown>, req: RequestInfo): Promise<Reply> => {
      const fromQuery = query.clientOrderId as string | undefined;
      const fromHeader = req.headers['idempotency-key'];
      if (fromQuery !== undefined && fromHeader !== undefined && fromQuery !== fromHeader) {
        throw apiError('BAD_REQUEST', 'clientOrderId and Idempotency-Key differ: send one of them');
      }
      const clientOrderId = fromQuery ?? fromHeader;
      // A full disk: refused before the idempotency record or the broker sees it.
      s.storage.assertWritable();
      // Copied without the routing keys rather than deleting them: deletes leave the object in
      // V8's slow dictionary mode, which the post to the shard then serializes.
      const args: Record<string, unknown> = {};
      for (const k in query) if (!NOT_TRADE_ARGS.has(k)) args[k] = query[k];
      if (query.stoplimit !== undefined && args.stopLimitPrice === undefined) args.stopLimitPrice = query.stoplimit;
      // Literals, not `{ ...x }` (V8's slow path).
      const call: TradeCall = { accountId: row.id, op, args };
      if (clientOrderId !== undefined) call.clientOrderId = clientOrderId;
      return s.shards.call(row.id, 'account.trade', call, NO_RETRY).then(answered, failed);
    };
    // Apart from the handler: its closure would make V8 allocate a context at every order.
    const tradeWhenActive = (found: Promise<SeatRow>, query: Record<string, unknown>, req: RequestInfo) => found.then((row) => trade(row, query, req));
    routes.push(defineRoute({
      // A bot sends the same order with a new clientOrderId each time; the other trade operations
      // name a ticket, new in every call, so keeping their queries would buy nothing.
      ...(op === 'OrderSend' ? { queryVaries: ORDER_SEND_VARIES } : {}),
      method: 'get', path: `/${op}`, family: 'classic', auth: 'api', tags: ['classic', 'trading'], summary: TRADE_SUMMARY[op], trading: true,
      description: 'Times in the response are UTC. A query parameter the route does not take (e.g. stopLoss for stoploss) is 400 INVALID_PARAMETER and nothing is sent. A broker rejection answers 400 TRADE_REQUEST_ERROR with the broker reason; it is final and replayed for the same clientOrderId (header Idempotent-Replay: true).',
      // Strict: a parameter the route does not take is a 400 INVALID_PARAMETER, nothing sent
      // (`stopLoss=` for `stoploss=` opened a position without its stop-loss). Read routes stay lenient.
      query: tradeQuery(op), response: CLASSIC_RESPONSES[op]!,
      errors: [...baseErrors, 'BAD_REQUEST', 'INVALID_PARAMETER', 'TRADE_REQUEST_ERROR', 'READ_ONLY_KEY', 'IDEMPOTENCY_UNCERTAIN', 'IDEMPOTENCY_KEY_REUSED', 'NOT_ON_THIS_TERMINAL', 'STORAGE_UNAVAILABLE'],
      // Not async: a refusal found here (account, key, parameters, disk) is thrown at once, and the
      // order's reply is the shard call's promise mapped by `answered`.
      handler: ({ query: q, principal, req }) => {
        // A promise only when the seat's status must be asked.
        const found = access.resolve(principal!, q as { id?: string; accountId?: string }, true);
        const query = q as Record<string, unknown>;
        return found instanceof Promise ? tradeWhenActive(found, query, req) : trade(found, query, req);
      },
    }));
  }
  return routes;
}

