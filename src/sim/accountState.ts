// The containers of one simulated account's state between two commits: its order book, and the
// changes of one operation (a trade request, or one tick's triggers) merged until they are persisted
// in a single transaction (SimAccount.flush).
import type { Deal, Order } from '../market/orders.js';
import type { SimChange } from './persistence.js';
import { LazyMap } from '../util/lazyMap.js';

/**
 * An account's orders, knowing when the next expiration can be due: the clock asks every account
 * at every step (expireDue), and most steps must not walk the book. A lower bound: an order that
 * left the book may still hold it, and then one walk finds nothing due and moves it on.
 */
export class OrderBook extends LazyMap<number, Order> {
  nextExpiryMs = Infinity;
  override set(ticket: number, o: Order): this {
    if (o.state === 'placed' && o.expiration !== undefined && o.expiration < this.nextExpiryMs) this.nextExpiryMs = o.expiration;
    return super.set(ticket, o);
  }
}

type Batch = Required<Pick<SimChange, 'orders' | 'positions' | 'closedPositions' | 'deals'>> & SimChange;
const emptyBatch = (): Batch => ({ orders: [], positions: [], closedPositions: [], deals: [] });

const noDeals: readonly Deal[] = [];

/** Changes merged since the last flush, and whether positions or pending orders changed. */
export class ChangeBatch {
  /** Made by an operation's first change and handed over by take(): an empty one made ahead waited
   *  for the account's next operation, long enough to be copied by young-generation scavenges. */
  private batch: Batch | undefined;
  private dirty = false;
  private positionsChanged = false;
  private ordersChanged = false;

  get pending(): boolean {
    return this.dirty;
  }
  get deals(): readonly Deal[] {
    return this.batch?.deals ?? noDeals;
  }

  add(change: SimChange, positionsChanged: boolean, ordersChanged: boolean): void {
    if (this.batch === undefined) this.first(change);
    else this.merge(this.batch, change);
    this.dirty = true;
    this.positionsChanged ||= positionsChanged;
    this.ordersChanged ||= ordersChanged;
  }

  /** An operation's first change (most have only one): its lists copied at their size, where pushing
   *  onto empty ones gave each room for 17 (~0.6 KB of young garbage an order, issue 19). */
  private first(change: SimChange): void {
    const b: Batch = {
      orders: change.orders ? change.orders.slice() : [],
      positions: change.positions ? change.positions.map((p) => ({ ...p })) : [],
      closedPositions: change.closedPositions ? change.closedPositions.slice() : [],
      deals: change.deals ? change.deals.slice() : [],
    };
    if (change.balance !== undefined) b.balance = change.balance;
    if (change.equity) b.equity = change.equity;
    this.batch = b;
  }

  private merge(b: Batch, change: SimChange): void {
    if (change.balance !== undefined) b.balance = change.balance;
    if (change.orders) b.orders.push(...change.orders);
    if (change.positions) b.positions.push(...change.positions.map((p) => ({ ...p })));
    if (change.closedPositions) b.closedPositions.push(...change.closedPositions);
    if (change.deals) b.deals.push(...change.deals);
    if (change.equity) b.equity = change.equity;
  }

  /** The merged change (to persist) and what it changed; the batch starts empty again. */
  take(): { change: Batch; positionsChanged: boolean; ordersChanged: boolean } {
    const out = { change: this.batch ?? emptyBatch(), positionsChanged: this.positionsChanged, ordersChanged: this.ordersChanged };
    this.batch = undefined;
    this.dirty = this.positionsChanged = this.ordersChanged = false;
    return out;
  }
}

