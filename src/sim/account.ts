// One broker login on a simulated server: balances, open positions, pending orders, and the
// order engine (validation, execution, SL/TP/pending triggers, stop-out). Every state
// change is collected in a SimChange and persisted in one transaction, then announced.
import type { AccountSummary } from '../market/account.js';
import {
  isMarketType, isStopLimitType, RETCODE_DONE, sideOf, type CloseByRequest, type CloseRequest,
  type Deal, type DeleteRequest, type ModifyRequest, type Order, type OrderRequest,
  type Position, type RequestLookup, type Side, type TradeResult,
} from '../market/orders.js';
import type { Platform } from '../market/server.js';
import { closePrice, marginFor, openPrice, profitFor, round2, swapFor, swapNights, validVolume } from './accounting.js';
import type { SimServerConfig } from './config.js';
import type { Market, MarketSymbol } from './market.js';
import type { SimChange, SimPersistence, StoredAccount, StoredPosition } from './persistence.js';
import {
  marketGate, offGrid, pendingChangeProblem, pendingEntryProblem, pendingTrigger, reject, round8, stopsSane, stopsValid,
} from './orderRules.js';
import { ChangeBatch, OrderBook } from './accountState.js';
import { openingRecords, placedOrder, positionOrder, type OpeningRequest } from './records.js';
import { accountSummary, affords, clearOfStopOut, positionProfit, positionSwap, positionView, Valuer } from './valuation.js';
import { PositionBook } from './positionBook.js';

export interface AccountHost {
  readonly market: Market;
  readonly config: SimServerConfig;
  readonly store: SimPersistence;
  nextId(): number;
  /** Announce changes to the connections of this account. */
  publish(account: SimAccount, deals: readonly Deal[], positionsChanged: boolean, ordersChanged: boolean): void;
  /** The account's book changed: the host keeps only accounts with something open on its clock and ticks. */
  track(account: SimAccount): void;
}

// Records derived from another with some fields changed are made with Object.assign({}, base, changes),
// not { ...base, ...changes }: the same keys in the same order, but on Node 20 an object spread
// followed by more properties takes V8's slow path (~0.5 us a property; an order's close made three).
export class SimAccount {
  /** Open positions, with running totals per symbol (what margin checks and ticks ask in O(1)). */
  readonly positions: PositionBook;
  /** Pending orders (state 'placed') and, on P4, the order record of each open ticket. */
  readonly orders = new OrderBook();
  private lastEquityMinute = -1;
  private lastEquityOnChange = -Infinity;

  constructor(
    private readonly host: AccountHost,
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
  private get market(): Market {
    return this.host.market;
  }
  private get now(): number {
    return this.host.market.now;
  }

  // ---- valuation (./valuation.ts) ---------------------------------------------------------

  private sym(name: string): MarketSymbol | undefined {
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
  private affords(extraMargin: number): boolean {
    return affords(this.market, this.data, this.positions, extraMargin);
  }

  positionList(): Position[] {
    const v = new Valuer(this.market, this.data);
    return [...this.positions.values()].map((p) => v.view(p));
  }
  pendingList(): Order[] {
    return [...this.orders.values()].filter((o) => o.state === 'placed');
  }

  // ---- trade operations -------------------------------------------------------------------

  orderSend(req: OrderRequest): TradeResult {
    const s = this.sym(req.symbol);
    if (!s) return reject('UNKNOWN_SYMBOL', `unknown symbol ${req.symbol}`);
    if (isStopLimitType(req.type) && this.platform === 'P4') {
      return reject('UNSUPPORTED_ORDER_TYPE', `${req.type} orders are not supported on P4`);
    }
    const side = sideOf(req.type);
    const gate = marketGate(this.market, this.now, s, side);
    if (gate) return gate;
    if (!validVolume(s.info, req.volume)) {
      return reject('INVALID_VOLUME', `volume ${req.volume} outside ${s.info.volumeMin}..${s.info.volumeMax} step ${s.info.volumeStep}`);
    }
    const sl = req.stoploss ?? 0;
    const tp = req.takeprofit ?? 0;
    if (!stopsSane(sl, tp)) return reject('INVALID_STOPS', 'invalid stop loss or take profit');
    const grid = offGrid(s, [['price', isMarketType(req.type) ? undefined : req.price], ['stopLimitPrice', isStopLimitType(req.type) ? req.stopLimitPrice : undefined], ['stoploss', sl], ['takeprofit', tp]]);
    if (grid) return grid;
    if (isMarketType(req.type)) {
      const price = openPrice(this.market, s, side);
      if (req.price !== undefined && req.slippage !== undefined && Math.abs(price - req.price) > req.slippage * s.point + 1e-9) {
        return reject('REQUOTE', `requote: market ${price}, requested ${req.price}, slippage ${req.slippage} points`);
      }
      if (!stopsValid(s, side, closePrice(this.market, s, side), sl, tp)) {
        return reject('INVALID_STOPS', `stops must be at least ${s.info.stopsLevel} points from the market`);
      }
      const margin = marginFor(this.market, s.info, req.volume, price, this.data.leverage, this.data.currency);
      if (!this.affords(margin)) return reject('NO_MONEY', 'not enough money');
      return this.openPosition(s, side, req, price, sl, tp, null);
    }
    const problem = pendingEntryProblem(this.market, this.now, s, req, sl, tp);
    if (problem) return problem;
    const order = placedOrder(this.host.nextId(), s.info.name, req as OrderRequest & { price: number }, sl, tp, this.now);
    this.orders.set(order.ticket, order);
    this.commit({ orders: [{ order, doneMs: null }] }, [], false, true);
    return { ok: true, order, deals: [], retcode: RETCODE_DONE };
  }

  /** Market execution: a new position/ticket, its opening order and 'in' deal. `fromPending`
   *  is the pending order being filled (its ticket becomes the position id). */
  private openPosition(s: MarketSymbol, side: Side, req: OpeningRequest, price: number, sl: number, tp: number, fromPending: Order | null): TradeResult {
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

  orderModify(req: ModifyRequest): TradeResult {
    const pos = this.positions.get(req.ticket);
    if (pos) {
      const s = this.sym(pos.symbol)!;
      const gate = marketGate(this.market, this.now, s, null);
      if (gate) return gate;
      const ref = closePrice(this.market, s, pos.type);
      const freeze = s.info.freezeLevel * s.point;
      if ((pos.sl !== 0 && Math.abs(ref - pos.sl) <= freeze) || (pos.tp !== 0 && Math.abs(ref - pos.tp) <= freeze)) {
        return reject('FROZEN', `position ${pos.ticket} is within the freeze level`);
      }
      const sl = req.stoploss ?? pos.sl;
      const tp = req.takeprofit ?? pos.tp;
      if (!stopsSane(sl, tp)) return reject('INVALID_STOPS', 'invalid stop loss or take profit');
      const grid = offGrid(s, [['stoploss', sl], ['takeprofit', tp]]);
      if (grid) return grid;
      if (!stopsValid(s, pos.type, ref, sl, tp)) return reject('INVALID_STOPS', `stops must be at least ${s.info.stopsLevel} points from the market`);
      pos.sl = sl;
      pos.tp = tp;
      const change: SimChange = { positions: [pos] };
      const p4Order = this.orders.get(pos.ticket);
      let order: Order;
      if (p4Order) {
        order = { ...p4Order, sl, tp };
        this.orders.set(order.ticket, order);
        change.orders = [{ order, doneMs: null }];
      } else {
        order = positionOrder(pos, sl, tp);
      }
      this.commit(change, [], true, false);
      return { ok: true, order, deals: [], retcode: RETCODE_DONE };
    }
    const o = this.orders.get(req.ticket);
    if (!o || o.state !== 'placed') return reject('INVALID_TICKET', `no open position or pending order ${req.ticket}`);
    const s = this.sym(o.symbol)!;
    const gate = marketGate(this.market, this.now, s, null);
    if (gate) return gate;
    if (this.frozenPending(s, o)) return reject('FROZEN', `order ${o.ticket} is within the freeze level`);
    const checked = pendingChangeProblem(this.market, this.now, s, o, req);
    if ('ok' in checked) return checked;
    const { price, lim, sl, tp } = checked;
    const { expiration: oldExp, ...rest } = o;
    const expiration = req.expiration === undefined ? oldExp : req.expiration === 0 ? undefined : req.expiration;
    const order: Order = Object.assign({}, rest, { openPrice: price, sl, tp }, lim !== undefined && isStopLimitType(o.type) ? { stopLimitPrice: lim } : {}, expiration !== undefined ? { expiration } : {});
    this.orders.set(order.ticket, order);
    this.commit({ orders: [{ order, doneMs: null }] }, [], false, true);
    return { ok: true, order, deals: [], retcode: RETCODE_DONE };
  }

  private frozenPending(s: MarketSymbol, o: Order): boolean {
    const ref = sideOf(o.type) === 'Buy' ? this.market.ask(s) : this.market.bid(s);
    return Math.abs(ref - o.openPrice) <= s.info.freezeLevel * s.point + 1e-9;
  }

  orderClose(req: CloseRequest): TradeResult {
    const pos = this.positions.get(req.ticket);
    if (!pos) return reject('INVALID_TICKET', `no open position ${req.ticket}`);
    const s = this.sym(pos.symbol)!;
    const gate = marketGate(this.market, this.now, s, null);
    if (gate) return gate;
    const lots = req.lots ?? pos.volume;
    const full = Math.abs(lots - pos.volume) < 1e-9;
    // A partial close must be a valid lot size and leave at least the minimum volume open.
    if (!full && (!(lots > 0) || lots > pos.volume || !validVolume(s.info, lots) || pos.volume - lots < s.info.volumeMin - 1e-9)) {
      return reject('INVALID_VOLUME', `cannot close ${lots} of ${pos.volume} lots`);
    }
    const price = closePrice(this.market, s, pos.type);
    if (req.price !== undefined && req.slippage !== undefined && Math.abs(price - req.price) > req.slippage * s.point + 1e-9) {
      return reject('REQUOTE', `requote: market ${price}, requested ${req.price}`);
    }
    return this.closePart(pos, full ? pos.volume : lots, price, req.comment ?? '');
  }

  /** Close `lots` of a position at `price`: an 'out' deal, a closing order (P5) or the
   *  closed ticket (P4). */
  private closePart(pos: StoredPosition, lots: number, price: number, comment: string): TradeResult & { ok: true } {
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

  orderCloseBy(req: CloseByRequest): TradeResult {
    const a = this.positions.get(req.ticket);
    const b = this.positions.get(req.byTicket);
    if (!a || !b || a === b) return reject('INVALID_TICKET', `close-by needs two open positions (${req.ticket}, ${req.byTicket})`);
    if (a.symbol !== b.symbol || a.type === b.type) return reject('INVALID_REQUEST', 'close-by needs opposite positions of the same symbol');
    const s = this.sym(a.symbol)!;
    const gate = marketGate(this.market, this.now, s, null);
    if (gate) return gate;
    // Close-by: both legs close at the by-position's open price, so `ticket` realizes the pair's
    // result (sell open - buy open, no spread paid) and the by-position closes flat.
    const lots = Math.min(a.volume, b.volume);
    const first = this.closePart(a, lots, b.openPrice, req.comment ?? `close by #${b.ticket}`);
    const second = this.closePart(b, lots, b.openPrice, req.comment ?? `close by #${a.ticket}`);
    return { ok: true, order: first.order, deals: [...first.deals, ...second.deals], retcode: RETCODE_DONE };
  }

  orderDelete(req: DeleteRequest): TradeResult {
    const o = this.orders.get(req.ticket);
    if (!o || o.state !== 'placed') return reject('INVALID_TICKET', `no pending order ${req.ticket}`);
    const s = this.sym(o.symbol)!;
    // As for a modify: a closed market (or a symbol closed to trading) refuses it (MT4 error 132,
    // MT5 TRADE_RETCODE_MARKET_CLOSED); its last quotes are stale for the freeze check anyway.
    const gate = marketGate(this.market, this.now, s, null);
    if (gate) return gate;
    if (this.frozenPending(s, o)) return reject('FROZEN', `order ${o.ticket} is within the freeze level`);
    return this.finishPending(o, 'cancelled');
  }

  /** Takes a pending order off the book. `atMs`: when (an expired order leaves at its
   *  expiration time, whenever the engine notices). */
  private finishPending(o: Order, state: 'cancelled' | 'expired' | 'rejected', atMs = this.now): TradeResult {
    const order: Order = Object.assign({}, o, { state, closeTimeMsc: atMs });
    this.orders.delete(o.ticket);
    this.commit({ orders: [{ order, doneMs: atMs }] }, [], false, true);
    return { ok: true, order, deals: [], retcode: RETCODE_DONE };
  }

  // ---- tick processing -------------------------------------------------------------------

  /** Has the account anything the clock or a tick can act on (a position or a pending order)? */
  get busy(): boolean {
    return this.positions.size > 0 || this.orders.size > 0;
  }

  /** Does anything open on this account trigger on this symbol's ticks? (A conversion
   *  pair's tick that changes a cross position's value is picked up by the stop-out check on
   *  the position's own next tick.) */
  hasSymbol(name: string): boolean {
    if (this.positions.count(name) > 0) return true;
    for (const o of this.orders.values()) if (o.symbol === name) return true;
    return false;
  }

  /** Triggers for one symbol's tick: pending entries and expirations, SL/TP, then stop-out. */
  onTick(s: MarketSymbol): void {
    const name = s.info.name;
    const bid = this.market.bid(s);
    const ask = this.market.ask(s);
    if (this.orders.size > 0) {
      for (const o of [...this.orders.values()]) {
        if (o.state !== 'placed' || o.symbol !== name) continue;
        if (o.expiration !== undefined && this.now >= o.expiration) {
          this.finishPending(o, 'expired', o.expiration);
          continue;
        }
        this.triggerPending(s, o, bid, ask);
      }
    }
    if (this.positions.size > 0) {
      // The symbol's positions are scanned only when a stop may trigger (bounds kept by the book).
      if (this.positions.stopsMayTrigger(name, bid, ask)) this.triggerStops(name, bid, ask);
      this.checkStopOut();
    }
  }

  private triggerStops(name: string, bid: number, ask: number): void {
    for (const p of [...this.positions.values()]) {
      if (p.symbol !== name) continue;
      const price = p.type === 'Buy' ? bid : ask;
      const hitSl = p.sl !== 0 && (p.type === 'Buy' ? bid <= p.sl : ask >= p.sl);
      const hitTp = p.tp !== 0 && (p.type === 'Buy' ? bid >= p.tp : ask <= p.tp);
      if (hitSl) this.closePart(p, p.volume, price, `[sl ${p.sl}]`);
      else if (hitTp) this.closePart(p, p.volume, price, `[tp ${p.tp}]`);
    }
    this.positions.refreshStops(name);
  }

  private triggerPending(s: MarketSymbol, o: Order, bid: number, ask: number): void {
    const action = pendingTrigger(o, bid, ask);
    if (action === 'toLimit') {
      // The stop part triggered: the order becomes a limit order at stopLimitPrice.
      const { stopLimitPrice, ...rest } = o;
      const order: Order = Object.assign({}, rest, { type: o.type === 'BuyStopLimit' ? ('BuyLimit' as const) : ('SellLimit' as const), openPrice: stopLimitPrice ?? o.openPrice });
      this.orders.set(order.ticket, order);
      this.commit({ orders: [{ order, doneMs: null }] }, [], false, true);
      return;
    }
    if (action === 'none') return;
    const side = sideOf(o.type);
    const price = side === 'Buy' ? ask : bid;
    const margin = marginFor(this.market, s.info, o.volume, price, this.data.leverage, this.data.currency);
    if (!this.market.tradeOpenAt(s, this.now)) return;
    if (!this.affords(margin)) {
      this.finishPending(o, 'rejected');
      return;
    }
    this.orders.delete(o.ticket);
    this.openPosition(s, side, o, price, o.sl, o.tp, o);
  }

  /** Pending orders whose expiration has passed leave the book, at their expiration time,
   *  whether or not their symbol ticked since (a closed market has no ticks: an order expiring
   *  over the weekend must not stay listed, or be cancellable, until Monday). Called by the
   *  simulator after the ticks up to `nowMs` were processed. */
  expireDue(nowMs: number): void {
    if (nowMs < this.orders.nextExpiryMs) return;
    let next = Infinity;
    for (const o of [...this.orders.values()]) {
      if (o.state !== 'placed' || o.expiration === undefined) continue;
      if (nowMs >= o.expiration) this.finishPending(o, 'expired', o.expiration);
      else if (o.expiration < next) next = o.expiration;
    }
    this.orders.nextExpiryMs = next;
  }

  /** Stop-out: while margin level < stopOut, close the position with the worst profit. */
  checkStopOut(): void {
    for (;;) {
      if (clearOfStopOut(this.market, this.data, this.positions, this.host.config.account.stopOut)) return;
      const sum = this.summary();
      if (sum.margin <= 0 || sum.marginLevel >= this.host.config.account.stopOut) return;
      let worst: StoredPosition | null = null;
      let worstProfit = Infinity;
      const v = new Valuer(this.market, this.data);
      for (const p of this.positions.values()) {
        // A closed market has no price to close at: its positions wait for the reopening.
        if (!this.market.tradeOpenAt(this.sym(p.symbol)!, this.now)) continue;
        const pr = v.profit(p);
        if (pr < worstProfit) {
          worstProfit = pr;
          worst = p;
        }
      }
      if (!worst) return;
      const s = this.sym(worst.symbol)!;
      this.closePart(worst, worst.volume, closePrice(this.market, s, worst.type), `[so ${sum.marginLevel.toFixed(1)}%]`);
    }
  }

  /** One equity point per minute while positions are open (called by the simulator). */
  sampleEquity(): void {
    const minute = Math.floor(this.now / 60_000);
    if (minute === this.lastEquityMinute || this.positions.size === 0) return;
    this.lastEquityMinute = minute;
    const sum = this.summary();
    this.host.store.apply(this.data.server, this.data.login, { equity: { timeMsc: this.now, balance: sum.balance, equity: sum.equity } });
  }

  /** Changes of the current operation, persisted in one transaction by flush(). */
  private readonly changes = new ChangeBatch();

  private commit(change: SimChange, _deals: Deal[], positionsChanged: boolean, ordersChanged: boolean): void {
    this.changes.add(change, positionsChanged, ordersChanged);
  }

  /** Persist and announce everything since the last flush (one transaction). */
  flush(request?: RequestLookup): void {
    if (!this.changes.pending && !request) return;
    if (this.changes.deals.length > 0 && this.now - this.lastEquityOnChange >= 1000) {
      // Equity is sampled on balance changes (at most once per second per account) and
      // once per minute while positions are open (sampleEquity).
      this.lastEquityOnChange = this.now;
      const sum = this.summary();
      this.changes.add({ equity: { timeMsc: this.now, balance: sum.balance, equity: sum.equity } }, false, false);
    }
    const { change, positionsChanged: pc, ordersChanged: oc } = this.changes.take();
    if (request) change.request = request;
    this.host.store.apply(this.data.server, this.data.login, change);
    if (pc || oc) this.host.track(this);
    if (change.deals.length > 0 || pc || oc) this.host.publish(this, change.deals, pc, oc);
  }
}

