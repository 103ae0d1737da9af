// The read and trade operations of the gateway routes (SPEC §4.4/§4.5), executed in the
// account's shard against its one BrokerConnection. Arguments arrive validated and normalized
// by src/http/routes/proxySchemas.ts (orders with src/market/orderSchemas.ts); what is checked here needs the broker's data (does the
// symbol exist, is the volume on its step). Every time in an answer is broker SERVER time
// (SPEC §9), as `time` strings without a zone plus `...Msc` server-clock epoch ms.
import { EXPIRATION_DAY, EXPIRATION_GTC, EXPIRATION_SPECIFIED_DAY, type TimeArg, type SendArgs } from '../../market/orderSchemas.js';
import { apiError } from '../../errors.js';
import { fromServerTime, ServerClock } from '../../market/serverClock.js';
import type { BrokerConnection } from '../../broker/types.js';
import { RETCODE_DONE, type Deal, type Order, type Position, type Side, type TradeResult } from '../../market/orders.js';
import type { Tick } from '../../market/server.js';
import type { SymbolInfo } from '../../market/symbols.js';
import type { Candle, Timeframe } from '../../market/timeframes.js';
import type { AccountRuntime } from './accountRegistry.js';

export interface OpContext {
  runtime: AccountRuntime;
  conn: BrokerConnection;
  clock: ServerClock;
  /** UTC ms the session connected (ClosedOrders). */
  connectedAt: number;
  /** The shard's clock (UTC ms). */
  now(): number;
}

const iso = (serverMs: number) => new Date(serverMs).toISOString().slice(0, 23);

export function toUtc(t: TimeArg, conn: BrokerConnection): number {
  return 'utcMs' in t ? t.utcMs : fromServerTime(t.serverMs, conn.server);
}

const DAY_MS = 86_400_000;

/** The UTC expiration an order's `expirationType` asks for (validated with its `expiration` by
 *  checkExpirationType): 1 and 3 end at the next midnight of the broker server's calendar after
 *  now or after the time given; 0 on a modify clears the expiration (0 is none to the broker). */
function expirationOf(type: number | undefined, expiration: TimeArg | undefined, ctx: OpContext, modify: boolean): number | undefined {
  const given = expiration === undefined ? undefined : toUtc(expiration, ctx.conn);
  const endOfDay = (utcMs: number) => fromServerTime((Math.floor(ctx.clock.toServer(utcMs) / DAY_MS) + 1) * DAY_MS, ctx.conn.server);
  if (type === EXPIRATION_GTC) return modify ? 0 : undefined;
  if (type === EXPIRATION_DAY) return endOfDay(ctx.now());
  if (type === EXPIRATION_SPECIFIED_DAY && given !== undefined) return endOfDay(given);
  return given;
}

/** `time` (server clock, no zone) and `timeMsc` (server-clock epoch ms) for a UTC instant. */
function stamp(prefix: string, utcMs: number | undefined, clock: ServerClock): Record<string, unknown> {
  if (utcMs === undefined) return {};
  const s = clock.toServer(utcMs);
  return { [prefix]: iso(s), [`${prefix}Msc`]: s };
}

export function tickJson(t: Tick, clock: ServerClock) {
  return { symbol: t.symbol, bid: t.bid, ask: t.ask, ...stamp('time', t.timeMsc, clock), ...(t.volume !== undefined ? { volume: t.volume } : {}) };
}

export function positionJson(p: Position, clock: ServerClock) {
  const { kind: _k, openTimeMsc, ...rest } = p;
  return { kind: 'position', ...rest, ...stamp('openTime', openTimeMsc, clock), expertId: p.magic };
}

export function orderJson(o: Order, clock: ServerClock) {
  const { kind: _k, openTimeMsc, closeTimeMsc, expiration, ...rest } = o;
  return {
    kind: 'order', ...rest, ...stamp('openTime', openTimeMsc, clock), ...stamp('closeTime', closeTimeMsc, clock),
    ...stamp('expiration', expiration, clock), expertId: o.magic,
  };
}

export function dealJson(d: Deal, clock: ServerClock) {
  const { timeMsc, ...rest } = d;
  return { ...rest, ...stamp('time', timeMsc, clock), expertId: d.magic };
}

export function candleJson(c: Candle) {
  // `serverTime` is the bar open on the server clock (unix seconds), what /v1 answers in.
  return { time: iso(c.serverTime * 1000), timeSec: c.serverTime, open: c.open, high: c.high, low: c.low, close: c.close, ticks: c.ticks, volume: c.volume };
}

async function symbolOf(conn: BrokerConnection, name: string): Promise<SymbolInfo> {
  const s = await conn.symbol(name);
  if (!s) throw apiError('BAD_REQUEST', `unknown symbol '${name}'`);
  return s;
}

/** Quote, waiting for a newer tick when the cached one is older than msNotOlder (SPEC §4.4). */
async function quote(ctx: OpContext, symbol: string, msNotOlder: number): Promise<Tick> {
  await symbolOf(ctx.conn, symbol);
  let t = await ctx.conn.quote(symbol);
  if (msNotOlder > 0 && (!t || ctx.now() - t.timeMsc > msNotOlder)) {
    const first = t?.timeMsc ?? 0;
    // Wait for the next tick. A quiet market may give none: after the deadline the latest known
    // quote is answered (its time tells its age), never an error.
    const deadline = ctx.now() + Math.max(1_000, Math.min(10_000, msNotOlder * 2));
    while (ctx.now() < deadline) {
      await new Promise((r) => setTimeout(r, 10));
      const n = await ctx.conn.quote(symbol);
      if (n && n.timeMsc > first) {
        t = n;
        break;
      }
    }
  }
  if (!t) throw apiError('BAD_REQUEST', `no quote for '${symbol}' yet`);
  return t;
}

function checkVolume(s: SymbolInfo, v: number, field: string): void {
  if (v < s.volumeMin || v > s.volumeMax) throw apiError('BAD_REQUEST', `parameter '${field}': ${v} outside ${s.volumeMin}..${s.volumeMax} for ${s.name}`);
  const steps = v / s.volumeStep;
  if (Math.abs(steps - Math.round(steps)) > 1e-6) throw apiError('BAD_REQUEST', `parameter '${field}': ${v} is not a multiple of the volume step ${s.volumeStep} for ${s.name}`);
}

function tradeAnswer(r: TradeResult, clock: ServerClock) {
  if (!r.ok) {
    throw apiError('TRADE_REQUEST_ERROR', r.message, { details: { reason: r.reason, retcode: r.retcode } });
  }
  return { ...orderJson(r.order, clock), retcode: r.retcode ?? RETCODE_DONE, deals: r.deals.map((d) => dealJson(d, clock)) };
}

function withTimeout<T>(p: Promise<T>, seconds: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(apiError('SERVICE_UNAVAILABLE', `history not ready within timeoutSeconds=${seconds}`)), seconds * 1000);
    p.then((v) => { clearTimeout(t); resolve(v); }, (e: unknown) => { clearTimeout(t); reject(e); });
  });
}

const PERSONAL = ['email', 'phone', 'country', 'city', 'address', 'registrationTimeMsc'] as const;

type Args = Record<string, unknown>;
const str = (a: Args, k: string) => a[k] as string;
const num = (a: Args, k: string) => a[k] as number;

/** Runs one read or trade operation. */
export async function runOp(op: string, a: Args, ctx: OpContext): Promise<unknown> {
  const { conn, clock } = ctx;
  switch (op) {
    case 'Account': {
      const d = await conn.accountDetails();
      const { registrationTimeMsc, ...rest } = d;
      return { ...rest, ...stamp('registrationTime', registrationTimeMsc, clock) };
    }
    case 'AccountDetails': {
      const d = await conn.accountDetails();
      const out: Record<string, unknown> = { ...d };
      for (const k of PERSONAL) delete out[k];
      return { ...out, serverTimeZone: conn.server.timeZone.description };
    }
    case 'AccountSummary': {
      // The session host answers AccountSummary itself (last-known values while not connected,
      // sessions.ts); this is the plain connected read.
      const s = await conn.accountSummary();
      return { ...s, synced: ctx.runtime.phase() === 'connected' };
    }
    case 'SymbolList':
      return (await conn.symbols()).map((s) => s.name);
    case 'Symbols':
      return conn.symbols();
    case 'SymbolParams': {
      const s = await symbolOf(conn, str(a, 'symbol'));
      return { symbol: s.name, symbolInfo: s };
    }
    case 'SymbolParamsMany': {
      const all = await conn.symbols();
      const wanted = a.symbols as string[] | undefined;
      let list = all;
      if (wanted?.length) {
        const byName = new Map(all.map((s) => [s.name, s]));
        const unknown = wanted.filter((w) => !byName.has(w));
        if (unknown.length) throw apiError('BAD_REQUEST', `unknown symbol(s): ${unknown.join(', ')}`);
        list = wanted.map((w) => byName.get(w)!);
      }
      const limit = a.limit as number | undefined;
      if (limit !== undefined && list.length > limit) {
        throw apiError('BAD_REQUEST', `${list.length} symbols exceed limit=${limit}; raise the limit or name the symbols`, { details: { count: list.length, limit } });
      }
      const filter = a.filter as string[] | undefined;
      if (filter?.length) {
        const fields = Object.keys(list[0] ?? all[0] ?? {});
        const bad = filter.filter((f) => !fields.includes(f));
        if (bad.length) throw apiError('BAD_REQUEST', `parameter 'filter': unknown field(s) ${bad.join(', ')}`);
        return list.map((s) => Object.fromEntries([['name', s.name], ...filter.map((f) => [f, (s as unknown as Args)[f]])]));
      }
      return list;
    }
    case 'GetQuote':
    case 'Quote':
      return tickJson(await quote(ctx, str(a, 'symbol'), num(a, 'msNotOlder')), clock);
    case 'GetQuoteMany': {
      const symbols = a.symbols as string[];
      const ticks = await Promise.all(symbols.map((s) => quote(ctx, s, num(a, 'msNotOlder'))));
      return ticks.map((t) => tickJson(t, clock));
    }
    case 'MarketWatchMany': {
      const symbols = a.symbols as string[];
      return Promise.all(symbols.map(async (name) => {
        const s = await symbolOf(conn, name);
        const t = await quote(ctx, name, 0);
        const now = ctx.now();
        const bars = await conn.priceHistory(name, 'D1', now - 3 * 86_400_000, now + 1);
        const day = bars[bars.length - 1];
        return {
          ...tickJson(t, clock), digits: s.digits, spread: Math.round((t.ask - t.bid) / s.point),
          ...(day ? { open: day.open, high: day.high, low: day.low, change: day.open ? Number((((t.bid - day.open) / day.open) * 100).toFixed(3)) : 0 } : {}),
        };
      }));
    }
    case 'OpenedOrders': {
      const o = await conn.openedOrders();
      const rows = [...o.positions.map((p) => ({ t: p.openTimeMsc, j: positionJson(p, clock) })), ...o.orders.map((x) => ({ t: x.openTimeMsc, j: orderJson(x, clock) }))];
      const asc = a.ascending !== false;
      rows.sort((x, y) => (asc ? x.t - y.t : y.t - x.t));
      return rows.map((r) => r.j);
    }
    case 'OpenedOrder': {
      const x = await conn.openedOrder(num(a, 'ticket'));
      // 404 is reserved for the account (and the session): an unknown ticket is a bad parameter, as on /OpenedOrder.
      if (!x) throw apiError('BAD_REQUEST', `no open position or pending order with ticket ${num(a, 'ticket')}`);
      return x.kind === 'position' ? positionJson(x, clock) : orderJson(x, clock);
    }
    case 'OpenedOrdersTickets': {
      const o = await conn.openedOrders();
      return [...o.positions.map((p) => p.ticket), ...o.orders.map((x) => x.ticket)];
    }
    case 'ClosedOrders': {
      const orders = await conn.historyOrders(ctx.connectedAt, ctx.now() + 1);
      return orders.slice(-100).map((o) => orderJson(o, clock));
    }
    case 'OrderHistory': {
      const from = toUtc(a.from as TimeArg, conn);
      const to = a.to ? toUtc(a.to as TimeArg, conn) : ctx.now() + 1;
      if (to < from) throw apiError('BAD_REQUEST', "parameter 'to': before 'from'");
      const [orders, deals] = await Promise.all([conn.historyOrders(from, to), conn.historyDeals(from, to)]);
      const filter = a.filter as string[] | undefined;
      const keep = (s: string) => !filter?.length || filter.includes(s);
      // sort 0: by open time, 1: by close time.
      const key = (o: Order) => (a.sort === 1 ? (o.closeTimeMsc ?? o.openTimeMsc) : o.openTimeMsc);
      const asc = a.ascending !== false;
      const os = orders.filter((o) => keep(o.symbol)).sort((x, y) => (asc ? key(x) - key(y) : key(y) - key(x)));
      const ds = deals.filter((d) => keep(d.symbol) || d.type === 'Balance');
      if (!asc) ds.reverse();
      return { orders: os.map((o) => orderJson(o, clock)), deals: ds.map((d) => dealJson(d, clock)) };
    }
    case 'RequiredMargin': {
      const s = await symbolOf(conn, str(a, 'symbol'));
      checkVolume(s, num(a, 'lots'), 'lots');
      const margin = await conn.requiredMargin(s.name, num(a, 'lots'), a.type as Side, a.price as number | undefined);
      const summary = await conn.accountSummary();
      return { symbol: s.name, lots: num(a, 'lots'), type: a.type, margin, currency: summary.currency };
    }
    case 'OrderSendSafe':
    case 'OrderSend': {
      const o = a as unknown as SendArgs;
      const s = await symbolOf(conn, o.symbol);
      checkVolume(s, o.volume, 'volume');
      const expiration = expirationOf(o.expirationType, o.expiration, ctx, false);
      const r = await conn.orderSend({
        symbol: s.name, type: o.type, volume: o.volume,
        ...(o.price !== undefined ? { price: o.price } : {}),
        ...(o.stopLimitPrice !== undefined ? { stopLimitPrice: o.stopLimitPrice } : {}),
        ...(o.slippage !== undefined ? { slippage: o.slippage } : {}),
        ...(o.stoploss !== undefined ? { stoploss: o.stoploss } : {}),
        ...(o.takeprofit !== undefined ? { takeprofit: o.takeprofit } : {}),
        ...(o.comment !== undefined ? { comment: o.comment } : {}),
        ...(o.magic !== undefined ? { magic: o.magic } : {}),
        ...(expiration !== undefined ? { expiration } : {}),
      });
      return tradeAnswer(r, clock);
    }
    case 'OrderModifySafe':
    case 'OrderModify': {
      const expiration = expirationOf(a.expirationType as number | undefined, a.expiration as TimeArg | undefined, ctx, true);
      const r = await conn.orderModify({
        ticket: num(a, 'ticket'), stoploss: num(a, 'stoploss'), takeprofit: num(a, 'takeprofit'),
        ...(a.price !== undefined ? { price: num(a, 'price') } : {}),
        ...(expiration !== undefined ? { expiration } : {}),
        ...(a.stoplimit !== undefined ? { stopLimitPrice: num(a, 'stoplimit') } : {}),
      });
      return tradeAnswer(r, clock);
    }
    case 'OrderCloseSafe':
    case 'OrderClose': {
      // P5 has no OrderDelete (SPEC §4.4): as on MT5-style gateways, OrderCloseSafe on a pending
      // order's ticket cancels that order. P4 keeps OrderClose for positions and OrderDelete (§4.5).
      const x = op === 'OrderCloseSafe' || a.lots !== undefined ? await conn.openedOrder(num(a, 'ticket')) : null;
      if (op === 'OrderCloseSafe' && x && x.kind === 'order') {
        if (a.lots !== undefined) {
          throw apiError('BAD_REQUEST', `parameter 'lots': ticket ${x.ticket} is a pending order, which is cancelled whole; omit 'lots'`);
        }
        return tradeAnswer(await conn.orderDelete({ ticket: x.ticket }), clock);
      }
      if (a.lots !== undefined) {
        if (x && x.kind === 'position') checkVolume(await symbolOf(conn, x.symbol), num(a, 'lots'), 'lots');
        if (x && x.kind === 'position' && num(a, 'lots') > x.volume) throw apiError('BAD_REQUEST', `parameter 'lots': ${num(a, 'lots')} exceeds the open volume ${x.volume}`);
      }
      const r = await conn.orderClose({
        ticket: num(a, 'ticket'),
        ...(a.lots !== undefined ? { lots: num(a, 'lots') } : {}),
        ...(a.price !== undefined ? { price: num(a, 'price') } : {}),
        ...(a.slippage !== undefined ? { slippage: num(a, 'slippage') } : {}),
        ...(a.comment !== undefined ? { comment: str(a, 'comment') } : {}),
      });
      return tradeAnswer(r, clock);
    }
    case 'OrderDelete':
      return tradeAnswer(await conn.orderDelete({ ticket: num(a, 'ticket') }), clock);
    case 'PriceHistory':
    case 'PriceHistoryV2': {
      await symbolOf(conn, str(a, 'symbol'));
      const from = toUtc(a.from as TimeArg, conn);
      const to = toUtc(a.to as TimeArg, conn);
      if (to < from) throw apiError('BAD_REQUEST', "parameter 'to': before 'from'");
      const bars = await withTimeout(conn.priceHistory(str(a, 'symbol'), a.timeFrame as Timeframe, from, to), num(a, 'timeoutSeconds'));
      return bars.map(candleJson);
    }
    case 'QuoteHistory': {
      await symbolOf(conn, str(a, 'symbol'));
      const bars = await conn.quoteHistory(str(a, 'symbol'), a.timeframe as Timeframe, toUtc(a.from as TimeArg, conn), num(a, 'count'));
      return bars.map(candleJson);
    }
    case 'EquityHistory': {
      const points = await conn.equityHistory(toUtc(a.from as TimeArg, conn));
      const out = [];
      let last: number | undefined;
      for (const p of points) {
        if (a.excludeSameBars === true && p.equity === last) continue;
        last = p.equity;
        out.push({ ...stamp('time', p.timeMsc, clock), equity: p.equity, balance: p.balance });
      }
      return out;
    }
  }
  throw apiError('ROUTE_NOT_FOUND', `unknown operation ${op}`);
}
