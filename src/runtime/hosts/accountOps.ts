// The read-only classic operations (SPEC §4.1), run in the account's shard on its live
// BrokerConnection. Classic routes answer in UTC: every `...TimeMsc` field (UTC epoch ms) gets an
// ISO 8601 UTC sibling without the `Msc` suffix (`openTimeMsc` → `openTime`).
import { dialectOf } from '../../broker/dialect.js';
import { toServerTime, utcOffsetMinutes } from '../../market/serverClock.js';
import type { BrokerConnection } from '../../broker/types.js';
import { BrokerNotSupportedError } from '../../market/brokerErrors.js';
import { type Side, parseOrderType, sideOf } from '../../market/orders.js';
import type { Platform, ServerInfo, Tick } from '../../market/server.js';
import type { SymbolInfo, WeeklySessions } from '../../market/symbols.js';
import { apiError } from '../../errors.js';
import { brokerFailure } from '../brokerFailures.js';

/**
 * Terminal build an endpoint needs, per platform (SPEC §9: endpoints newer than an account's
 * connection answer 501 NOT_ON_THIS_TERMINAL). Builds of the simulated servers: P4 1420, P5 4620;
 * a binding may pin an older build to reproduce an old terminal.
 */
export const MIN_BUILD: Readonly<Record<string, Partial<Record<Platform, number>>>> = {
  OrderCloseBy: { P4: 600, P5: 1100 },
  GetQuoteMany: { P4: 1200, P5: 2000 },
  MarketWatchMany: { P4: 1200, P5: 2000 },
  SymbolParamsMany: { P4: 1300, P5: 2500 },
  IsTradeSessionMany: { P4: 1300, P5: 2500 },
  IsQuoteSessionMany: { P4: 1300, P5: 2500 },
  GetTickValueMany: { P4: 1300, P5: 2500 },
  TickValueWithSize: { P4: 1400, P5: 3000 },
  BalanceHistory: { P5: 2000 },
};

/** 501 when the operation does not exist on this platform or is newer than the connection's build. */
export function assertAvailable(op: string, platform: Platform, build: number): void {
  if (op === 'BalanceHistory' && !dialectOf(platform).balanceHistory) {
    throw apiError('NOT_ON_THIS_TERMINAL', `${op} does not exist on ${platform} terminals`);
  }
  const min = MIN_BUILD[op]?.[platform];
  if (min !== undefined && build < min) {
    throw apiError('NOT_ON_THIS_TERMINAL', `${op} needs terminal build ${min} or newer; this connection runs build ${build}`);
  }
}

/** ISO 8601 of an epoch-ms time; null for one with no calendar date (never a throw mid-answer). */
const iso = (ms: number) => {
  const d = new Date(ms);
  return Number.isNaN(d.getTime()) ? null : d.toISOString();
};

/** A ticket-like id: decimal digits only (no '0x..', no exponent) and exactly representable. */
export function positiveInt(v: unknown): number | undefined {
  const s = typeof v === 'number' ? String(v) : typeof v === 'string' ? v.trim() : '';
  if (!/^\d+$/.test(s)) return undefined;
  const n = Number(s);
  return Number.isSafeInteger(n) && n > 0 ? n : undefined;
}

/** Adds ISO UTC siblings of the `*TimeMsc` / `timeMsc` fields, recursively through arrays and objects. */
export function utc(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(utc);
  if (v === null || typeof v !== 'object') return v;
  const src = v as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  // Every order, deal and list item of every answer passes here: a plain key loop, no regex or
  // entry arrays per key.
  for (const k in src) {
    if (!Object.hasOwn(src, k)) continue;
    const x = src[k];
    if (typeof x !== 'object' || x === null) {
      out[k] = x;
      if (typeof x === 'number') {
        if (k === 'timeMsc' || k.endsWith('TimeMsc')) out[k.slice(0, -3)] = iso(x);
        else if (k === 'expiration' && x > 0) out.expirationTime = iso(x);
      }
    } else {
      out[k] = utc(x);
    }
  }
  return out;
}

/** Maps a broker failure of a query to the §7 status (rejections of trades are values, not here). */
function inSession(sessions: WeeklySessions, server: ServerInfo, utcMs: number): boolean {
  const s = new Date(toServerTime(utcMs, server));
  const day = sessions[s.getUTCDay()] ?? [];
  const minute = s.getUTCHours() * 60 + s.getUTCMinutes();
  return day.some((w) => minute >= w.fromMin && minute < w.toMin);
}

function quoteJson(t: Tick) {
  return utc({ symbol: t.symbol, bid: t.bid, ask: t.ask, timeMsc: t.timeMsc, ...(t.volume !== undefined ? { volume: t.volume } : {}) });
}

async function symbolOrFail(conn: BrokerConnection, name: string): Promise<SymbolInfo> {
  const s = await conn.symbol(name);
  if (!s) throw apiError('BAD_REQUEST', `unknown symbol ${name}`);
  return s;
}

const symbolsArg = (a: Record<string, unknown>): string[] => {
  const list = (a.symbols as string[] | undefined) ?? [];
  if (list.length === 0) throw apiError('BAD_REQUEST', "parameter 'symbol' (or 'symbols') is required: repeat it or comma-separate the names");
  return list;
};
const symbolArg = (a: Record<string, unknown>): string => {
  const s = a.symbol as string | undefined;
  if (!s) throw apiError('BAD_REQUEST', "parameter 'symbol' is required");
  return s;
};

/** Personal data of the holder: only /Account returns it (SPEC §2). */
const PERSONAL = ['email', 'phone', 'country', 'city', 'address'] as const;

export interface OpsEnv {
  conn: BrokerConnection;
  platform: Platform;
  now: number;
}

/** Runs one classic read operation. `args` were validated by the route's schema in the main thread. */
export async function runOp(op: string, a: Record<string, unknown>, env: OpsEnv): Promise<unknown> {
  const { conn, now } = env;
  const server = conn.server;
  try {
    switch (op) {
      case 'Account':
        return utc(await conn.accountDetails());
      case 'AccountDetails': {
        const d = { ...(await conn.accountDetails()) } as Record<string, unknown>;
        for (const k of PERSONAL) delete d[k];
        return utc(d);
      }
      case 'IsInvestor':
        // The gateway always logs in with the master password: trading is possible.
        return { isInvestor: false };
      case 'OpenedOrders': {
        const o = await conn.openedOrders();
        return utc([...o.positions, ...o.orders].sort((x, y) => x.openTimeMsc - y.openTimeMsc || x.ticket - y.ticket));
      }
      case 'OpenedOrdersTickets': {
        const o = await conn.openedOrders();
        return [...o.positions, ...o.orders].map((x) => x.ticket).sort((x, y) => x - y);
      }
      case 'OpenedOrder': {
        const t = positiveInt(a.ticket);
        if (t === undefined) throw apiError('BAD_REQUEST', "parameter 'ticket' must be a positive integer");
        const o = await conn.openedOrder(t);
        if (!o) throw apiError('BAD_REQUEST', `no open order or position with ticket ${t}`);
        return utc(o);
      }
      case 'ClosedOrders': {
        const orders = await conn.historyOrders(0, now + 1);
        return utc(orders.filter((o) => o.state !== 'placed').slice(-100));
      }
      case 'Symbols':
        return utc(await conn.symbols());
      case 'SymbolList':
        return (await conn.symbols()).map((s) => s.name);
      case 'ServerTimezone': {
        const off = utcOffsetMinutes(server.timeZone, now);
        return { utcOffsetMinutes: off, utcOffsetHours: off / 60 };
      }
      case 'ServerTimezoneInfo': {
        const off = utcOffsetMinutes(server.timeZone, now);
        return {
          server: server.name, description: server.timeZone.description, standardOffsetMinutes: server.timeZone.standardOffsetMinutes,
          dst: server.timeZone.dst, utcOffsetMinutes: off, dstInEffect: off !== server.timeZone.standardOffsetMinutes, time: iso(now),
        };
      }
      case 'Mails':
        return [];
      case 'GetQuote': {
        const symbol = symbolArg(a);
        const t = await conn.quote(symbol);
        if (!t) throw apiError('BAD_REQUEST', `no quote for symbol ${symbol}`);
        return quoteJson(t);
      }
      case 'GetQuoteMany':
      case 'MarketWatchMany': {
        const list = symbolsArg(a);
        const ticks = await Promise.all(list.map((s) => conn.quote(s)));
        const missing = list.filter((_, i) => !ticks[i]);
        if (missing.length) throw apiError('BAD_REQUEST', `unknown symbol(s): ${missing.join(', ')}`);
        if (op === 'GetQuoteMany') return ticks.map((t) => quoteJson(t!));
        const infos = await Promise.all(list.map((s) => symbolOrFail(conn, s)));
        return ticks.map((t, i) => ({
          ...(quoteJson(t!) as object), spread: Math.round((t!.ask - t!.bid) / infos[i]!.point), digits: infos[i]!.digits,
        }));
      }
      case 'SymbolParams': {
        const info = await symbolOrFail(conn, symbolArg(a));
        return { symbol: info.name, symbolInfo: info };
      }
      case 'SymbolParamsMany': {
        const infos = await Promise.all(symbolsArg(a).map((s) => symbolOrFail(conn, s)));
        return infos.map((info) => ({ symbol: info.name, symbolInfo: info }));
      }
      case 'SymbolSessions': {
        // SPEC §1: session arrays are empty on both generations.
        const info = await symbolOrFail(conn, symbolArg(a));
        return { symbol: info.name, quoteSessions: [], tradeSessions: [] };
      }
      case 'IsTradeSession':
      case 'IsQuoteSession': {
        const info = await symbolOrFail(conn, symbolArg(a));
        const w = op === 'IsTradeSession' ? info.tradeSessions : info.quoteSessions;
        return { symbol: info.name, open: inSession(w, server, now) };
      }
      case 'IsTradeSessionMany':
      case 'IsQuoteSessionMany': {
        const infos = await Promise.all(symbolsArg(a).map((s) => symbolOrFail(conn, s)));
        return infos.map((info) => ({
          symbol: info.name, open: inSession(op === 'IsTradeSessionMany' ? info.tradeSessions : info.quoteSessions, server, now),
        }));
      }
      case 'GetTickValueMany': {
        const infos = await Promise.all(symbolsArg(a).map((s) => symbolOrFail(conn, s)));
        return infos.map((i) => ({ symbol: i.name, tickValue: i.tickValue, tickSize: i.tickSize }));
      }
      case 'TickValueWithSize': {
        const lots = (a.lots as number | undefined) ?? (a.volume as number | undefined) ?? 1;
        const infos = await Promise.all(symbolsArg(a).map((s) => symbolOrFail(conn, s)));
        return infos.map((i) => ({
          symbol: i.name, tickValue: i.tickValue, tickSize: i.tickSize, point: i.point, digits: i.digits,
          contractSize: i.contractSize, lots, tickValueForLots: i.tickValue * lots,
        }));
      }
      case 'RequiredMargin': {
        const symbol = symbolArg(a);
        const volume = (a.lots as number | undefined) ?? (a.volume as number | undefined) ?? 1;
        if (!(volume > 0)) throw apiError('BAD_REQUEST', "parameter 'lots' must be positive");
        const kind = (a.type as string | undefined) ?? (a.operation as string | undefined) ?? 'Buy';
        const t = parseOrderType(kind);
        if (!t) throw apiError('BAD_REQUEST', `parameter 'type' must be an order type name or code, got ${kind}`);
        const side: Side = sideOf(t);
        const margin = await conn.requiredMargin(symbol, volume, side, a.price as number | undefined);
        return { symbol, lots: volume, type: side, margin };
      }
      case 'OrderHistory': {
        const from = (a.from as number | undefined) ?? now - 30 * 86_400_000;
        const to = (a.to as number | undefined) ?? now + 1;
        if (to < from) throw apiError('BAD_REQUEST', "parameter 'to' is before 'from'");
        const [orders, deals] = await Promise.all([conn.historyOrders(from, to), conn.historyDeals(from, to)]);
        return utc({ orders, deals });
      }
      case 'BalanceHistory': {
        const from = (a.from as number | undefined) ?? 0;
        const to = (a.to as number | undefined) ?? now + 1;
        if (to < from) throw apiError('BAD_REQUEST', "parameter 'to' is before 'from'");
        return utc(await conn.balanceHistory(from, to));
      }
      default:
        throw apiError('INTERNAL_ERROR', `unknown account operation ${op}`);
    }
  } catch (err) {
    if (err instanceof BrokerNotSupportedError) throw apiError('NOT_ON_THIS_TERMINAL', err.message);
    throw brokerFailure(err);
  }
}
