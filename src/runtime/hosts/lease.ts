// A request's hold on an account's broker connection: a draining connection stops once every
// lease is released. One object per request, not a literal with a `release` closure over a flag
// (fewer young-generation objects per order, issue 19).
import type { BrokerConnection } from '../../broker/types.js';

export interface Lease {
  conn: BrokerConnection;
  build: number;
  release(): void;
}

/** What a lease holds: a connection slot counting its requests in flight. */
export interface LeasedSlot {
  readonly conn: BrokerConnection;
  readonly build: number;
  inflight: number;
  release(): void;
}

export class SlotLease implements Lease {
  readonly conn: BrokerConnection;
  readonly build: number;
  private released = false;

  /** Counts the request in flight on `slot` until `release` (once, however often it is called). */
  constructor(private readonly slot: LeasedSlot) {
    slot.inflight++;
    this.conn = slot.conn;
    this.build = slot.build;
  }

  release(): void {
    if (this.released) return;
    this.released = true;
    this.slot.release();
  }
}
