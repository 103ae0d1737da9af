// Which deals an account stream has carried, so that every deal is a TRADE exactly once: whether it
// arrived live or was read back from the broker's deal history after a restart or an outage (a deal
// made while no event could reach the history: the gateway down, its last events still on their way
// when it was killed, the account's listener not attached yet). Pure: no I/O.
import type { Deal } from '../market/orders.js';
import type { DealMark } from '../store/streamHistory.js';
import type { HistoryEntry } from './history.js';
import { RecentDeals } from './recentDeals.js';

/** How many recent deals are remembered for deduplication (far more than arrive between two reconciles). */
const KEEP = 4096;

type DealId = Pick<Deal, 'ticket' | 'timeMsc'>;

const brokerOrder = (x: DealId, y: DealId) => x.timeMsc - y.timeMsc || x.ticket - y.ticket;

/** `d` comes after the mark in broker order (time, then ticket). */
const after = (d: DealId, m: DealMark) => brokerOrder(d, m) > 0;

export class DealLedger {
  /** ticket -> broker time of the deals carried recently. A ticket with another time is another deal
   *  (a broker that lost its state numbers its deals from the start again, as the bridge adapter knows). */
  private readonly seen = new RecentDeals(KEEP);

  /**
   * A deal the ledger began from (an inherited mark: a restart's history on disk, a cluster's new
   * owner's JetStream head): every deal up to it was carried by the stream before (deals are carried
   * in broker order), so none at or below it is taken, remembered or not. Null for an epoch's start
   * (ticket 0): a time on this gateway's clock, not a deal, so a live deal stamped before it by a
   * broker whose clock lags is still carried.
   */
  private readonly floor: DealMark | null;

  /** `mark`: the latest deal carried (or ticket 0 and the epoch's start); `carried`: deals already in the history. */
  constructor(private latest: DealMark, carried: Iterable<DealId> = []) {
    this.floor = latest.ticket > 0 ? latest : null;
    if (latest.ticket > 0) this.note(latest);
    for (const d of carried) this.note(d);
  }

  /** What is persisted with the history: where a reconcile starts reading the broker's deals. */
  get mark(): DealMark {
    return this.latest;
  }

  /** Takes a deal into the stream; false when the stream carried it already (remembered, or at or
   *  below the inherited mark: an earlier owner's shard passing on deals it held while frozen). */
  take(d: DealId): boolean {
    if (this.seen.get(d.ticket) === d.timeMsc || (this.floor && !after(d, this.floor))) return false;
    this.note(d);
    if (after(d, this.latest)) this.latest = { ticket: d.ticket, timeMsc: d.timeMsc }; // the latest in broker order
    return true;
  }

  /**
   * After a reconcile: the deals to carry, in broker order (time, then ticket), each once. `listed`:
   * the broker's deals from the mark's time on (read before `held` ended); `held`: live deals that
   * arrived while the reconcile was under way (they may be listed too, or be carried already: a
   * cluster's new owner, whose broker connection came up while the old owner's still got them).
   */
  missed(listed: readonly Deal[], held: readonly Deal[]): Deal[] {
    // Deals are carried in broker order, so one before the mark was carried (its TRADE may be
    // trimmed from the history since, and no longer remembered here), listed or live alike.
    const m = this.latest;
    const later = (d: Deal) => after(d, m);
    return [...listed.filter(later), ...held.filter(later)].sort(brokerOrder).filter((d) => this.take(d));
  }

  private note(d: DealId): void {
    this.seen.note(d.ticket, d.timeMsc);
  }
}

const TRADE_PREFIX = '{"type":"TRADE",';

/** The deals of the TRADE frames a history holds (after a restart: what the stream carried already). */
export function tradesIn(entries: readonly HistoryEntry[]): DealId[] {
  const out: DealId[] = [];
  for (const e of entries) {
    if (!e.frame.startsWith(TRADE_PREFIX)) continue;
    const data = (JSON.parse(e.frame) as { data: { ticket: number; timeMscUtc: number } }).data;
    out.push({ ticket: data.ticket, timeMsc: data.timeMscUtc });
  }
  return out;
}
