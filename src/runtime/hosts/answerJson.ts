// The JSON of a filled trade's answer: `utc({ ...order, retcode, deals })` (accountOps.ts), as bytes.
// The generic utc() copies every order and deal key by key into a fresh object (a keyed store, and
// a hidden-class transition, per field) only for JSON.stringify to read the copy once: ~7 µs of the
// shard's thread per order. A market fill's order and deals have one known shape (sim/records.ts
// openingRecords, and bridges answer the same shape): when a record has exactly those keys in that
// order, holding plain values, its copy is one object literal, the same keys in the same order with
// the ISO sibling in place, and JSON.stringify writes the same bytes. Any other record goes the
// generic way.
import type { Deal, Order } from '../../market/orders.js';
import { utc } from './accountOps.js';

/** An opening's order, as openingRecords builds it. */
const ORDER_KEYS = [
  'kind', 'ticket', 'symbol', 'type', 'state', 'volume', 'volumeInitial', 'openPrice', 'openTimeMsc', 'sl', 'tp', 'magic',
  'comment', 'commission', 'swap', 'profit', 'positionId',
] as const;
const DEAL_KEYS = ['ticket', 'order', 'position', 'symbol', 'type', 'entry', 'volume', 'price', 'timeMsc', 'magic', 'comment', 'commission', 'swap', 'profit'] as const;

/** Own keys exactly `keys`, in order, none holding an object (utc() would copy it), the time field a number. */
function hasShape(rec: unknown, keys: readonly string[], timeKey: string): boolean {
  if (typeof rec !== 'object' || rec === null || Object.getPrototypeOf(rec) !== Object.prototype) return false;
  const r = rec as Record<string, unknown>;
  let i = 0;
  // for-in over a plain object lists its own keys only (Object.prototype has no enumerable ones).
  for (const k in r) {
    if (k !== keys[i]) return false;
    const v = r[k];
    if (typeof v === 'object' && v !== null) return false;
    i++;
  }
  return i === keys.length && typeof r[timeKey] === 'number';
}

// An order and its deals carry the same instant: one formatting serves them all.
let lastMs = NaN;
let lastIso: string | null = null;
/** As utc()'s: ISO 8601 UTC, null for a time with no calendar date. */
function iso(ms: number): string | null {
  if (ms !== lastMs) {
    const d = new Date(ms);
    lastIso = Number.isNaN(d.getTime()) ? null : d.toISOString();
    lastMs = ms;
  }
  return lastIso;
}

function dealCopy(d: Deal) {
  return {
    ticket: d.ticket, order: d.order, position: d.position, symbol: d.symbol, type: d.type, entry: d.entry, volume: d.volume,
    price: d.price, timeMsc: d.timeMsc, time: iso(d.timeMsc), magic: d.magic, comment: d.comment, commission: d.commission,
    swap: d.swap, profit: d.profit,
  };
}

/** JSON.stringify(utc({ ...order, retcode, deals })). */
export function filledAnswerJson(order: Order, retcode: number, deals: readonly Deal[]): string {
  let fast = Array.isArray(deals) && hasShape(order, ORDER_KEYS, 'openTimeMsc');
  for (let i = 0; fast && i < deals.length; i++) fast = hasShape(deals[i], DEAL_KEYS, 'timeMsc');
  if (!fast) {
    return JSON.stringify(utc({ ...order, retcode, deals }));
  }
  const o = order;
  return JSON.stringify({
    kind: o.kind, ticket: o.ticket, symbol: o.symbol, type: o.type, state: o.state, volume: o.volume, volumeInitial: o.volumeInitial,
    openPrice: o.openPrice, openTimeMsc: o.openTimeMsc, openTime: iso(o.openTimeMsc), sl: o.sl, tp: o.tp, magic: o.magic,
    comment: o.comment, commission: o.commission, swap: o.swap, profit: o.profit, positionId: o.positionId,
    retcode, deals: deals.map(dealCopy),
  });
}
