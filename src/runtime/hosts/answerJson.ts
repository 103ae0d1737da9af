// The JSON of a filled trade's answer: `utc({ ...order, retcode, deals })` (accountOps.ts), as bytes.
// The generic utc() copies every order and deal key by key into a fresh object (a keyed store, and
// a hidden-class transition, per field) only for JSON.stringify to read the copy once. A market
// fill's order and deals have one known shape (sim/records.ts openingRecords; bridges answer the
// same): when a record has exactly those keys in that order, each holding a value of its type, its
// text is written by one template, the same keys in the same order with the ISO sibling in place.
// Its instant is formatted once for the order and its deals: JSON.stringify converts every
// epoch-ms number anew (~0.25 us each, no cache for numbers beyond small integers), and the ISO text
// costs twice that. Any other record goes the generic way.
import type { Deal, Order } from '../../market/orders.js';
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

/** A number as JSON.stringify writes it. */
const num = (x: number) => (Number.isFinite(x) ? String(x) : 'null');
/** A string as JSON.stringify writes it. */
const str = (s: string) => JSON.stringify(s);

// The last instant written: its number and its ISO sibling (utc(): null for no calendar date), as JSON.
let lastMs = NaN;
let lastMsJson = 'null';
let lastIsoJson = 'null';
function instant(ms: number): void {
  if (ms === lastMs || (Number.isNaN(ms) && Number.isNaN(lastMs))) return;
  const d = new Date(ms);
  lastMs = ms;
  lastMsJson = num(ms);
  lastIsoJson = Number.isNaN(d.getTime()) ? 'null' : `"${d.toISOString()}"`;
}

function dealJson(d: Deal): string {
  instant(d.timeMsc);
  return `{"ticket":${num(d.ticket)},"order":${num(d.order)},"position":${num(d.position)},"symbol":${str(d.symbol)},"type":${str(d.type)},` +
    `"entry":${str(d.entry)},"volume":${num(d.volume)},"price":${num(d.price)},"timeMsc":${lastMsJson},"time":${lastIsoJson},` +
    `"magic":${num(d.magic)},"comment":${str(d.comment)},"commission":${num(d.commission)},"swap":${num(d.swap)},"profit":${num(d.profit)}}`;
}

/** JSON.stringify(utc({ ...order, retcode, deals })). */
export function filledAnswerJson(order: Order, retcode: number, deals: readonly Deal[]): string {
  let fast = typeof retcode === 'number' && Array.isArray(deals) && Object.getPrototypeOf(deals) === Array.prototype && hasShape(order, ORDER_SHAPE);
  for (let i = 0; fast && i < deals.length; i++) fast = hasShape(deals[i], DEAL_SHAPE);
  if (!fast) return JSON.stringify(utc({ ...order, retcode, deals }));
  const o = order;
  instant(o.openTimeMsc);
  let json = `{"kind":${str(o.kind)},"ticket":${num(o.ticket)},"symbol":${str(o.symbol)},"type":${str(o.type)},"state":${str(o.state)},` +
    `"volume":${num(o.volume)},"volumeInitial":${num(o.volumeInitial)},"openPrice":${num(o.openPrice)},"openTimeMsc":${lastMsJson},` +
    `"openTime":${lastIsoJson},"sl":${num(o.sl)},"tp":${num(o.tp)},"magic":${num(o.magic)},"comment":${str(o.comment)},` +
    `"commission":${num(o.commission)},"swap":${num(o.swap)},"profit":${num(o.profit)},"positionId":${num(o.positionId)},` +
    `"retcode":${num(retcode)},"deals":[`;
  for (let i = 0; i < deals.length; i++) json += i === 0 ? dealJson(deals[i]!) : `,${dealJson(deals[i]!)}`;
  return `${json}]}`;
}
