// One broker login on a simulated server: the order engine over the account's ledger
// (./accountLedger.ts): trade requests checked by the order rules, the triggers of the market
// (pending entries and expirations, SL/TP, stop-out), equity samples. Every state change is
// collected in a SimChange and persisted in one transaction (flush), then announced.
import {
  isMarketType, isStopLimitType, RETCODE_DONE, sideOf, type CloseByRequest, type CloseRequest,
  type Deal, type DeleteRequest, type ModifyRequest, type Order, type OrderRequest,
  type RequestLookup, type TradeResult,
} from '../market/orders.js';
import { closePrice, marginFor, openPrice, validVolume } from './accounting.js';
import type { MarketSymbol } from './market.js';
import type { SimChange, SimPersistence, StoredAccount, StoredPosition } from './persistence.js';
import {
  marketGate, offGrid, pendingChangeProblem, pendingEntryProblem, pendingTrigger, reject, stopsSane, stopsValid,
} from './orderRules.js';
import { placedOrder, positionOrder } from './records.js';
import { clearOfStopOut, Valuer } from './valuation.js';
import { AccountLedger, type LedgerHost } from './accountLedger.js';

export interface AccountHost extends LedgerHost {
  readonly store: SimPersistence;
  /** Announce changes to the connections of this account. */
  publish(account: SimAccount, deals: readonly Deal[], positionsChanged: boolean, ordersChanged: boolean): void;
  /** The account's book changed: the host keeps only accounts with something open on its clock and
   *  ticks. `change`: what its flush wrote (its positions and orders name the symbols it may hold now). */
  track(account: SimAccount, change?: SimChange): void;
}

// Records derived from another are made with Object.assign, as in the ledger (./accountLedger.ts).
export class SimAccount extends AccountLedger {
  protected declare readonly host: AccountHost;

  /** Connections logged in to it (SimServer.login / logout): with none and nothing open, its server lets it go. */
  logins = 0;
  private lastEquityMinute = -1;
  private lastEquityOnChange = -Infinity;

  constructor(host: AccountHost, data: StoredAccount, positions: readonly StoredPosition[], activeOrders: readonly Order[]) {
    super(host, data, positions, activeOrders);
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
    if (pc || oc) this.host.track(this, change);
    if (change.deals.length > 0 || pc || oc) this.host.publish(this, change.deals, pc, oc);
  }
}
