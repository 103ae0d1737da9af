// The ledger of one broker login on a simulated server (the base of SimAccount in ./account.ts):
// its balance, open positions and pending orders, their valuation, and the entries that change
// them (a position opened, part of one closed, a P4 ticket re-ticketed, a pending order taken off
// the book), each collected as a SimChange until the account flushes the operation's changes.
import type { AccountSummary } from '../market/account.js';
import { RETCODE_DONE, type Deal, type Order, type Position, type Side, type TradeResult } from '../market/orders.js';
import type { Platform } from '../market/server.js';
import { round2, swapFor, swapNights, profitFor } from './accounting.js';
import type { SimServerConfig } from './config.js';
import type { Market, MarketSymbol } from './market.js';
import type { SimChange, StoredAccount, StoredPosition } from './persistence.js';
import { round8 } from './orderRules.js';
import { ChangeBatch, OrderBook } from './accountState.js';
import { openingRecords, type OpeningRequest } from './records.js';
import { accountSummary, affords, positionProfit, positionSwap, positionView, Valuer } from './valuation.js';
import { PositionBook } from './positionBook.js';

/** What the ledger needs of its server. */
export interface LedgerHost {
  readonly market: Market;
  readonly config: SimServerConfig;
  nextId(): number;
}

// Records derived from another with some fields changed are made with Object.assign({}, base, changes),
// not { ...base, ...changes }: the same keys in the same order, but on Node 20 an object spread
// followed by more properties takes V8's slow path (~0.5 us a property; an order's close made three).
export abstract class AccountLedger {
  /** Open positions, with running totals per symbol (what margin checks and ticks ask in O(1)). */
  readonly positions: PositionBook;
  /** Pending orders (state 'placed') and, on P4, the order record of each open ticket. */
  readonly orders = new OrderBook();

  constructor(
    protected readonly host: LedgerHost,
    readonly data: StoredAccount,
    positions: readonly StoredPosition[],
    activeOrders: readonly Order[],
  ) {
    this.positions = new PositionBook(host.market.clock);
    for (const p of positions) this.positions.set(p.ticket, p);
    for (const o of activeOrders) this.orders.set(o.ticket, o);
  }

  get platform(): Platform {
    return this.host.config.platform;
  }
  protected get market(): Market {
    return this.host.market;
  }
  protected get now(): number {
    return this.host.market.now;
  }

  // ---- valuation (./valuation.ts) ---------------------------------------------------------

  protected sym(name: string): MarketSymbol | undefined {
    return this.market.bySymbol.get(name);
  }
  positionSwap(p: StoredPosition): number {
    return positionSwap(this.market, this.data, p);
  }
  positionProfit(p: StoredPosition): number {
    return positionProfit(this.market, this.data, p);
  }
  summary(): AccountSummary {
    return accountSummary(this.market, this.data, this.positions.values());
  }
  positionView(p: StoredPosition): Position {
    return positionView(this.market, this.data, p);
  }
  /** Is there free margin for `extraMargin` more? As the full summary says, in O(symbols held). */
  protected affords(extraMargin: number): boolean {
    return affords(this.market, this.data, this.positions, extraMargin);
  }

  positionList(): Position[] {
    const v = new Valuer(this.market, this.data);
    return [...this.positions.values()].map((p) => v.view(p));
  }
  pendingList(): Order[] {
    return [...this.orders.values()].filter((o) => o.state === 'placed');
  }

  // ---- entries ----------------------------------------------------------------------------

  /** Market execution: a new position/ticket, its opening order and 'in' deal. `fromPending`
   *  is the pending order being filled (its ticket becomes the position id). */
  protected openPosition(s: MarketSymbol, side: Side, req: OpeningRequest, price: number, sl: number, tp: number, fromPending: Order | null): TradeResult {
    const now = this.now;
    const ticket = fromPending ? fromPending.ticket : this.host.nextId();
    const commission = round2(-s.info.commissionPerLot * req.volume);
    const { deal, pos, order } = openingRecords(ticket, this.host.nextId(), s, side, req, price, sl, tp, commission, now, fromPending);
    this.positions.set(ticket, pos);
    this.data.balance = round2(this.data.balance + commission);
    // P4: the ticket stays an active order record until closed; P5: the order is done.
    const p4 = this.platform === 'P4';
    if (p4) this.orders.set(ticket, Object.assign({}, order, { type: side }));
    else this.orders.delete(ticket);
    this.commit({ balance: this.data.balance, orders: [{ order: p4 ? Object.assign({}, order, { type: side }) : order, doneMs: p4 ? null : now, wasActive: fromPending !== null }], positions: [pos], deals: [deal] }, [deal], true, fromPending !== null);
    return { ok: true, order, deals: [deal], retcode: RETCODE_DONE };
  }

  /** Close `lots` of a position at `price`: an 'out' deal, a closing order (P5) or the
   *  closed ticket (P4). */
  protected closePart(pos: StoredPosition, lots: number, price: number, comment: string): TradeResult & { ok: true } {
    const s = this.sym(pos.symbol)!;
    const now = this.now;
    const full = Math.abs(lots - pos.volume) < 1e-9;
    const nights = swapNights(pos.openTimeMsc, now, (t) => this.market.clock.toServer(t));
    const swapTotal = round2(swapFor(this.market, s.info, pos.type, pos.volume, nights, this.data.currency) - pos.swapPaid);
    const swap = full ? swapTotal : round2((swapTotal * lots) / pos.volume);
    const profit = round2(profitFor(this.market, s.info, pos.type, lots, pos.openPrice, price, this.data.currency));
    const commission = round2(-s.info.commissionPerLot * lots);
    const closeSide: Side = pos.type === 'Buy' ? 'Sell' : 'Buy';
    const p4 = this.platform === 'P4';
    const orderTicket = p4 ? pos.ticket : this.host.nextId();
    const deal: Deal = { ticket: this.host.nextId(), order: orderTicket, position: pos.ticket, symbol: pos.symbol, type: closeSide, entry: 'out', volume: lots, price, timeMsc: now, magic: pos.magic, comment: comment || pos.comment, commission, swap, profit };
    this.data.balance = round2(this.data.balance + profit + commission + swap);
    const change: SimChange = { balance: this.data.balance, deals: [deal] };
    let order: Order;
    if (p4) {
      const base = this.orders.get(pos.ticket)!;
      this.orders.delete(pos.ticket);
      if (full) {
        order = Object.assign({}, base, { state: 'closed' as const, volume: lots, closePrice: price, closeTimeMsc: now, commission: round2(pos.commission + commission), swap, profit });
        change.orders = [{ order, doneMs: now }];
      } else {
        // MT4 re-ticketing: the ticket closes with the lots closed ("to #new"), the rest stays
        // open under a new ticket ("from #old") with the same open price and time. Each ticket
        // closes once, so the order history has one record per partial close.
        const rest = this.reticket(pos, lots);
        order = Object.assign({}, base, { state: 'closed' as const, volume: lots, closePrice: price, closeTimeMsc: now, comment: `to #${rest.ticket}`, commission: round2(pos.commission - rest.commission + commission), swap, profit });
        const restOrder: Order = Object.assign({}, base, { ticket: rest.ticket, volume: rest.volume, comment: rest.comment, commission: rest.commission, positionId: rest.ticket });
        this.orders.set(rest.ticket, restOrder);
        change.orders = [{ order, doneMs: now }, { order: restOrder, doneMs: null }];
        change.closedPositions = [pos.ticket];
        change.positions = [rest];
      }
    } else {
      order = { kind: 'order', ticket: orderTicket, symbol: pos.symbol, type: closeSide, state: 'filled', volume: lots, volumeInitial: lots, openPrice: price, openTimeMsc: now, sl: 0, tp: 0, magic: pos.magic, comment, commission, swap, profit, positionId: pos.ticket };
      change.orders = [{ order, doneMs: now, wasActive: false }];
    }
    if (full) {
      this.positions.delete(pos.ticket);
      change.closedPositions = [pos.ticket];
    } else if (!p4) {
      // P5: the position keeps its id with the remaining lots (P4 re-ticketed it above).
      const remaining = round8(pos.volume - lots);
      // Swap accrues per lot and night and is realized on out deals: the closed lots took their
      // share. What is left is the remaining lots' share: swapPaid (swap already realized for
      // lots still open; 0 unless older data) scales with the volume; it must not take the
      // closed part's swap off the remaining lots.
      pos.swapPaid = round2((pos.swapPaid * remaining) / pos.volume);
      pos.volume = remaining;
      pos.commission = round2(pos.commission + commission);
      change.positions = [pos];
    }
    this.commit(change, [deal], true, false);
    return { ok: true, order, deals: [deal], retcode: RETCODE_DONE };
  }

  /** P4: the open rest of a partially closed position, under a new ticket. Swap accrued so far
   *  and the opening commission are split by volume (the closed lots took their share). */
  private reticket(pos: StoredPosition, closedLots: number): StoredPosition {
    const volume = round8(pos.volume - closedLots);
    const rest: StoredPosition = {
      ...pos, ticket: this.host.nextId(), volume, comment: `from #${pos.ticket}`,
      commission: round2((pos.commission * volume) / pos.volume), swapPaid: round2((pos.swapPaid * volume) / pos.volume),
    };
    this.positions.delete(pos.ticket);
    this.positions.set(rest.ticket, rest);
    return rest;
  }

  /** Takes a pending order off the book. `atMs`: when (an expired order leaves at its
   *  expiration time, whenever the engine notices). */
  protected finishPending(o: Order, state: 'cancelled' | 'expired' | 'rejected', atMs = this.now): TradeResult {
    const order: Order = Object.assign({}, o, { state, closeTimeMsc: atMs });
    this.orders.delete(o.ticket);
    this.commit({ orders: [{ order, doneMs: atMs }] }, [], false, true);
    return { ok: true, order, deals: [], retcode: RETCODE_DONE };
  }

  // ---- changes of the current operation ---------------------------------------------------

  /** Changes of the current operation, persisted in one transaction by flush(). */
  protected readonly changes = new ChangeBatch();

  protected commit(change: SimChange, _deals: Deal[], positionsChanged: boolean, ordersChanged: boolean): void {
    this.changes.add(change, positionsChanged, ordersChanged);
  }
}
