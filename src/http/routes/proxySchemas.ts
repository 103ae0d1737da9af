// Parameters of every gateway operation (SPEC §4.4 P5, §4.5 P4), one zod schema per platform.
// The gateway validates them itself, strictly: an unknown parameter, a wrong type or an
// inconsistent order is a 400 before anything reaches the account's shard or the broker.
// Each schema turns the query into the normalized arguments the shard side executes
// (src/runtime/hosts/gatewayOps.ts), so the dialects differ here and nowhere else.
import { z } from 'zod';
import { ORDER_TYPES, type OrderType, type Side } from '../../market/orders.js';
import { checkExpirationType, checkOrder, type SendArgs, type TimeArg } from '../../market/orderSchemas.js';
import { TIMEFRAMES, TIMEFRAME_MINUTES, parseTimeframe, type Timeframe, type TimeframeInput } from '../../market/timeframes.js';
import type { Platform } from '../../market/server.js';
import { accepting, isCalendarDate, qBool, qComment, qInt, qList, qLots, qNumber, qPrice, qString, qSymbol, qTicket, strictParams } from '../schemas.js';

// ---- field helpers --------------------------------------------------------------------------

const symbol = () => qSymbol().pipe(z.string().max(32).regex(/^[A-Za-z0-9._#+\-]+$/, 'a symbol name such as EURUSD'));
const symbolList = () => qList().pipe(z.array(z.string().max(32).regex(/^[A-Za-z0-9._#+\-]+$/, 'symbol names such as EURUSD')).max(1000));
const positive = () => qNumber().pipe(z.number().positive().finite());
const nonNegative = () => qNumber().pipe(z.number().min(0).finite());
/** An order's or a close's price where 0 is MT's "none" (bots send price=0 for a market order): read as absent. */
const priceOrNone = () => nonNegative().transform((v) => (v === 0 ? undefined : v));
const ticket = () => qTicket();
const intervalMs = () => qInt().pipe(z.number().int().min(0).max(3_600_000));
const msNotOlder = () => qInt().pipe(z.number().int().min(0).max(60_000));
const comment = () => qComment();
const handle = () => qString().pipe(z.string().max(128));

/** `yyyy-MM-ddTHH:mm:ss` (seconds and time optional), read on the broker server clock. */
const SERVER_TIME_RE = /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,3}))?)?)?$/;
/** ISO 8601; without a zone it is read on the broker server clock like the others. */
const ISO_RE = /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?)?(Z|[+-]\d{2}:?\d{2})?$/;

function timeParser(re: RegExp, what: string) {
  return qString().transform((s, ctx): TimeArg => {
    const m = re.exec(s.trim());
    const bad = () => {
      ctx.addIssue({ code: 'custom', message: `expected ${what}` });
      return z.NEVER;
    };
    if (!m) return bad();
    const [y, mo, d, h, mi, sec] = [1, 2, 3, 4, 5, 6].map((i) => Number(m[i] ?? 0)) as [number, number, number, number, number, number];
    const ms = Number((m[7] ?? '0').slice(0, 3).padEnd(3, '0'));
    if (!isCalendarDate(y, mo, d) || h > 23 || mi > 59 || sec > 59) return bad();
    const wall = Date.UTC(y, mo - 1, d, h, mi, sec, ms);
    const zone = m[8];
    if (!zone) return { serverMs: wall };
    if (zone === 'Z') return { utcMs: wall };
    const zm = /^([+-])(\d{2}):?(\d{2})$/.exec(zone)!;
    // An offset is at most 23:59 (ISO 8601, and what Date.parse reads on the classic routes).
    if (Number(zm[2]) > 23 || Number(zm[3]) > 59) return bad();
    const off = (Number(zm[2]) * 60 + Number(zm[3])) * 60_000 * (zm[1] === '-' ? -1 : 1);
    return { utcMs: wall - off };
  });
}
const serverTime = () => timeParser(SERVER_TIME_RE, 'a time as yyyy-MM-ddTHH:mm:ss (broker server time)');
const isoTime = () => timeParser(ISO_RE, 'an ISO 8601 time, e.g. 2026-03-04T10:00:00 or 2026-03-04T08:00:00Z');

/** Timeframe given as minutes (P5 integers, P4 "string (minutes)") or as a name (M1, H4...). */
const timeframeMinutes = () =>
  accepting<TimeframeInput>()(qString().transform((s, ctx): Timeframe => {
    const tf = parseTimeframe(s.trim());
    if (!tf) {
      ctx.addIssue({ code: 'custom', message: `one of ${Object.values(TIMEFRAME_MINUTES).join(', ')} (minutes) or ${TIMEFRAMES.join(', ')}` });
      return z.NEVER;
    }
    return tf;
  }));
const timeframeName = () => qString().pipe(z.enum(TIMEFRAMES));

type SideName = Side | Lowercase<Side> | Uppercase<Side>;
const side = <Codes extends boolean>(allowCodes: Codes) =>
  accepting<SideName | (Codes extends true ? 0 | 1 | '0' | '1' : never)>()(qString().transform((s, ctx): Side => {
    const v = s.trim().toLowerCase();
    if (v === 'buy' || (allowCodes && v === '0')) return 'Buy';
    if (v === 'sell' || (allowCodes && v === '1')) return 'Sell';
    ctx.addIssue({ code: 'custom', message: allowCodes ? '"Buy" or "Sell" (or 0, 1)' : '"Buy" or "Sell"' });
    return z.NEVER;
  }));

/** Object schema over the raw query: strict (a misspelt parameter is an error, not ignored). */
function params<S extends z.ZodRawShape>(shape: S, aliases: Record<string, string> = {}) {
  const obj = strictParams({ handle: handle(), ...shape });
  return z.preprocess((raw) => {
    if (!raw || typeof raw !== 'object') return raw;
    const q = { ...(raw as Record<string, unknown>) };
    for (const [alias, canonical] of Object.entries(aliases)) {
      if (q[alias] === undefined) continue;
      const a = q[alias];
      const c = q[canonical];
      q[canonical] = c === undefined ? a : ([] as unknown[]).concat(c, a);
      delete q[alias];
    }
    return q;
  }, obj);
}

// ---- order sends: each dialect read into SendArgs, checked with the shared checkOrder -----------

const volume = qLots;

/** The OrderSend parameters both dialects take alike (between volume and the dialect's own). */
const sendCommon = () => ({
  price: priceOrNone().optional(),
  slippage: qInt().pipe(z.number().int().min(0).max(100_000)).optional(),
  stoploss: nonNegative().optional(),
  takeprofit: nonNegative().optional(),
  comment: comment().optional(),
});

const p5OrderSend = () => params({
  symbol: symbol(),
  operation: qInt().pipe(z.number().int().min(0).max(ORDER_TYPES.length - 1, `0..${ORDER_TYPES.length - 1}: 0 Buy, 1 Sell, 2 BuyLimit, 3 SellLimit, 4 BuyStop, 5 SellStop, 6 BuyStopLimit, 7 SellStopLimit`)),
  volume: volume(),
  ...sendCommon(),
  stopLimitPrice: positive().optional(),
  expiration: serverTime().optional(),
  expirationType: qInt().pipe(z.number().int().min(0).max(3)).optional(),
  placedType: qInt().pipe(z.number().int().min(0).max(20)).optional(),
}).transform((q, ctx) => {
  const { handle: _h, operation, ...rest } = q;
  const o: SendArgs = { ...rest, type: ORDER_TYPES[operation]! };
  checkOrder(o, ctx);
  return o;
});

const P4_OPERATIONS = ['Buy', 'Sell', 'BuyLimit', 'SellLimit', 'BuyStop', 'SellStop'] as const;
type P4Operation = (typeof P4_OPERATIONS)[number];
const p4OrderSend = () => params({
  symbol: symbol(),
  operation: accepting<P4Operation | Lowercase<P4Operation>>()(qString().transform((s, ctx) => {
    const t = P4_OPERATIONS.find((x) => x.toLowerCase() === s.trim().toLowerCase());
    if (!t) {
      ctx.addIssue({ code: 'custom', message: `one of ${P4_OPERATIONS.join(', ')}` });
      return z.NEVER;
    }
    return t as OrderType;
  })),
  volume: volume(),
  ...sendCommon(),
  magic: qInt().pipe(z.number().int().min(0).max(2 ** 31 - 1)).optional(),
  expiration: serverTime().optional(),
  placedType: qString().pipe(z.string().max(32)).optional(),
}).transform((q, ctx) => {
  const { handle: _h, operation, ...rest } = q;
  const o: SendArgs = { ...rest, type: operation };
  checkOrder(o, ctx);
  return o;
});

const modifyCommon = () => ({
  ticket: ticket(),
  stoploss: nonNegative(),
  takeprofit: nonNegative(),
  price: positive().optional(),
  expiration: serverTime().optional(),
});

// ---- the operation table -----------------------------------------------------------------------

export type OpKind = 'session' | 'read' | 'trade' | 'subscribe';

export interface OpDef {
  summary: string;
  kind: OpKind;
  /** The schema per platform that has the operation. */
  P4?: z.ZodType;
  P5?: z.ZodType;
  /** No handle needed (Ping). */
  noHandle?: boolean;
}

const none = () => params({});

/** An operation whose schemas are built when first asked for (a request of that operation on that
 *  platform, or the OpenAPI document), not when the module loads: the table's ~70 schemas cost a
 *  gateway process ~40 ms of CPU at each start, most of them for operations it is never sent.
 *  `'P5' in def` says whether a platform has the operation without building its schema. */
function lazyOp<K extends OpKind, P extends { P4?: () => z.ZodType; P5?: () => z.ZodType }>(summary: string, kind: K, make: P, more: Pick<OpDef, 'noHandle'> = {}) {
  const def = { summary, kind, ...more } as { summary: string; kind: K; noHandle?: boolean } & { readonly [X in keyof P]-?: P[X] extends () => infer S ? S : never };
  for (const p of ['P4', 'P5'] as const) {
    const build = make[p];
    if (!build) continue;
    let schema: z.ZodType | undefined;
    Object.defineProperty(def, p, { enumerable: true, get: () => (schema ??= build()) });
  }
  return def;
}

const both = <S extends z.ZodType>(summary: string, kind: OpKind, schema: () => S) => lazyOp(summary, kind, { P4: schema, P5: schema });

/** Exported with their literal types: the SDK (src/client) derives its parameter types from them. */
export const OPERATION_DEFS = {
  CheckConnect: both('Reports and restores the connection', 'session', none),
  ConnectionStatus: both('Connection state (informational)', 'session', none),
  Disconnect: both('Closes the session and invalidates the handle', 'session', none),
  Ping: lazyOp('Liveness of the gateway; no handle needed', 'session', { P4: () => strictParams({ handle: z.unknown().optional() }), P5: () => strictParams({ handle: z.unknown().optional() }) }, { noHandle: true }),
  Account: lazyOp("The account holder's full profile (personal data)", 'read', { P5: none }),
  AccountSummary: both('Balance, equity, margin', 'read', none),
  AccountDetails: both('Account number, server, time zone, leverage...', 'read', none),
  SymbolList: both('Symbol names', 'read', none),
  Symbols: lazyOp('Full metadata of every symbol', 'read', { P5: none }),
  SymbolParams: both('Metadata of one symbol', 'read', () => params({ symbol: symbol() })),
  SymbolParamsMany: lazyOp('Metadata of several symbols (all when none given)', 'read', {
    P5: () => params({ symbols: symbolList().optional(), limit: qInt().pipe(z.number().int().min(1).max(100_000)).optional(), filter: qList().pipe(z.array(z.string().max(64)).max(100)).optional() }, { symbol: 'symbols' }),
    P4: () => params({ symbols: symbolList().optional() }, { symbol: 'symbols' }),
  }),
  GetQuote: lazyOp('Latest tick of a symbol', 'read', { P5: () => params({ symbol: symbol(), msNotOlder: msNotOlder().default(0) }) }),
  Quote: lazyOp('Latest tick of a symbol (P4)', 'read', { P4: () => params({ symbol: symbol(), msNotOlder: msNotOlder().default(0) }) }),
  GetQuoteMany: both('Latest ticks of several symbols', 'read', () => params({ symbols: symbolList().pipe(z.array(z.string()).min(1)), msNotOlder: msNotOlder().default(0) }, { symbol: 'symbols' })),
  MarketWatchMany: lazyOp('Market watch rows (quote, daily range) of several symbols', 'read', { P5: () => params({ symbols: symbolList().pipe(z.array(z.string()).min(1)) }, { symbol: 'symbols' }) }),
  OpenedOrders: lazyOp('Open positions and pending orders', 'read', {
    P5: () => params({ sort: qInt().pipe(z.number().int().min(0).max(1)).optional(), ascending: qBool().default(true) }),
    P4: none,
  }),
  OpenedOrder: both('One open position or pending order', 'read', () => params({ ticket: ticket() })),
  OpenedOrdersTickets: both('Tickets of open positions and pending orders', 'read', none),
  ClosedOrders: lazyOp('Last 100 orders closed since this handle connected', 'read', { P5: none }),
  OrderHistory: lazyOp('Orders and deals in a time range', 'read', {
    P5: () => params({ from: serverTime(), to: serverTime(), sort: qInt().pipe(z.number().int().min(0).max(1)).optional(), ascending: qBool().default(true), filter: qList().pipe(z.array(z.string().max(64)).max(50)).optional() }),
    P4: () => params({ from: serverTime(), to: serverTime().optional() }),
  }),
  RequiredMargin: lazyOp('Margin a new position would need', 'read', {
    P5: () => params({ symbol: symbol(), lots: volume(), type: side(true).default('Buy'), price: qPrice().optional() }),
    P4: () => params({ symbol: symbol(), lots: volume(), type: side(false).default('Buy'), price: qPrice().optional() }),
  }),
  OrderSendSafe: lazyOp('Place an order (integer operation codes; stop-limit supported)', 'trade', { P5: p5OrderSend }),
  OrderSend: lazyOp('Place an order (operation by name; magic number)', 'trade', { P4: p4OrderSend }),
  OrderModifySafe: lazyOp('Change SL/TP (and price/expiration of a pending order)', 'trade', {
    P5: () => params({ ...modifyCommon(), expirationType: qInt().pipe(z.number().int().min(0).max(3)).optional(), stoplimit: positive().optional() })
      .superRefine((q, ctx) => checkExpirationType(q.expirationType, q.expiration !== undefined, (path, message) => ctx.addIssue({ code: 'custom', path: [path], message }))),
  }),
  OrderModify: lazyOp('Change SL/TP (and price/expiration of a pending order)', 'trade', { P4: () => params(modifyCommon()) }),
  OrderCloseSafe: lazyOp('Close a position, fully or partly; on a pending order, cancel it', 'trade', {
    P5: () => params({ ticket: ticket(), lots: volume().optional(), price: priceOrNone().optional(), slippage: qInt().pipe(z.number().int().min(0).max(100_000)).optional(), comment: comment().optional() }),
  }),
  OrderClose: lazyOp('Close a ticket, fully or partly', 'trade', {
    P4: () => params({ ticket: ticket(), lots: volume().optional(), price: priceOrNone().optional(), slippage: qInt().pipe(z.number().int().min(0).max(100_000)).optional() }),
  }),
  OrderDelete: lazyOp('Cancel a pending order', 'trade', { P4: () => params({ ticket: ticket() }) }),
  PriceHistory: lazyOp('Candles in a time range (superseded by PriceHistoryV2)', 'read', {
    P5: () => params({ symbol: symbol(), from: serverTime(), to: serverTime(), timeFrame: timeframeMinutes(), timeoutSeconds: qInt().pipe(z.number().int().min(1).max(300)).default(30) }),
  }),
  PriceHistoryV2: lazyOp('Candles in a time range (ISO 8601 from/to)', 'read', {
    P5: () => params({ symbol: symbol(), from: isoTime(), to: isoTime(), timeFrame: timeframeMinutes(), timeoutSeconds: qInt().pipe(z.number().int().min(1).max(300)).default(30) }),
  }),
  QuoteHistory: lazyOp('The `count` candles back from `from`', 'read', {
    P4: () => params({ symbol: symbol(), timeframe: timeframeName(), from: serverTime(), count: qInt().pipe(z.number().int().min(1).max(100_000)) }),
  }),
  EquityHistory: both('(time, equity) points since `from`', 'read', () => params({ from: serverTime(), excludeSameBars: qBool().default(false) })),
  Subscribe: both('Push quotes of a symbol on /ws', 'subscribe', () => params({ symbol: symbol(), interval: intervalMs().default(0) })),
  SubscribeMany: lazyOp('Push quotes of several symbols on /ws', 'subscribe', {
    P5: () => params({ symbols: symbolList().pipe(z.array(z.string()).min(1)), interval: intervalMs().default(0), force: qBool().default(false) }, { symbol: 'symbols' }),
    P4: () => params({ symbols: symbolList().optional(), interval: intervalMs().default(0), replace: qBool().default(false) }, { symbol: 'symbols' }),
  }),
  UnSubscribe: both('Stop quote pushes of a symbol', 'subscribe', () => params({ symbol: symbol() })),
  UnSubscribeMany: both('Stop quote pushes of several symbols (all when none given)', 'subscribe', () => params({ symbols: symbolList().optional() }, { symbol: 'symbols' })),
  SubscribeOhlc: both('Push candles of a symbol and timeframe on /ws', 'subscribe', () => params({ symbol: symbol(), timeframe: timeframeMinutes().default('M1'), interval: qInt().pipe(z.number().int().min(0).max(3600)).default(0) })),
  UnsubscribeOhlc: both('Stop candle pushes (all timeframes of the symbol when none given)', 'subscribe', () => params({ symbol: symbol(), timeframe: timeframeMinutes().optional() })),
  SubscribeOrderBook: lazyOp('Push order book frames of symbols on /ws', 'subscribe', { P5: () => params({ symbols: symbolList().pipe(z.array(z.string()).min(1)), interval: intervalMs().default(0) }, { symbol: 'symbols' }) }),
  UnsubscribeOrderBook: lazyOp('Stop order book pushes', 'subscribe', { P5: () => params({ symbols: symbolList().pipe(z.array(z.string()).min(1)) }, { symbol: 'symbols' }) }),
  SubscribedSymbols: both('The live subscriptions of this session', 'read', none),
} satisfies Record<string, OpDef>;
export const OPERATIONS: Readonly<Record<string, OpDef>> = OPERATION_DEFS;

export function opSchema(op: string, platform: Platform): z.ZodType | undefined {
  return OPERATIONS[op]?.[platform];
}

/** Drops the handle from parsed arguments (it travels separately). */
export function stripHandle(args: unknown): Record<string, unknown> {
  if (!args || typeof args !== 'object') return {};
  const { handle: _h, ...rest } = args as Record<string, unknown>;
  return rest;
}
