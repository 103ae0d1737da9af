// The cluster scenarios' checker (issue 20): every request a client sent, with the node it reached
// and the answer it got, against what the broker executed. Pure: the scenarios collect both sides
// (the requests as they go, the broker's order history from the simulator at the end).
import type { Deal, Order, Position } from '../../src/market/orders.js';

/** What a request does: a market order (the default), a pending order placed, modified or deleted, a
 *  position closed. */
export type TradeKind = 'open' | 'place' | 'modify' | 'delete' | 'close';

/** One HTTP attempt of an order: a client retrying the same clientOrderId makes several. */
export interface Attempt {
  /** Absent: 'open' (a market order). */
  kind?: TradeKind;
  /** The position or pending order a close, modify or delete names. */
  target?: number;
  /** The price a placement or modify asks for. */
  price?: number;
  clientOrderId: string;
  /** The node the request was sent to (its NODE_ID). */
  node: string;
  /** The HTTP status, or 'refused' when no answer came (connection refused, reset, node killed). */
  status: number | 'refused';
  /** The answer's ticket, when it had one. */
  ticket?: number;
}

/** An order in the broker's history, with the clientOrderId it was sent under (the scenarios put it
 *  in the order's comment, which the broker keeps). */
export interface BrokerOrder {
  ticket: number;
  clientOrderId: string;
}

export interface LedgerFindings {
  /** Ids the broker executed more than once, with their tickets. */
  doubled: Array<{ clientOrderId: string; tickets: number[] }>;
  /** Ids that got a 200 but are not at the broker. */
  missing: string[];
  /** A 200 whose ticket is not the broker's order for that id (a replay answering another order). */
  wrongTicket: Array<{ clientOrderId: string; answered: number; broker: number }>;
  /** Orders at the broker under an id no client sent. */
  unknown: BrokerOrder[];
}

export function checkLedger(attempts: readonly Attempt[], broker: readonly BrokerOrder[]): LedgerFindings {
  const atBroker = new Map<string, number[]>();
  for (const o of broker) atBroker.set(o.clientOrderId, [...(atBroker.get(o.clientOrderId) ?? []), o.ticket]);
  const sent = new Set(attempts.map((a) => a.clientOrderId));
  const doubled = [...atBroker].filter(([, t]) => t.length > 1).map(([clientOrderId, tickets]) => ({ clientOrderId, tickets: [...tickets].sort((x, y) => x - y) }));
  const missing = new Set<string>();
  const wrongTicket: LedgerFindings['wrongTicket'] = [];
  for (const a of attempts) {
    if (a.status !== 200) continue;
    const tickets = atBroker.get(a.clientOrderId);
    if (!tickets) missing.add(a.clientOrderId);
    else if (a.ticket !== undefined && tickets.length === 1 && tickets[0] !== a.ticket) {
      wrongTicket.push({ clientOrderId: a.clientOrderId, answered: a.ticket, broker: tickets[0]! });
    }
  }
  const unknown = broker.filter((o) => !sent.has(o.clientOrderId));
  return { doubled, missing: [...missing].sort(), wrongTicket, unknown };
}

/** Throws, naming every finding, unless the history is clean: each id at most once at the broker,
 *  every 200 there under the ticket it answered, nothing at the broker that no client sent. */
export function assertLedger(attempts: readonly Attempt[], broker: readonly BrokerOrder[]): void {
  const lines = ledgerLines(attempts, broker);
  if (lines.length) throw new Error(`order ledger: ${lines.length} finding(s) over ${attempts.length} attempts and ${broker.length} broker orders\n${lines.join('\n')}`);
}

/** checkLedger's findings, one line each, naming the id and its attempts; `what` says which kind of
 *  request they were ('' for orders, 'close ' for closes...). */
function ledgerLines(attempts: readonly Attempt[], broker: readonly BrokerOrder[], what = ''): string[] {
  const f = checkLedger(attempts, broker);
  const byId = (id: string) => attempts.filter((a) => a.clientOrderId === id).map((a) => `${a.node}:${a.status}${a.ticket ? `#${a.ticket}` : ''}`).join(' ');
  return [
    ...f.doubled.map((d) => `doubled ${what}${d.clientOrderId}: tickets ${d.tickets.join(',')} (attempts ${byId(d.clientOrderId)})`),
    ...f.missing.map((id) => `missing ${what}${id}: answered 200 but not at the broker (attempts ${byId(id)})`),
    ...f.wrongTicket.map((w) => `wrong ticket ${what}${w.clientOrderId}: answered #${w.answered}, the broker has #${w.broker}`),
    ...f.unknown.map((o) => `unknown ${what}#${o.ticket} at the broker under '${o.clientOrderId}', never sent`),
  ];
}

// ---- A bot's whole mix: market orders, closes, pending orders placed, modified and deleted ----------

/** What the broker holds for an account (ClusterProcs.brokerBook): every deal, the orders that left
 *  the book, and the open positions and pending orders. */
export interface BrokerBook {
  deals: readonly Deal[];
  history: readonly Order[];
  positions: readonly Position[];
  orders: readonly Order[];
}

/** The market orders executed: one 'in' deal each, whose order is the ticket the client was answered. */
export function openedBy(deals: readonly Deal[]): BrokerOrder[] {
  return deals.filter((d) => d.entry === 'in').map((d) => ({ ticket: d.order, clientOrderId: d.comment }));
}

/** The closes executed: one 'out' deal each (the clients close whole positions), its comment the
 *  close's clientOrderId, its order the ticket answered (P5: the closing order; P4: the closed ticket). */
function closedBy(deals: readonly Deal[]): BrokerOrder[] {
  return deals.filter((d) => d.entry === 'out').map((d) => ({ ticket: d.order, clientOrderId: d.comment }));
}

const PENDING_TYPES: ReadonlySet<string> = new Set(['BuyLimit', 'SellLimit', 'BuyStop', 'SellStop', 'BuyStopLimit', 'SellStopLimit']);

/** The pending orders placed, in the book or gone from it, once per ticket, under their comments. */
function placedBy(book: BrokerBook): BrokerOrder[] {
  const byTicket = new Map<number, BrokerOrder>();
  for (const o of [...book.orders, ...book.history]) if (PENDING_TYPES.has(o.type)) byTicket.set(o.ticket, { ticket: o.ticket, clientOrderId: o.comment });
  return [...byTicket.values()];
}

/** What an id's last attempt says of its request: done (200), not done (a refusal before or by the
 *  broker: 4xx other than 409), or unknown (409 IDEMPOTENCY_UNCERTAIN, or given up on while 503/refused). */
function outcome(a: Attempt): 'done' | 'not' | 'unknown' {
  if (a.status === 200) return 'done';
  return typeof a.status === 'number' && a.status >= 400 && a.status < 500 && a.status !== 409 ? 'not' : 'unknown';
}

/** Each id's last attempt (its final answer), in the order the final answers came: one client's
 *  requests on one position or order follow each other, so this is their order. */
function finalsInOrder(attempts: readonly Attempt[]): Attempt[] {
  const last = new Map<string, number>();
  attempts.forEach((a, i) => last.set(a.clientOrderId, i));
  return [...last.values()].sort((x, y) => x - y).map((i) => attempts[i]!);
}

const show = (states: ReadonlySet<string | number>) => [...states].map((x) => (typeof x === 'number' ? `at ${x}` : x)).join(' or ');

/**
 * Every finding over a bot's whole history against the broker's book, one line each ([] when clean):
 * - market orders (kind 'open'), pending placements ('place') and closes ('close'): each id at most
 *   once at the broker, every 200 there under its ticket, nothing there no client sent (checkLedger),
 *   and none there whose final answer said it was not done (a 4xx other than 409: a removed seat's
 *   404, a refusal);
 * - a position closed at most once (one 'out' deal), and a 200 close closed the position it named;
 * - each position the clients opened (200) is open at the broker unless a close of it was answered
 *   200 (then it is not) or left unknown (then either);
 * - each pending order is in the book at the price of its last modify answered 200 (its placement's
 *   if none) unless a delete was answered 200 (then it is not); a modify or delete left unknown allows
 *   both states; one whose placement was left unknown may be in the book, at its placement's price,
 *   or not; and no other pending order is in the book.
 */
export function bookFindings(attempts: readonly Attempt[], book: BrokerBook): string[] {
  const of = (kind: TradeKind) => attempts.filter((a) => (a.kind ?? 'open') === kind);
  const lines = [
    ...ledgerLines(of('open'), openedBy(book.deals)),
    ...ledgerLines(of('place'), placedBy(book), 'placement '),
    ...ledgerLines(of('close'), closedBy(book.deals), 'close '),
  ];
  // A refusal after an attempt whose answer was lost (none came, or a 500) does not say the first
  // did not run (a retry after a restart finding the seat removed: 404): unknown.
  const lost = new Set(attempts.filter((a) => a.status === 'refused' || a.status === 500).map((a) => a.clientOrderId));
  const outcomeOf = (a: Attempt) => {
    const o = outcome(a);
    return o === 'not' && lost.has(a.clientOrderId) ? 'unknown' : o;
  };
  // Refused, yet done: the id's final answer says not, the broker has it.
  const done = new Map<TradeKind, Set<string>>([
    ['open', new Set(openedBy(book.deals).map((o) => o.clientOrderId))],
    ['place', new Set(placedBy(book).map((o) => o.clientOrderId))],
    ['close', new Set(closedBy(book.deals).map((o) => o.clientOrderId))],
  ]);
  for (const a of finalsInOrder(attempts)) {
    if (outcomeOf(a) === 'not' && done.get(a.kind ?? 'open')?.has(a.clientOrderId)) lines.push(`${a.kind ?? 'open'} ${a.clientOrderId} answered ${a.status} at last, but the broker has it`);
  }
  const outs = book.deals.filter((d) => d.entry === 'out');
  const outsOf = new Map<number, Deal[]>();
  for (const d of outs) outsOf.set(d.position, [...(outsOf.get(d.position) ?? []), d]);
  for (const [position, ds] of outsOf) if (ds.length > 1) lines.push(`position #${position} closed ${ds.length} times: ${ds.map((d) => `'${d.comment}'`).join(', ')}`);
  // Possible states by ticket: positions open/closed; pending orders absent or their price.
  const positions = new Map<number, Set<string>>();
  const pending = new Map<number, Set<string | number>>();
  const pendingById = new Map<string, number | undefined>();
  for (const a of finalsInOrder(attempts)) {
    const o = outcomeOf(a);
    if (o === 'not') continue;
    const kind = a.kind ?? 'open';
    if (kind === 'open' && o === 'done' && a.ticket !== undefined) positions.set(a.ticket, new Set(['open']));
    else if (kind === 'close' && a.target !== undefined) {
      const s = positions.get(a.target);
      if (o === 'done') {
        positions.set(a.target, new Set(['closed']));
        const d = outs.find((x) => x.comment === a.clientOrderId);
        if (d && d.position !== a.target) lines.push(`close ${a.clientOrderId} of #${a.target} answered 200 but closed #${d.position}`);
      } else s?.add('closed');
    } else if (kind === 'place' && a.price !== undefined) {
      if (o === 'done' && a.ticket !== undefined) pending.set(a.ticket, new Set([a.price]));
      else pendingById.set(a.clientOrderId, a.price);
    } else if ((kind === 'modify' || kind === 'delete') && a.target !== undefined) {
      const after = kind === 'delete' ? 'absent' : a.price;
      if (after === undefined) continue;
      const s = pending.get(a.target);
      if (o === 'done') pending.set(a.target, new Set([after]));
      else s?.add(after);
    }
  }
  const open = new Set(book.positions.map((p) => p.ticket));
  for (const [ticket, states] of positions) {
    const now = open.has(ticket) ? 'open' : 'closed';
    if (!states.has(now)) lines.push(`position #${ticket} is ${now} at the broker, the clients were told ${show(states)}`);
  }
  const inBook = new Map(book.orders.filter((o) => PENDING_TYPES.has(o.type)).map((o) => [o.ticket, o]));
  for (const [ticket, states] of pending) {
    const o = inBook.get(ticket);
    const now = o ? o.openPrice : 'absent';
    if (!states.has(now)) lines.push(`pending order #${ticket} is ${show(new Set([now]))} at the broker, the clients were told ${show(states)}`);
    inBook.delete(ticket);
  }
  for (const o of inBook.values()) {
    // Placed under an id whose answer never came: it may be there, untouched since.
    if (pendingById.has(o.comment) && pendingById.get(o.comment) === o.openPrice) continue;
    lines.push(`pending order #${o.ticket} '${o.comment}' at ${o.openPrice} in the book, not one the clients placed and kept`);
  }
  return lines;
}

/** Throws with every finding of bookFindings, unless there are none. */
export function assertBook(attempts: readonly Attempt[], book: BrokerBook): void {
  const lines = bookFindings(attempts, book);
  if (lines.length) throw new Error(`broker book: ${lines.length} finding(s) over ${attempts.length} attempts\n${lines.join('\n')}`);
}
