// An account's open positions with running totals per symbol and side, kept up to date as
// positions open, change and close, so that what an order or a tick asks of the account (is there
// margin for this? is the account below stop-out? can any stop of this symbol trigger?) costs per
// symbol held, not per position. The totals are linear in the positions (lots, lots x open price,
// lots x the rollover index of the open day); valuation.ts prices them at the market.
import { rolloverIndex, serverDay, type ToServer } from './accounting.js';
import type { StoredPosition } from './persistence.js';
import { LazyMap } from '../util/lazyMap.js';

/** Sums over the open positions of one symbol and side. */
export interface SideTotals {
  n: number;
  lots: number;
  /** Σ lots × open price */
  lotsOpen: number;
  /** Σ lots × rolloverIndex(open day): swap nights of all of them = index(today) × lots − this */
  lotsRollover: number;
  /** Σ swapPaid */
  swapPaid: number;
}

/** The totals of one symbol, and bounds of its stops: no buy's SL is above `buySlMax`, etc. The
 *  bounds only widen as stops are set; a scan of the symbol's positions makes them exact again
 *  (refreshStops). So a tick beyond none of them can trigger no stop, and needs no scan. */
export interface SymbolTotals {
  readonly buy: SideTotals;
  readonly sell: SideTotals;
  buySlMax: number;
  buyTpMin: number;
  sellSlMin: number;
  sellTpMax: number;
}

const NO_TOTALS: ReadonlyMap<string, SymbolTotals> = new Map();
const sideZero = (): SideTotals => ({ n: 0, lots: 0, lotsOpen: 0, lotsRollover: 0, swapPaid: 0 });
const noStops = (t: SymbolTotals) => {
  t.buySlMax = t.sellTpMax = -Infinity;
  t.buyTpMin = t.sellSlMin = Infinity;
};

/** What one position added to its side's totals (taken off again, exactly, when it leaves or
 *  changes): worked out again from the position as it was accounted, at its first touch since. */
interface Receipt {
  readonly side: SideTotals;
  readonly lots: number;
  readonly lotsOpen: number;
  readonly lotsRollover: number;
  readonly swapPaid: number;
}

/**
 * The positions map. Whoever gets a position from it (get, set) may change it in place (a partial
 * close changes its volume, a modify its stops) until the next question: such positions are re-read
 * then (settle), so the totals follow without the engine having to announce each change. Iterating
 * (values) hands out positions to read only. What a position added to the totals is taken when it
 * is touched (get, set, delete), before the caller can change it, not kept from when it was
 * accounted: a receipt per open position lived as long as the position (issue 19, what every
 * young-generation scavenge copies).
 */
export class PositionBook extends LazyMap<number, StoredPosition> {
  // Created with the first position: most accounts hold none, and an empty Map still costs its
  // table (issue 19, memory per idle account).
  private totalsBySymbol: Map<string, SymbolTotals> | undefined;
  /** Of the positions touched since the last question that were accounted then. */
  private receipts: Map<number, Receipt> | undefined;
  private touched: Set<number> | undefined;
  private maxDay = -Infinity;
  /** Changes since the totals were summed afresh: float rounding accumulates in running sums, so
   *  they are rebuilt after about eight times as many changes as positions (amortized O(1) per change;
   *  the drift stays bounded by what that many operations can add). */
  private drift = 0;

  /** `clock`: the server's (swap nights are counted in server days). */
  constructor(private readonly clock: ToServer) {
    super();
  }

  /** The totals per symbol, up to date. */
  get totals(): ReadonlyMap<string, SymbolTotals> {
    this.settle();
    return this.totalsBySymbol ?? NO_TOTALS;
  }

  /** Latest open day of the positions held (an upper bound): valued at an earlier server day (a
   *  tick of another symbol earlier in the same segment window), swap is not linear in the totals. */
  get maxOpenDay(): number {
    this.settle();
    return this.maxDay;
  }

  /** How many positions of a symbol are open. */
  count(symbol: string): number {
    const t = this.totals.get(symbol);
    return t ? t.buy.n + t.sell.n : 0;
  }

  override get(ticket: number): StoredPosition | undefined {
    const p = super.get(ticket);
    if (p) this.touch(ticket, p);
    return p;
  }

  override set(ticket: number, p: StoredPosition): this {
    this.touch(ticket, super.get(ticket));
    super.set(ticket, p);
    return this;
  }

  override delete(ticket: number): boolean {
    const p = super.get(ticket);
    if (!p) return false;
    this.touch(ticket, p);
    super.delete(ticket);
    return true;
  }

  /** A position about to be handed out, replaced or removed: at its first touch since the last
   *  question, what it added to the totals (it is as it was accounted: untouched positions are
   *  not changed). `p`: the position held now, if any. */
  private touch(ticket: number, p: StoredPosition | undefined): void {
    const touched = (this.touched ??= new Set());
    if (touched.has(ticket)) return;
    touched.add(ticket);
    if (p) (this.receipts ??= new Map()).set(ticket, this.receiptOf(p));
  }

  override clear(): void {
    super.clear();
    this.rebuild();
  }

  /** Could a tick at these prices trigger any SL or TP of the symbol? */
  stopsMayTrigger(symbol: string, bid: number, ask: number): boolean {
    const t = this.totals.get(symbol);
    if (!t) return false;
    return bid <= t.buySlMax || bid >= t.buyTpMin || ask >= t.sellSlMin || ask <= t.sellTpMax;
  }

  /** Make a symbol's stop bounds exact (after a scan of its positions). */
  refreshStops(symbol: string): void {
    const t = this.totals.get(symbol);
    if (!t) return;
    noStops(t);
    for (const p of this.values()) if (p.symbol === symbol) widenStops(t, p);
  }

  /** Re-read the positions handed out since the last question, and rebuild when due. */
  private settle(): void {
    if (this.touched !== undefined && this.touched.size > 0) {
      for (const ticket of this.touched) {
        this.unaccount(ticket);
        const p = super.get(ticket);
        if (p) this.account(p);
      }
      this.touched.clear();
    }
    if (this.drift > 8 * this.size + 64) this.rebuild();
  }

  private unaccount(ticket: number): void {
    const r = this.receipts?.get(ticket);
    if (!r) return;
    this.receipts!.delete(ticket);
    const s = r.side;
    if (--s.n === 0) {
      // Exact zero: nothing of the removed positions' rounding survives.
      s.lots = s.lotsOpen = s.lotsRollover = s.swapPaid = 0;
    } else {
      s.lots -= r.lots;
      s.lotsOpen -= r.lotsOpen;
      s.lotsRollover -= r.lotsRollover;
      s.swapPaid -= r.swapPaid;
    }
    this.drift++;
  }

  /** What a position adds to its side's totals (the same arithmetic when it is taken off). */
  private receiptOf(p: StoredPosition): Receipt {
    const totals = (this.totalsBySymbol ??= new Map());
    let t = totals.get(p.symbol);
    if (!t) totals.set(p.symbol, (t = symbolTotals()));
    const day = serverDay(p.openTimeMsc, this.clock);
    return {
      side: p.type === 'Buy' ? t.buy : t.sell,
      lots: p.volume, lotsOpen: p.volume * p.openPrice, lotsRollover: p.volume * rolloverIndex(day), swapPaid: p.swapPaid,
    };
  }

  private account(p: StoredPosition): void {
    const r = this.receiptOf(p);
    const s = r.side;
    s.n++;
    s.lots += r.lots;
    s.lotsOpen += r.lotsOpen;
    s.lotsRollover += r.lotsRollover;
    s.swapPaid += r.swapPaid;
    const day = serverDay(p.openTimeMsc, this.clock);
    if (day > this.maxDay) this.maxDay = day;
    widenStops(this.totalsBySymbol!.get(p.symbol)!, p);
    this.drift++;
  }

  /** Sum the totals afresh from the positions held. */
  private rebuild(): void {
    for (const t of this.totalsBySymbol?.values() ?? []) {
      Object.assign(t.buy, sideZero());
      Object.assign(t.sell, sideZero());
      noStops(t);
    }
    this.receipts?.clear();
    this.touched?.clear();
    this.maxDay = -Infinity;
    for (const p of super.values()) this.account(p);
    this.drift = 0;
  }
}

function symbolTotals(): SymbolTotals {
  const t = { buy: sideZero(), sell: sideZero(), buySlMax: 0, buyTpMin: 0, sellSlMin: 0, sellTpMax: 0 };
  noStops(t);
  return t;
}

function widenStops(t: SymbolTotals, p: StoredPosition): void {
  if (p.type === 'Buy') {
    if (p.sl !== 0 && p.sl > t.buySlMax) t.buySlMax = p.sl;
    if (p.tp !== 0 && p.tp < t.buyTpMin) t.buyTpMin = p.tp;
  } else {
    if (p.sl !== 0 && p.sl < t.sellSlMin) t.sellSlMin = p.sl;
    if (p.tp !== 0 && p.tp > t.sellTpMax) t.sellTpMax = p.tp;
  }
}
