// Compact journal encoding of a SimChange. Bytes written per commit dominate the trade path
// on a virtual disk (tens of MB/s), so records are positional arrays instead of objects, and
// a request's result refers to the order/deals of the same change instead of repeating them.
import type { Deal, Order, RequestLookup, TradeResult } from '../market/orders.js';
import type { SimChange, StoredPosition } from '../sim/persistence.js';
import { JsonText } from '../util/jsonText.js';

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

/** The journal's writer: one row's text at a time (see src/util/jsonText.ts). */
const w = new JsonText();

function writeOrder(o: Order): void {
  w.raw('[').value(o.ticket).raw(',').value(o.symbol).raw(',').value(o.type).raw(',').value(o.state).raw(',').value(o.volume)
    .raw(',').value(o.volumeInitial).raw(',').value(o.openPrice).raw(',').value(o.openTimeMsc).raw(',').value(o.closePrice)
    .raw(',').value(o.closeTimeMsc).raw(',').value(o.sl).raw(',').value(o.tp).raw(',').value(o.stopLimitPrice).raw(',').value(o.expiration)
    .raw(',').value(o.magic).raw(',').value(o.comment).raw(',').value(o.commission).raw(',').value(o.swap).raw(',').value(o.profit)
    .raw(',').value(o.positionId).raw(']');
}
function writeDeal(d: Deal): void {
  w.raw('[').value(d.ticket).raw(',').value(d.order).raw(',').value(d.position).raw(',').value(d.symbol).raw(',').value(d.type)
    .raw(',').value(d.entry).raw(',').value(d.volume).raw(',').value(d.price).raw(',').value(d.timeMsc).raw(',').value(d.magic)
    .raw(',').value(d.comment).raw(',').value(d.commission).raw(',').value(d.swap).raw(',').value(d.profit).raw(']');
}
function writePosition(p: StoredPosition): void {
  w.raw('[').value(p.ticket).raw(',').value(p.symbol).raw(',').value(p.type).raw(',').value(p.volume).raw(',').value(p.openPrice)
    .raw(',').value(p.openTimeMsc).raw(',').value(p.sl).raw(',').value(p.tp).raw(',').value(p.magic).raw(',').value(p.comment)
    .raw(',').value(p.commission).raw(',').value(p.swapPaid).raw(']');
}
/** A list as `[a,b,…]`, or 0 when empty or absent (what `encodeChangePacked` writes). */
function writeList<T>(list: readonly T[] | undefined, each: (x: T) => void): void {
  if (!list?.length) {
    w.raw('0');
    return;
  }
  w.raw('[');
  for (let i = 0; i < list.length; i++) {
    if (i > 0) w.raw(',');
    each(list[i]!);
  }
  w.raw(']');
}
const writeChangedOrder = (o: NonNullable<SimChange['orders']>[number]): void => {
  w.raw('[');
  writeOrder(o.order);
  w.raw(',').value(o.doneMs).raw(',').raw(o.wasActive === undefined ? 'null' : o.wasActive ? '1' : '0').raw(']');
};
const writeValue = (x: unknown): void => void w.value(x);

/**
 * Encoded shape: [balance, orders, positions, closedPositions, deals, request, equity]. The text
 * is written field by field into a reused buffer: byte for byte what `encodeChangePacked` writes
 * (JSON.stringify of the positional arrays), without the arrays, the stringifier's parts and the
 * flattening (~2 KB of young garbage per order). A value it cannot write so goes the packed way.
 */
export function encodeChange(c: SimChange): string {
  const orders = c.orders ?? [];
  const deals = c.deals ?? [];
  w.begin().raw('[').value(c.balance).raw(',');
  writeList(c.orders, writeChangedOrder);
  w.raw(',');
  writeList(c.positions, writePosition);
  w.raw(',');
  writeList(c.closedPositions, writeValue);
  w.raw(',');
  writeList(c.deals, writeDeal);
  w.raw(',');
  const req = c.request;
  if (!req) w.raw('null');
  else {
    const r = req.result;
    w.raw('[').value(req.requestId).raw(',').value(req.timeMsc).raw(',');
    if (r.ok) {
      w.raw('1,');
      // The same objects as the change's own order and deals: their places, else inline.
      let oi = -1;
      for (let i = 0; i < orders.length && oi < 0; i++) if (orders[i]!.order === r.order) oi = i;
      if (oi >= 0) w.num(oi);
      else writeOrder(r.order);
      w.raw(',');
      let all = true;
      for (let i = 0; i < r.deals.length && all; i++) all = deals.indexOf(r.deals[i]!) >= 0;
      if (all) {
        w.raw('[');
        for (let i = 0; i < r.deals.length; i++) (i > 0 ? w.raw(',') : w).num(deals.indexOf(r.deals[i]!));
        w.raw(']');
      } else writeList(r.deals, writeDeal);
      w.raw(',').value(r.retcode).raw(']');
    } else {
      w.raw('0,').value(r.reason).raw(',').value(r.message).raw(',').value(r.retcode).raw(']');
    }
  }
  w.raw(',');
  if (c.equity) w.raw('[').value(c.equity.timeMsc).raw(',').value(c.equity.balance).raw(',').value(c.equity.equity).raw(']');
  else w.raw('0');
  w.raw(']');
  return w.failed ? encodeChangePacked(c) : w.text();
}

/** The encoding as JSON.stringify of the positional arrays (what `encodeChange` writes without them). */
export function encodeChangePacked(c: SimChange): string {
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

// Keys and times of the journal's rows (simStore.ts).

/** How far after a record's own time its journal row may be. */
export const JOURNAL_SLACK_MS = 60_000;

/** Sortable key of a request batch row. */
export function batchKey(timeMs: number, seq: number): string {
  return `${String(Math.max(0, timeMs)).padStart(15, '0')}:${String(seq).padStart(12, '0')}`;
}

/** Journal time of a change: the latest instant it carries. */
export function journalTime(c: SimChange, fallback: number): number {
  let t = fallback;
  if (c.deals) for (const d of c.deals) t = Math.max(t, d.timeMsc);
  if (c.orders) for (const o of c.orders) t = Math.max(t, o.doneMs ?? o.order.openTimeMsc);
  if (c.equity) t = Math.max(t, c.equity.timeMsc);
  if (c.request) t = Math.max(t, c.request.timeMsc);
  return t;
}
