// The JSON of a filled trade's answer: `utc({ ...order, retcode, deals })` (accountOps.ts), as bytes.
// The generic utc() copies every order and deal key by key into a fresh object (a keyed store, and
// a hidden-class transition, per field) only for JSON.stringify to read the copy once. A market
// fill's order and deals have one known shape (sim/records.ts openingRecords; bridges answer the
// same): when a record has exactly those keys in that order, each holding a value of its type, its
// text is written field by field, the same keys in the same order with the ISO sibling in place.
// The text goes into one reused buffer (src/util/jsonText.ts), read out as one string: written with
// a template it was ~70 cons strings, number strings and a Date with its ISO text, ~4 KB of young
// garbage per order. Any other record, or a string that needs escaping, goes the generic way.
import type { Deal, Order } from '../../market/orders.js';
import { JsonText } from '../../util/jsonText.js';
import { utc } from './accountOps.js';

type Shape = readonly (readonly [key: string, type: 'number' | 'string'])[];

/** An opening's order, as openingRecords builds it. */
const ORDER_SHAPE: Shape = [
  ['kind', 'string'], ['ticket', 'number'], ['symbol', 'string'], ['type', 'string'], ['state', 'string'], ['volume', 'number'],
  ['volumeInitial', 'number'], ['openPrice', 'number'], ['openTimeMsc', 'number'], ['sl', 'number'], ['tp', 'number'],
  ['magic', 'number'], ['comment', 'string'], ['commission', 'number'], ['swap', 'number'], ['profit', 'number'], ['positionId', 'number'],
];
const DEAL_SHAPE: Shape = [
  ['ticket', 'number'], ['order', 'number'], ['position', 'number'], ['symbol', 'string'], ['type', 'string'], ['entry', 'string'],
  ['volume', 'number'], ['price', 'number'], ['timeMsc', 'number'], ['magic', 'number'], ['comment', 'string'],
  ['commission', 'number'], ['swap', 'number'], ['profit', 'number'],
];

/** A plain object whose own keys are exactly the shape's, in order, each value of the shape's type. */
function hasShape(rec: unknown, shape: Shape): boolean {
  if (typeof rec !== 'object' || rec === null || Object.getPrototypeOf(rec) !== Object.prototype) return false;
  const r = rec as Record<string, unknown>;
  let i = 0;
  // for-in over a plain object lists its own keys only (Object.prototype has no enumerable ones).
  for (const k in r) {
    const field = shape[i];
    if (field === undefined || k !== field[0] || typeof r[k] !== field[1]) return false;
    i++;
  }
  return i === shape.length;
}

/** The instant's ISO sibling, as utc() has it (null for no calendar date). */
function isoTime(ms: number): JsonText {
  if (!w.isoTime(ms)) {
    const d = new Date(ms);
    w.raw(Number.isNaN(d.getTime()) ? 'null' : `"${d.toISOString()}"`);
  }
  return w;
}

/** One writer for the shard's thread: an answer is written and read out before the next begins. */
const w = new JsonText();

function dealJson(d: Deal): void {
  w.raw('{"ticket":').num(d.ticket).raw(',"order":').num(d.order).raw(',"position":').num(d.position).raw(',"symbol":').str(d.symbol)
    .raw(',"type":').str(d.type).raw(',"entry":').str(d.entry).raw(',"volume":').num(d.volume).raw(',"price":').num(d.price)
    .raw(',"timeMsc":').num(d.timeMsc).raw(',"time":');
  isoTime(d.timeMsc).raw(',"magic":').num(d.magic).raw(',"comment":').str(d.comment)
    .raw(',"commission":').num(d.commission).raw(',"swap":').num(d.swap).raw(',"profit":').num(d.profit).raw('}');
}

/** JSON.stringify(utc({ ...order, retcode, deals })). */
export function filledAnswerJson(order: Order, retcode: number, deals: readonly Deal[]): string {
  let fast = typeof retcode === 'number' && Array.isArray(deals) && Object.getPrototypeOf(deals) === Array.prototype && hasShape(order, ORDER_SHAPE);
  for (let i = 0; fast && i < deals.length; i++) fast = hasShape(deals[i], DEAL_SHAPE);
  if (fast) {
    const o = order;
    w.begin().raw('{"kind":').str(o.kind).raw(',"ticket":').num(o.ticket).raw(',"symbol":').str(o.symbol).raw(',"type":').str(o.type)
      .raw(',"state":').str(o.state).raw(',"volume":').num(o.volume).raw(',"volumeInitial":').num(o.volumeInitial)
      .raw(',"openPrice":').num(o.openPrice).raw(',"openTimeMsc":').num(o.openTimeMsc).raw(',"openTime":');
    isoTime(o.openTimeMsc).raw(',"sl":').num(o.sl).raw(',"tp":').num(o.tp).raw(',"magic":').num(o.magic).raw(',"comment":').str(o.comment)
      .raw(',"commission":').num(o.commission).raw(',"swap":').num(o.swap).raw(',"profit":').num(o.profit)
      .raw(',"positionId":').num(o.positionId).raw(',"retcode":').num(retcode).raw(',"deals":[');
    for (let i = 0; i < deals.length; i++) {
      if (i > 0) w.raw(',');
      dealJson(deals[i]!);
    }
    w.raw(']}');
    // A string that needs escaping (a comment, say) is written the generic way.
    if (!w.failed) return w.text();
  }
  return JSON.stringify(utc({ ...order, retcode, deals }));
}
