// Response schemas of the gateway operations (SPEC §4.4/§4.5), for the OpenAPI document (so a
// generated client types them) and the response check of the integration tests. They describe what
// src/runtime/hosts/gatewayOps.ts and sessions.ts answer: times are broker SERVER time (SPEC §9),
// `time` strings without a zone beside `...Msc` server-clock epoch ms. Objects are loose (a broker
// may add fields); the fields named here are always as typed.
import { z } from 'zod';
import { ORDER_TYPES } from '../../market/orders.js';
import { AccountSummaryResponse, SymbolInfoSchema } from './classicResponses.js';
import type { OPERATION_DEFS } from './proxySchemas.js';

const time = (of: string) => z.string().describe(`${of}: broker server time, yyyy-MM-ddTHH:mm:ss.SSS without a zone`);
const msc = (of: string) => z.number().describe(`${of}: broker server clock, epoch milliseconds`);
const int = () => z.number().int();

const Tick = z.looseObject({
  symbol: z.string(), bid: z.number(), ask: z.number(), time: time('Quote time'), timeMsc: msc('Quote time'),
  volume: z.number().optional(),
}).meta({ id: 'GatewayTick' });

const common = {
  ticket: int(), symbol: z.string(), volume: z.number(), sl: z.number(), tp: z.number(), magic: int(),
  expertId: int().describe('Same as magic'), comment: z.string(), commission: z.number(), swap: z.number(), profit: z.number(),
};
const Position = z.looseObject({
  kind: z.literal('position'), ...common, type: z.enum(['Buy', 'Sell']), openPrice: z.number(), currentPrice: z.number(),
  openTime: time('Opened'), openTimeMsc: msc('Opened'),
}).meta({ id: 'GatewayPosition' });
const Order = z.looseObject({
  kind: z.literal('order'), ...common, type: z.enum(ORDER_TYPES), state: z.string(), volumeInitial: z.number(), openPrice: z.number(),
  openTime: time('Placed or executed'), openTimeMsc: msc('Placed or executed'),
  closeTime: time('Left the book or closed').optional(), closeTimeMsc: msc('Left the book or closed').optional(),
  expiration: time('Expiry of a pending order').optional(), expirationMsc: msc('Expiry of a pending order').optional(),
}).meta({ id: 'GatewayOrder' });
const Deal = z.looseObject({
  ticket: int(), order: int(), position: int(), symbol: z.string(), type: z.string(), volume: z.number(), price: z.number(),
  time: time('Deal time'), timeMsc: msc('Deal time'), magic: int(), expertId: int(), comment: z.string(),
  commission: z.number(), swap: z.number(), profit: z.number(),
}).meta({ id: 'GatewayDeal' });
const Candle = z.looseObject({
  time: time('Bar open'), timeSec: int().describe('Bar open: broker server clock, epoch seconds'),
  open: z.number(), high: z.number(), low: z.number(), close: z.number(), ticks: int(), volume: z.number().optional(),
}).meta({ id: 'GatewayCandle' });
const Trade = Order.extend({ retcode: int().describe('Trade server return code (10009 = done)'), deals: z.array(Deal) })
  .meta({ id: 'GatewayTrade' }).describe('The order the request created or changed, its deals and retcode');
const Subscriptions = z.looseObject({
  quotes: z.array(z.object({ symbol: z.string(), interval: int().describe('ms') })),
  ohlc: z.array(z.object({ symbol: z.string(), timeframe: z.string(), interval: int().describe('s') })),
  orderBook: z.array(z.object({ symbol: z.string(), interval: int().describe('ms') })),
  symbols: z.array(z.string()),
}).meta({ id: 'GatewaySubscriptions' });
const Subscribed = Subscriptions.extend({ ok: z.literal(true) }).describe("The session's subscriptions after the change");
const Connection = z.looseObject({ connected: z.boolean(), phase: z.string(), server: z.string(), platform: z.enum(['P4', 'P5']) });
const Account = z.looseObject({}).describe('Account record (broker fields)');

/** By operation name. Every operation has one: a missing one is a compile error below. */
export const PROXY_RESPONSES = {
  CheckConnect: Connection, ConnectionStatus: Connection,
  Disconnect: z.object({ ok: z.literal(true), disconnected: z.literal(true) }),
  Ping: z.object({ pong: z.literal(true), time: z.string().describe('ISO 8601 UTC') }),
  Account: Account.describe("The holder's full profile (personal data)"), AccountDetails: Account,
  AccountSummary: z.looseObject(AccountSummaryResponse.shape),
  SymbolList: z.array(z.string()),
  Symbols: z.array(SymbolInfoSchema),
  SymbolParams: z.object({ symbol: z.string(), symbolInfo: SymbolInfoSchema }),
  SymbolParamsMany: z.array(z.looseObject({ name: z.string() })).describe('symbolInfo records (only name and the filter fields when filter is given)'),
  GetQuote: Tick, Quote: Tick, GetQuoteMany: z.array(Tick),
  MarketWatchMany: z.array(Tick.extend({
    digits: int(), spread: int().describe('points'), open: z.number().optional(), high: z.number().optional(), low: z.number().optional(),
    change: z.number().optional().describe('percent since the day opened'),
  })),
  OpenedOrders: z.array(z.union([Position, Order])), OpenedOrder: z.union([Position, Order]), OpenedOrdersTickets: z.array(int()),
  ClosedOrders: z.array(Order),
  OrderHistory: z.object({ orders: z.array(Order), deals: z.array(Deal) }),
  RequiredMargin: z.object({ symbol: z.string(), lots: z.number(), type: z.enum(['Buy', 'Sell']), margin: z.number(), currency: z.string() }),
  OrderSendSafe: Trade, OrderSend: Trade, OrderModifySafe: Trade, OrderModify: Trade, OrderCloseSafe: Trade, OrderClose: Trade, OrderDelete: Trade,
  PriceHistory: z.array(Candle), PriceHistoryV2: z.array(Candle), QuoteHistory: z.array(Candle),
  EquityHistory: z.array(z.object({ time: time('Point'), timeMsc: msc('Point'), equity: z.number(), balance: z.number() })),
  Subscribe: Subscribed, SubscribeMany: Subscribed, UnSubscribe: Subscribed, UnSubscribeMany: Subscribed,
  SubscribeOhlc: Subscribed, UnsubscribeOhlc: Subscribed, SubscribeOrderBook: Subscribed, UnsubscribeOrderBook: Subscribed,
  SubscribedSymbols: Subscriptions,
} satisfies Record<keyof typeof OPERATION_DEFS, z.ZodType>;
