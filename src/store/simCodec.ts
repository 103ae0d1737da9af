// Compact journal encoding of a SimChange. Bytes written per commit dominate the trade path
// on a virtual disk (tens of MB/s), so records are positional arrays instead of objects, and
// a request's result refers to the order/deals of the same change instead of repeating them.
import type { Deal, Order, RequestLookup, TradeResult } from '../market/orders.js';
import type { SimChange, StoredPosition } from '../sim/persistence.js';

const ORDER_KEYS = [
  'ticket', 'symbol', 'type', 'state', 'volume', 'volumeInitial', 'openPrice', 'openTimeMsc', 'closePrice', 'closeTimeMsc',
  'sl', 'tp', 'stopLimitPrice', 'expiration', 'magic', 'comment', 'commission', 'swap', 'profit', 'positionId',
] as const;
const DEAL_KEYS = ['ticket', 'order', 'position', 'symbol', 'type', 'entry', 'volume', 'price', 'timeMsc', 'magic', 'comment', 'commission', 'swap', 'profit'] as const;
const POSITION_KEYS = ['ticket', 'symbol', 'type', 'volume', 'openPrice', 'openTimeMsc', 'sl', 'tp', 'magic', 'comment', 'commission', 'swapPaid'] as const;

type Packed = unknown[];

function unpack<T>(arr: Packed, keys: readonly string[], extra: Record<string, unknown> = {}): T {
  const out: Record<string, unknown> = { ...extra };
  for (let i = 0; i < keys.length; i++) {
    const v = arr[i];
    if (v !== null && v !== undefined) out[keys[i]!] = v;
  }
  return out as T;
}

// Written out field by field (in ORDER_KEYS / DEAL_KEYS / POSITION_KEYS order, what `unpack` reads):
// the generic pack's keyed reads cost about half of an order's encoding.
const packOrder = (o: Order): Packed => [
  o.ticket, o.symbol, o.type, o.state, o.volume, o.volumeInitial, o.openPrice, o.openTimeMsc, o.closePrice ?? null, o.closeTimeMsc ?? null,
  o.sl, o.tp, o.stopLimitPrice ?? null, o.expiration ?? null, o.magic, o.comment, o.commission, o.swap, o.profit, o.positionId,
];
const unpackOrder = (a: Packed) => unpack<Order>(a, ORDER_KEYS, { kind: 'order' });
const packDeal = (d: Deal): Packed => [
  d.ticket, d.order, d.position, d.symbol, d.type, d.entry, d.volume, d.price, d.timeMsc, d.magic, d.comment, d.commission, d.swap, d.profit,
];
const packPosition = (p: StoredPosition): Packed => [
  p.ticket, p.symbol, p.type, p.volume, p.openPrice, p.openTimeMsc, p.sl, p.tp, p.magic, p.comment, p.commission, p.swapPaid,
];
const unpackDeal = (a: Packed) => unpack<Deal>(a, DEAL_KEYS);

/** Encoded shape: [balance, orders, positions, closedPositions, deals, request, equity]. */
export function encodeChange(c: SimChange): string {
  const orders = c.orders ?? [];
  const deals = c.deals ?? [];
  let request: unknown = null;
  if (c.request) {
    const r = c.request.result;
    if (r.ok) {
      // Refer to the order and deals stored in the same change when they are the same
      // objects (the engine passes them through unchanged); else store them inline.
      const oi = orders.findIndex((o) => o.order === r.order);
      const di = r.deals.map((d) => deals.indexOf(d));
      request = [c.request.requestId, c.request.timeMsc, 1, oi >= 0 ? oi : packOrder(r.order), di.every((i) => i >= 0) ? di : r.deals.map(packDeal), r.retcode];
    } else {
      request = [c.request.requestId, c.request.timeMsc, 0, r.reason, r.message, r.retcode];
    }
  }
  return JSON.stringify([
    c.balance ?? null,
    orders.length ? orders.map((o) => [packOrder(o.order), o.doneMs, o.wasActive === undefined ? null : o.wasActive ? 1 : 0]) : 0,
    c.positions?.length ? c.positions.map(packPosition) : 0,
    c.closedPositions?.length ? c.closedPositions : 0,
    deals.length ? deals.map(packDeal) : 0,
    request,
    c.equity ? [c.equity.timeMsc, c.equity.balance, c.equity.equity] : 0,
  ]);
}

export function decodeChange(text: string): SimChange {
  const [balance, orders, positions, closed, deals, request, equity] = JSON.parse(text) as [
    number | null,
    [Packed, number | null, 0 | 1 | null][] | 0,
    Packed[] | 0,
    number[] | 0,
    Packed[] | 0,
    unknown[] | null,
    [number, number, number] | 0,
  ];
  const c: SimChange = {};
  if (balance !== null) c.balance = balance;
  if (orders) c.orders = orders.map(([o, doneMs, was]) => ({ order: unpackOrder(o), doneMs, ...(was === null ? {} : { wasActive: was === 1 }) }));
  if (positions) c.positions = positions.map((p) => unpack<StoredPosition>(p, POSITION_KEYS));
  if (closed) c.closedPositions = closed;
  if (deals) c.deals = deals.map(unpackDeal);
  if (request) {
    const [requestId, timeMsc, ok] = request as [string, number, number];
    let result: TradeResult;
    if (ok === 1) {
      const [, , , o, ds, retcode] = request as [string, number, number, number | Packed, number[] | Packed[], number];
      const order = typeof o === 'number' ? c.orders![o]!.order : unpackOrder(o);
      const dealList = (ds as unknown[]).map((d) => (typeof d === 'number' ? c.deals![d]! : unpackDeal(d as Packed)));
      result = { ok: true, order, deals: dealList, retcode };
    } else {
      const [, , , reason, message, retcode] = request as [string, number, number, TradeResult & { ok: false } extends { reason: infer R } ? R : never, string, number];
      result = { ok: false, reason, message, retcode };
    }
    c.request = { requestId, timeMsc, result } satisfies RequestLookup;
  }
  if (equity) c.equity = { timeMsc: equity[0], balance: equity[1], equity: equity[2] };
  return c;
}
