// In-process BrokerConnection over the simulator: one connection = one login on one server.
// Its session (state, gate, events, subscriptions) is SimSession's (./simSession.ts); here are
// the requests. Trades are idempotent per request id (the first outcome is replayed), faults from
// the simulator's FaultController are applied here, at the edge, like a network would.
import { SimSession } from './simSession.js';
import type { SimAccount } from '../sim/account.js';
import { marginFor } from '../sim/accounting.js';
import type { Simulator } from '../sim/simulator.js';
import { utcOffsetMinutes } from '../market/serverClock.js';
import { dialectOf } from './dialect.js';
import type { BrokerConnection, TradeOptions } from './types.js';
import type { AccountDetails, AccountSummary, EquityPoint } from '../market/account.js';
import { BrokerNotSupportedError, BrokerTimeoutError } from '../market/brokerErrors.js';
import {
  RETCODES, type CloseByRequest, type CloseRequest, type Deal, type DeleteRequest, type ModifyRequest,
  type OpenedOrders, type Order, type OrderRequest, type Position, type RequestLookup, type Side,
  type TradeResult,
} from '../market/orders.js';
import type { ServerTime, Tick } from '../market/server.js';
import type { SymbolInfo } from '../market/symbols.js';
import type { Candle, Timeframe } from '../market/timeframes.js';
import type { MarketSymbol } from '../sim/market.js';
import { conversionRate } from '../sim/accounting.js';

export class SimBrokerConnection extends SimSession implements BrokerConnection {
  /** The simulator runs on the holder's thread and journals trades in its database (BrokerConnection.inProcess). */
  readonly inProcess = true;

  async accountSummary(): Promise<AccountSummary> {
    return (await this.ready()).summary();
  }

  async accountDetails(): Promise<AccountDetails> {
    const acc = await this.ready();
    const cfg = this.host.config;
    return {
      login: this.login,
      name: acc.data.name,
      server: this.server.name,
      platform: this.server.platform,
      timeZone: this.server.timeZone.description,
      utcOffsetMinutes: utcOffsetMinutes(this.server.timeZone, this.sim.clock.now()),
      currency: acc.data.currency,
      marginCall: cfg.account.marginCall,
      stopOut: cfg.account.stopOut,
      group: cfg.account.group,
      type: 'demo',
      leverage: acc.data.leverage,
      company: this.server.company,
      email: `${this.login}@demo.invalid`,
      phone: '+000 0000 0000',
      country: 'Simland',
      city: 'Sim City',
      address: '1 Simulation Street',
      registrationTimeMsc: acc.data.createdMs,
    };
  }

  async serverTime(): Promise<ServerTime> {
    await this.ready();
    const t = this.sim.clock.now();
    const off = utcOffsetMinutes(this.server.timeZone, t);
    return { timeMsc: t, serverTimeMsc: t + off * 60_000, utcOffsetMinutes: off };
  }

  private symbolInfo(s: MarketSymbol, currency: string): SymbolInfo {
    const m = this.host.market;
    const tickValue = s.info.tickSize * s.info.contractSize * conversionRate(m, s.info.currency, currency);
    return { ...s.info, tickValue };
  }

  async symbols(): Promise<readonly SymbolInfo[]> {
    const acc = await this.ready();
    return this.host.market.symbols.map((s) => this.symbolInfo(s, acc.data.currency));
  }

  async symbol(name: string): Promise<SymbolInfo | null> {
    const acc = await this.ready();
    const s = this.host.market.bySymbol.get(name);
    return s ? this.symbolInfo(s, acc.data.currency) : null;
  }

  async quote(symbol: string): Promise<Tick | null> {
    await this.ready();
    const s = this.host.market.bySymbol.get(symbol);
    return s ? this.host.market.tick(s) : null;
  }

  async requiredMargin(symbol: string, volume: number, side: Side, price?: number): Promise<number> {
    const acc = await this.ready();
    const s = this.sym(symbol);
    const m = this.host.market;
    const p = price ?? (side === 'Buy' ? m.ask(s) : m.bid(s));
    return Math.round(marginFor(m, s.info, volume, p, acc.data.leverage, acc.data.currency) * 100) / 100;
  }

  // ---- trading ---------------------------------------------------------------------------

  get claimsAtomically(): boolean {
    return this.host.store.bookAtomically !== undefined;
  }

  /** An atomic claim with no latency injected (the order's path) is booked at once, with no async
   *  function and no await (~1 KB of promises and frames an order, issue 19); else `tradeLater`. */
  private trade(opts: TradeOptions | undefined, op: (acc: SimAccount) => TradeResult): Promise<TradeResult> {
    const claim = opts?.claim;
    if (!claim || !this.claimsAtomically || this.claimsFirst()) return this.tradeLater(opts, op);
    try {
      const acc = this.readyNow();
      const requestId = opts.requestId;
      const fault = this.sim.faults.tradeFault(this.server.name, this.login);
      const booked = this.host.store.bookAtomically!(claim, () => this.book(acc, requestId, fault, op));
      // book() ran inside bookAtomically: a request id it knew is answered as it was, fault or not.
      if (this.bookedKnown || fault !== 'timeoutAfterSend') return booked;
      return booked.then(() => {
        throw new BrokerTimeoutError(true, 'broker reply lost after send (injected fault)', requestId);
      });
    } catch (err) {
      return Promise.reject(err);
    }
  }

  private async tradeLater(opts: TradeOptions | undefined, op: (acc: SimAccount) => TradeResult): Promise<TradeResult> {
    let claim = opts?.claim;
    // A held reply (injected latency) waits before executing: the claim is committed before the
    // wait, as through a bridge, so a crash meanwhile leaves a durable 'sent' record. So does a trade
    // an unknownAfterSend may take: its lost reply then leaves the record 'sent', as a restart would.
    if (claim && (!this.claimsAtomically || this.claimsFirst())) {
      claim.check();
      claim.write(undefined);
      claim = undefined;
    }
    const acc = await this.ready();
    const requestId = opts?.requestId;
    const fault = this.sim.faults.tradeFault(this.server.name, this.login);
    const book = () => this.book(acc, requestId, fault, op);
    // Claimed atomically: the claim, the booking and what was queued commit now, in one transaction.
    let result: TradeResult;
    let seen: boolean;
    if (claim) {
      const booked = this.host.store.bookAtomically!(claim, book);
      seen = this.bookedKnown; // book() ran inside bookAtomically, before any other trade could
      result = await booked;
    } else {
      result = book();
      seen = this.bookedKnown;
    }
    if (seen) return result;
    if (!claim) await this.host.store.whenDurable();
    if (fault === 'timeoutAfterSend' || fault === 'unknownAfterSend') throw new BrokerTimeoutError(true, 'broker reply lost after send (injected fault)', requestId);
    return result;
  }

  /** The claim goes before the trade, not in its booking's transaction (see tradeLater). */
  private claimsFirst(): boolean {
    return this.sim.faults.latency(this.server.name, this.login) > 0 || this.sim.faults.claimsFirst(this.server.name, this.login);
  }

  /** Whether the last `book` answered a request id it knew (its first outcome, replayed). Read right
   *  after bookAtomically, which has run `book` when it returns (SimPersistence.bookAtomically). */
  private bookedKnown = false;
  /** Executes the trade (or replays the outcome its request id had) and queues its changes. */
  private book(acc: SimAccount, requestId: string | undefined, fault: ReturnType<Simulator['faults']['tradeFault']>, op: (acc: SimAccount) => TradeResult): TradeResult {
    this.bookedKnown = false;
    if (requestId !== undefined) {
      const known = this.host.store.request(this.server.name, this.login, requestId);
      if (known) {
        this.bookedKnown = true;
        return known.result;
      }
    }
    const result: TradeResult = fault === 'reject'
      ? { ok: false, reason: 'REJECTED', message: 'request rejected by the broker (injected fault)', retcode: RETCODES.REJECTED }
      : op(acc);
    acc.flush(requestId !== undefined ? { requestId, timeMsc: this.host.market.now, result } : undefined);
    return result;
  }

  orderSend(req: OrderRequest, opts?: TradeOptions): Promise<TradeResult> {
    return this.trade(opts, (acc) => acc.orderSend(req));
  }
  orderModify(req: ModifyRequest, opts?: TradeOptions): Promise<TradeResult> {
    return this.trade(opts, (acc) => acc.orderModify(req));
  }
  orderClose(req: CloseRequest, opts?: TradeOptions): Promise<TradeResult> {
    return this.trade(opts, (acc) => acc.orderClose(req));
  }
  orderCloseBy(req: CloseByRequest, opts?: TradeOptions): Promise<TradeResult> {
    return this.trade(opts, (acc) => acc.orderCloseBy(req));
  }
  orderDelete(req: DeleteRequest, opts?: TradeOptions): Promise<TradeResult> {
    return this.trade(opts, (acc) => acc.orderDelete(req));
  }

  async lookupRequest(requestId: string): Promise<RequestLookup | null> {
    await this.ready();
    if (this.sim.faults.lookupFails(this.server.name, this.login)) throw new BrokerTimeoutError(false, 'the broker cannot be asked about requests now (injected fault: unknownAfterSend)');
    return this.host.store.request(this.server.name, this.login, requestId);
  }

  // ---- queries ---------------------------------------------------------------------------

  async openedOrders(): Promise<OpenedOrders> {
    const acc = await this.ready();
    return { positions: acc.positionList(), orders: acc.pendingList() };
  }

  async openedOrder(ticket: number): Promise<Position | Order | null> {
    const acc = await this.ready();
    const p = acc.positions.get(ticket);
    if (p) return acc.positionView(p);
    const o = acc.orders.get(ticket);
    return o && o.state === 'placed' ? o : null;
  }

  async historyDeals(fromMs: number, toMs: number): Promise<readonly Deal[]> {
    await this.ready();
    return this.host.store.deals(this.server.name, this.login, fromMs, toMs);
  }

  async historyOrders(fromMs: number, toMs: number): Promise<readonly Order[]> {
    await this.ready();
    return this.host.store.historyOrders(this.server.name, this.login, fromMs, toMs);
  }

  async balanceHistory(fromMs: number, toMs: number): Promise<readonly Deal[]> {
    if (!dialectOf(this.server.platform).balanceHistory) throw new BrokerNotSupportedError('balanceHistory', this.server.platform);
    return (await this.historyDeals(fromMs, toMs)).filter((d) => d.type === 'Balance');
  }

  async equityHistory(fromMs: number): Promise<readonly EquityPoint[]> {
    await this.ready();
    return this.host.store.equity(this.server.name, this.login, fromMs);
  }

  async priceHistory(symbol: string, timeframe: Timeframe, fromMs: number, toMs: number): Promise<readonly Candle[]> {
    await this.ready();
    return this.host.market.priceHistory(this.sym(symbol), timeframe, fromMs, toMs);
  }

  async quoteHistory(symbol: string, timeframe: Timeframe, fromMs: number, count: number): Promise<readonly Candle[]> {
    await this.ready();
    return this.host.market.quoteHistory(this.sym(symbol), timeframe, fromMs, count);
  }
}
