// Response schemas of the most used classic routes (SPEC §4.1), for the OpenAPI document and the
// contract test (test/classic-contract.test.ts). They describe what the routes send, built by
// runOp (src/runtime/hosts/accountOps.ts), the trade answer (accountTrade.ts `answer`) and the
// broker types (src/broker/types.ts): classic answers are UTC, every `...TimeMsc` (epoch ms) has an
// ISO 8601 sibling without `Msc`, a pending order's `expiration` has `expirationTime`.
// Objects are strict: a field the schema does not name fails the contract test.
import { z } from 'zod';
import { ORDER_TYPES } from '../../market/orders.js';

const ms = (what: string) => z.number().describe(`${what}, UTC epoch milliseconds`);
const iso = (of: string) => z.iso.datetime().describe(`${of} as ISO 8601 UTC (same instant)`);
const money = (what: string) => z.number().describe(`${what}, in account currency`);

const OrderType = z.enum(ORDER_TYPES).describe('Order type; its index in this list is the MT5 numeric code (0 Buy ... 7 SellStopLimit; stop-limit types on P5 only)');
const Side = z.enum(['Buy', 'Sell']);

/** An order: a pending one, a fill, a P5 closing order, or a closed P4 ticket. */
export const OrderSchema = z.strictObject({
  kind: z.literal('order'),
  ticket: z.number().int().describe('Order ticket'),
  symbol: z.string(),
  type: OrderType,
  state: z.enum(['placed', 'filled', 'partial', 'cancelled', 'expired', 'rejected', 'closed'])
    .describe('placed: pending in the book; filled: executed (P5 order done, P4 market ticket open); closed: P4 ticket closed; cancelled/expired/rejected: left the book unfilled'),
  volume: z.number().describe('Current volume in lots (a closed P4 ticket: the lots closed)'),
  volumeInitial: z.number().describe('Volume when placed, in lots'),
  openPrice: z.number().describe('Requested price of a pending order; fill price of an executed one'),
  openTimeMsc: ms('Time placed or executed'),
  openTime: iso('openTimeMsc'),
  closePrice: z.number().optional().describe('P4 closed tickets only: the close price'),
  closeTimeMsc: ms('Time a pending order left the book unfilled (cancelled, expired, rejected) or a P4 ticket was closed; absent otherwise').optional(),
  closeTime: iso('closeTimeMsc').optional(),
  sl: z.number().describe('Stop loss price; 0 = none'),
  tp: z.number().describe('Take profit price; 0 = none'),
  stopLimitPrice: z.number().optional().describe('P5 stop-limit orders only: the limit price placed when the stop price is reached'),
  expiration: z.number().optional().describe('Pending orders: expiry, UTC epoch milliseconds (the broker field name, hence no Msc); absent or 0 = good till cancelled'),
  expirationTime: iso('expiration').optional().describe('expiration as ISO 8601 UTC; present only when expiration > 0'),
  magic: z.number().int().describe('Magic number (expert id)'),
  comment: z.string(),
  commission: money('Commission'),
  swap: money('Swap'),
  profit: money('Realized profit (0 for orders that opened a position)'),
  positionId: z.number().int().describe('Position this order opened or closed; 0 for a pending order not yet triggered'),
}).describe('Order');

/** An open position (P5) or open market ticket (P4). */
export const PositionSchema = z.strictObject({
  kind: z.literal('position'),
  ticket: z.number().int().describe('Position id: the ticket of the order that opened it (P4: the ticket itself)'),
  symbol: z.string(),
  type: Side,
  volume: z.number().describe('Lots'),
  openPrice: z.number(),
  openTimeMsc: ms('Time opened'),
  openTime: iso('openTimeMsc'),
  currentPrice: z.number().describe('Price it would close at now (bid for Buy, ask for Sell)'),
  sl: z.number().describe('Stop loss price; 0 = none'),
  tp: z.number().describe('Take profit price; 0 = none'),
  magic: z.number().int(),
  comment: z.string(),
  commission: money('Commission charged so far'),
  swap: money('Accumulated swap'),
  profit: money('Floating profit (without commission and swap)'),
}).describe('Position');

export const DealSchema = z.strictObject({
  ticket: z.number().int().describe('Deal ticket'),
  order: z.number().int().describe('Order that caused the deal; 0 for balance operations'),
  position: z.number().int().describe('Position id; 0 for balance operations'),
  symbol: z.string().describe("Symbol; '' for balance operations"),
  type: z.enum(['Buy', 'Sell', 'Balance']),
  entry: z.enum(['in', 'out', 'inout', 'balance']).describe('in: opens; out: closes; inout: reverses; balance: a balance operation'),
  volume: z.number().describe('Lots'),
  price: z.number(),
  timeMsc: ms('Deal time'),
  time: iso('timeMsc'),
  magic: z.number().int(),
  comment: z.string(),
  commission: money('Commission'),
  swap: money('Swap'),
  profit: money("Realized profit of an 'out' deal; the amount of a balance operation"),
}).describe('Deal');

export const AccountSummaryResponse = z.strictObject({
  balance: money('Balance'),
  credit: money('Credit'),
  equity: money('Equity'),
  profit: money('Floating profit of open positions'),
  margin: money('Margin in use'),
  freeMargin: money('Free margin'),
  marginLevel: z.number().describe('Equity / margin in percent; 0 when no margin is in use'),
  leverage: z.number().describe('Account leverage (100 = 1:100)'),
  currency: z.string().describe('Account currency'),
  synced: z.boolean().describe('false: last-known values, read before the connection dropped (reconnecting)'),
});

export const QuoteResponse = z.strictObject({
  symbol: z.string(),
  bid: z.number(),
  ask: z.number(),
  timeMsc: ms('Quote time'),
  time: iso('timeMsc'),
  volume: z.number().optional().describe('Tick volume, when the broker reports one'),
});

/** Sessions per weekday, index 0 = Sunday, in minutes of the broker server's clock. */
const WeeklySessions = z.array(z.array(z.strictObject({
  fromMin: z.number().int().describe('Start, minutes from server midnight (inclusive)'),
  toMin: z.number().int().describe('End, minutes from server midnight (exclusive)'),
}))).describe('Session windows per weekday (index 0 = Sunday ... 6 = Saturday), on the broker server clock');

export const SymbolInfoSchema = z.strictObject({
  name: z.string(),
  description: z.string(),
  currency: z.string().describe('Profit currency'),
  baseCurrency: z.string(),
  marginCurrency: z.string(),
  digits: z.number().int(),
  point: z.number(),
  contractSize: z.number(),
  tickSize: z.number(),
  tickValue: money('Value of one tickSize move for 1 lot at the current price'),
  marginCalcMode: z.enum(['Forex', 'CFD', 'CFDLeverage']),
  marginInitial: z.number().describe('Fixed initial margin per lot in margin currency; 0 = computed by marginCalcMode'),
  marginMaintenance: z.number(),
  marginRate: z.number().describe('Multiplier applied to the computed margin'),
  group: z.string().describe('e.g. Forex\\Majors'),
  volumeMin: z.number(),
  volumeMax: z.number(),
  volumeStep: z.number(),
  stopsLevel: z.number().describe('Minimum SL/TP/pending distance from the price, in points'),
  limitPoints: z.number().describe('Same as stopsLevel'),
  freezeLevel: z.number().describe('Distance in points within which an order or position can no longer be modified'),
  tradeMode: z.enum(['Full', 'LongOnly', 'ShortOnly', 'CloseOnly', 'Disabled']),
  tradeSessions: WeeklySessions,
  quoteSessions: WeeklySessions,
  swapLong: z.number().describe('Swap per lot per night, in points'),
  swapShort: z.number().describe('Swap per lot per night, in points'),
  commissionPerLot: z.number().describe('Commission per lot per side, in account currency'),
  spread: z.number().describe('Typical spread in points'),
}).describe('SymbolInfo');

export const SymbolsResponse = z.array(SymbolInfoSchema);

export const SymbolParamsResponse = z.strictObject({
  symbol: z.string(),
  symbolInfo: SymbolInfoSchema,
});

export const OpenedOrdersResponse = z.array(z.discriminatedUnion('kind', [PositionSchema, OrderSchema]))
  .describe('Open positions (kind position) and pending orders (kind order), by open time');

export const OrderHistoryResponse = z.strictObject({
  orders: z.array(OrderSchema).describe('Orders that left the book or were executed in [from, to) (P5: every order done; P4: closed tickets and finished pending orders)'),
  deals: z.array(DealSchema).describe('Deals in [from, to), balance operations included'),
});

/** The answer of a successful trade (OrderSend, OrderClose, OrderModify, OrderDelete, OrderCloseBy). */
export const TradeResponse = OrderSchema.extend({
  retcode: z.number().int().describe('Trade server return code (10009 = done)'),
  deals: z.array(DealSchema).describe('Deals the request caused ([] for a pending order, a modify or a delete)'),
}).describe('The order the request created or changed (P4 close: the closed ticket; P5 close: the closing order), its deals and retcode');

/** Response schemas by classic route name (without the leading slash), with their literal types:
 *  the SDK (src/client) derives its response types from them. */
export const CLASSIC_RESPONSE_SCHEMAS = {
  AccountSummary: AccountSummaryResponse,
  GetQuote: QuoteResponse,
  OpenedOrders: OpenedOrdersResponse,
  OrderHistory: OrderHistoryResponse,
  Symbols: SymbolsResponse,
  SymbolParams: SymbolParamsResponse,
  OrderSend: TradeResponse,
  OrderModify: TradeResponse,
  OrderClose: TradeResponse,
  OrderDelete: TradeResponse,
  OrderCloseBy: TradeResponse,
} satisfies Record<string, z.ZodType>;
export const CLASSIC_RESPONSES: Readonly<Record<string, z.ZodType>> = CLASSIC_RESPONSE_SCHEMAS;
