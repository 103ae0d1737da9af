// The persistence port of the simulator: what it needs stored, in its own words. src/store/
// implements it (SqliteSimStore, MemorySimStore); the simulator never imports the store.
import type { EquityPoint } from '../market/account.js';
import type { Deal, Order, RequestLookup, Side } from '../market/orders.js';

export interface StoredAccount {
  readonly server: string;
  readonly login: string;
  /** sha256(salt + password), hex; the password itself is never stored. */
  readonly passwordHash: string;
  readonly salt: string;
  readonly name: string;
  readonly currency: string;
  readonly leverage: number;
  readonly createdMs: number;
  balance: number;
  credit: number;
}

/** An open position as stored; profit and swap are derived from the market. */
export interface StoredPosition {
  readonly ticket: number;
  readonly symbol: string;
  readonly type: Side;
  volume: number;
  readonly openPrice: number;
  readonly openTimeMsc: number;
  sl: number;
  tp: number;
  readonly magic: number;
  readonly comment: string;
  commission: number;
  /** Swap already realized by partial closes (subtracted from the accrued total). */
  swapPaid: number;
}

export interface SimChange {
  balance?: number;
  /** Upserts; doneMs = null while the order is active (pending or open P4 ticket).
   *  wasActive: the order was stored as active before (so it must leave that set). */
  orders?: { order: Order; doneMs: number | null; wasActive?: boolean }[];
  positions?: StoredPosition[];
  closedPositions?: number[];
  deals?: Deal[];
  request?: RequestLookup;
  equity?: EquityPoint;
}

export interface LoadedAccount {
  readonly account: StoredAccount;
  readonly positions: StoredPosition[];
  /** Active orders (pending, and open P4 tickets). */
  readonly activeOrders: Order[];
  /** At least the highest ticket the login was given (its deals, orders and positions, history
   *  included), 0 if none: the simulator issues its next ones above it (SimServer.login). A store
   *  that does not know it exactly answers a bound above it (the server's next id, say). */
  readonly lastTicket: number;
}

export interface SimPersistence {
  /** First id of a fresh block of `count` ids unique on this server (orders and deals). */
  allocateIds(server: string, count: number): number;
  loadAccount(server: string, login: string): LoadedAccount | null;
  createAccount(account: StoredAccount): void;
  /** The simulator let go of the account (nobody logged in, nothing open): the store may forget what
   *  it holds of it in memory if everything of it is stored; loadAccount reads it again, the same.
   *  True: forgotten (or nothing held); false: not yet (changes not stored), ask again later. A
   *  store without it keeps every account loaded, and so does the simulator. `open`: the account
   *  may hold positions and orders (forgotten: SimServer.forget); its checkpoint is written first. */
  release?(server: string, login: string, open?: boolean): boolean;
  /** The change's records are the store's to keep: the engine never changes them afterwards (the
   *  positions it changes in place reach a change as copies). */
  apply(server: string, login: string, change: SimChange): void;
  deals(server: string, login: string, fromMs: number, toMs: number): Deal[];
  historyOrders(server: string, login: string, fromMs: number, toMs: number): Order[];
  equity(server: string, login: string, fromMs: number): EquityPoint[];
  request(server: string, login: string, requestId: string): RequestLookup | null;
  /** Resolves once everything applied so far is durable (group commit); replies to trades
   *  wait for it so nothing is acknowledged before it is on disk. */
  whenDurable(): Promise<void>;
  /** The commit that changes applied so far still wait for, or null when they are all stored
   *  (always null for a store that commits at once). Account events wait for it before they leave. */
  pendingCommit?(): Promise<void> | null;
  /** Books a trade and commits it with the caller's claim (its writes on this same database) in
   *  one short transaction now, instead of at the turn's group commit: `claim.check()` first (it
   *  throws to refuse: nothing is booked), then `book()` (the trade, applied in memory; it has run
   *  when bookAtomically returns, so the caller may read what it noted), then one IMMEDIATE
   *  transaction with `claim.write(booked)` and the booking's journal rows (and whatever was
   *  queued before). `book` throwing still commits the claim (it may have applied something;
   *  `write` gets undefined), then rethrows. Resolves once committed: at once, or with the other
   *  bookings of a batch (a commit group). Stores that cannot share the caller's database leave it out. */
  bookAtomically?<T>(claim: { check(): void; write(booked: T | undefined): void }, book: () => T): Promise<T>;
  /** Commit anything queued and write pending checkpoints (graceful shutdown). */
  flush(): void;
}
