// The simulated broker: servers (market + accounts), ids, faults, and the clock. One
// instance per process/thread; every connection on that thread shares it. Pure given the
// seed, the clock and the sequence of calls; the only I/O goes through SimPersistence.
import { createHash, randomBytes } from 'node:crypto';
import { BrokerAuthError } from '../market/brokerErrors.js';
import type { Deal, Order, Position } from '../market/orders.js';
import type { ServerInfo, Tick } from '../market/server.js';
import type { SimChange, SimPersistence, StoredAccount } from './persistence.js';
import { SimAccount, type AccountHost } from './account.js';
import type { SimConfig, SimServerConfig } from './config.js';
import { FaultController, type Fault } from './faults.js';
import { Market, type MarketSymbol } from './market.js';
import { systemClock, type Clock } from '../util/clock.js';

export { systemClock, type Clock };

/** A manually driven clock for tests and replays. */
export class ManualClock implements Clock {
  constructor(private t: number) {}
  now(): number {
    return this.t;
  }
  set(t: number): void {
    this.t = t;
  }
  advance(ms: number): void {
    this.t += ms;
  }
}

/** A connection that hears of the faults set on its server. */
export interface FaultWatcher {
  faultSet(fault: Fault): void;
}

/** What a connection receives for its account. */
export interface AccountSink {
  positions(list: readonly Position[]): void;
  orders(list: readonly Order[]): void;
  deal(deal: Deal): void;
}

const ID_BLOCK = 1024;

export class SimServer implements AccountHost {
  readonly market: Market;
  readonly info: ServerInfo;
  readonly accounts = new Map<string, SimAccount>();
  /** Accounts with a position or a pending order: the only ones ticks and the clock visit, so an
   *  idle account costs no CPU however many there are (kept by track() after every flush). */
  readonly busy = new Set<SimAccount>();
  /** Per symbol index: the accounts that may hold a position or an order of it, the only ones its
   *  ticks visit. An account joins when a change of its gives it one (track), and leaves at the
   *  first tick that finds it holds nothing of the symbol any more. A tick walked every busy account
   *  and asked each: O(busy accounts) per tick of every symbol (issue 19). */
  private readonly holders: Set<SimAccount>[];
  readonly sinks = new Map<SimAccount, Set<AccountSink>>();
  /** Per symbol index: tick listeners (connections subscribed to it). */
  readonly tickListeners: Set<(t: Tick) => void>[];
  /** Connections logged in to this server, told of each fault set on it (an injected drop ends
   *  theirs): the simulator's faults have one listener per server, not a closure per connection
   *  (issue 19, memory per idle account). */
  readonly faultWatchers = new Set<FaultWatcher>();
  private idNext = 0;
  private idEnd = 0;
  /** The next block, taken once a quarter of the current one is left: when a block ran out, the
   *  next was a write right then, and on a full disk its failure, thrown from the market's timer (a
   *  stop hit), ended the shard (docs/storage.md). */
  private idSpare: number | undefined;

  constructor(
    readonly config: SimServerConfig,
    readonly store: SimPersistence,
    options: SimConfig & { replay?: ReadonlyMap<string, string>; replayStartMs?: number },
    startMs: number,
  ) {
    this.market = new Market(config, options, startMs);
    this.info = { name: config.name, platform: config.platform, build: config.build, company: config.company, timeZone: config.timeZone };
    this.tickListeners = this.market.symbols.map(() => new Set());
    this.holders = this.market.symbols.map(() => new Set());
    this.market.onTick = (s) => this.onTick(s);
  }

  nextId(): number {
    if (this.idNext >= this.idEnd) {
      // Blocks from the shared store keep ids unique across threads using the same database.
      this.idNext = this.idSpare ?? this.store.allocateIds(this.config.name, ID_BLOCK);
      this.idSpare = undefined;
      this.idEnd = this.idNext + ID_BLOCK;
    } else if (this.idSpare === undefined && this.idEnd - this.idNext <= ID_BLOCK / 4) {
      try {
        this.idSpare = this.store.allocateIds(this.config.name, ID_BLOCK);
      } catch {
        // A full disk, say: tried again at the next id (a quarter of the block is left for that).
      }
    }
    return this.idNext++;
  }

  /**
   * A login was loaded whose highest ticket is `last` (LoadedAccount.lastTicket): the ids issued
   * from here on are above it. Its tickets may come from another thread's later block (it traded
   * on another shard, then its seat was bound again by an account of this one: one copy of a login,
   * docs/simulator.md) or, after a restart, from any earlier block; and the spare may have been
   * taken before them. Bots poll deals and history by "ticket greater than the last I saw": a lower
   * one is a deal they never see. The store hands out blocks in order, so the spare if it is above
   * `last`, else a fresh block: one write at a load, none at an order. Throws if that write fails
   * (a full disk), the blocks as they were: the other accounts go on from them (a stop hit must not
   * need a write, docs/storage.md), and the login is refused (SimServer.login).
   */
  private issueAbove(last: number): void {
    // The current block, or when it runs out the spare (taken after it) or a fresh one: all above.
    if (last < this.idNext) return;
    const spare = this.idSpare;
    const next = spare !== undefined && spare > last ? spare : this.store.allocateIds(this.config.name, ID_BLOCK);
    // Below `last`, the spare is no use any more: an id from it would go back for this login.
    this.idSpare = undefined;
    this.idNext = next;
    this.idEnd = next + ID_BLOCK;
  }

  /** Accounts loaded whose ids are not issued above their tickets yet (issueAbove): their highest
   *  ticket. Done at their login; one that failed (a full disk) is refused, and tried again at the
   *  next login if the account is still here (forgotten, and its store not ready to let it go). */
  private readonly owed = new Map<SimAccount, number>();

  private onTick(s: MarketSymbol): void {
    const holders = this.holders[s.index]!;
    if (holders.size > 0) {
      const name = s.info.name;
      // A visit's flush adds only its own account, which is in the set already: none is visited twice.
      for (const acc of holders) {
        if (!acc.hasSymbol(name)) {
          holders.delete(acc);
          continue;
        }
        acc.onTick(s);
        acc.flush();
      }
    }
    const listeners = this.tickListeners[s.index]!;
    if (listeners.size > 0) {
      const tick = this.market.tick(s)!;
      for (const l of listeners) l(tick);
    }
  }

  track(account: SimAccount, change?: SimChange): void {
    if (change) {
      if (change.positions) for (const p of change.positions) this.mayHold(account, p.symbol);
      if (change.orders) for (const o of change.orders) this.mayHold(account, o.order.symbol);
    } else {
      // Loaded: whatever it holds.
      for (const p of account.positions.values()) this.mayHold(account, p.symbol);
      for (const o of account.orders.values()) this.mayHold(account, o.symbol);
    }
    if (account.busy) {
      this.busy.add(account);
      this.touched.add(account);
      if (account.orders.nextExpiryMs < this.nextExpiryMs) this.nextExpiryMs = account.orders.nextExpiryMs;
    } else {
      this.busy.delete(account);
      // Its last position or order went with nobody logged in (a stop, an expiration): let it go.
      if (account.logins === 0) this.idle.add(account);
    }
  }

  /**
   * Accounts nobody is logged in to with nothing open (no position, no pending order: nothing a
   * tick or the clock acts on), let go once their store holds all of them (SimPersistence.release):
   * the next login loads them again. Under seat churn (deleted seats' logins, tests and benches
   * binding fresh logins) the thread held every login ever used, ~5 KB each. An account with
   * something open stays, and its triggers run with no connection, as a broker's do.
   */
  private readonly idle = new Set<SimAccount>();

  /**
   * Accounts no connection of this thread will use again (forget), let go once nobody is logged
   * in, open positions and orders included: another thread's simulator may load the login next.
   */
  private readonly forgotten = new Set<SimAccount>();

  /** A connection logged out of `account` (SimSession): the last one lets it go if nothing is open. */
  logout(account: SimAccount): void {
    if (account.logins > 0) account.logins--;
    this.releaseIfUnused(account);
  }

  /** Nobody logged in, and nothing open or forgotten: let it go once its store holds all of it. */
  private releaseIfUnused(acc: SimAccount): void {
    if (acc.logins === 0 && (!acc.busy || this.forgotten.has(acc))) {
      this.idle.add(acc);
      this.releaseIdle();
    }
  }

  /**
   * No account of this thread binds `login` any more (its seat was removed, its account bound to
   * another login, a probe of a login bound elsewhere ended): once nobody is logged in, let it go
   * with whatever it has open, after its store holds all of it, and until then it acts on nothing
   * (no tick or clock visits). Accounts land on shard threads by their ids, so the login's next
   * account may sit in another thread, whose simulator loads it from the same store: two copies
   * would each fill its orders and stops, and the second's journal row, refused, stop its store.
   * Its triggers then wait for its next login, as after a restart (docs/simulator.md).
   * True: no copy stays here. False: it stays (its checkpoint could not be written, a full disk;
   * someone still logged in), inert, asked again at the clock's next minute or at the next forget:
   * until then no other thread may load the login (the main thread's HeldCopies).
   */
  forget(login: string): boolean {
    const acc = this.accounts.get(login);
    if (!acc) return true;
    this.forgotten.add(acc);
    this.releaseIfUnused(acc);
    return this.accounts.get(login) !== acc;
  }

  /** Out of every visit of ticks and the clock (a forgotten account waiting for its store). */
  private quiet(acc: SimAccount): void {
    this.busy.delete(acc);
    this.touched.delete(acc);
    for (const h of this.holders) h.delete(acc);
  }

  /** Let go of the idle accounts whose store holds all of them (the others are asked again at the
   *  clock's next minute: their changes are checkpointed within the store's checkpointMs). */
  releaseIdle(): void {
    if (this.idle.size === 0) return;
    const release = this.store.release;
    if (!release) {
      this.idle.clear();
      this.forgotten.clear();
      return;
    }
    for (const acc of this.idle) {
      const login = acc.data.login;
      const forgotten = this.forgotten.has(acc);
      if (acc.logins > 0 || (acc.busy && !forgotten) || this.accounts.get(login) !== acc) {
        this.idle.delete(acc);
        continue;
      }
      if (forgotten) this.quiet(acc);
      if (!release.call(this.store, this.config.name, login, forgotten)) continue;
      this.idle.delete(acc);
      this.forgotten.delete(acc);
      this.owed.delete(acc);
      this.accounts.delete(login);
      this.sinks.delete(acc);
      this.quiet(acc);
    }
  }

  private mayHold(account: SimAccount, symbol: string): void {
    const s = this.market.bySymbol.get(symbol);
    if (s) this.holders[s.index]!.add(account);
  }

  // The clock's visits (expirations, equity samples) walk every busy account only when one may
  // be due: at a new minute of market time, or once the earliest expiration has come. Between
  // those, only accounts tracked since the last walk can have anything due (a first equity sample
  // this minute). Walking them all at every step cost O(accounts holding positions) per order,
  // as every request advances the clock.
  /** Busy accounts tracked since the last walk. */
  private readonly touched = new Set<SimAccount>();
  /** A lower bound of every busy account's next expiration (an account's only falls in a change it flushes, which tracks it). */
  private nextExpiryMs = Infinity;
  /** The minute of market time of the last walk. */
  private walkedMinute = NaN;

  /** Expirations due and equity samples on the clock (after the market reached `now`). */
  visitClock(now: number): void {
    const minute = Math.floor(this.market.now / 60_000);
    if (minute === this.walkedMinute && now < this.nextExpiryMs) {
      if (this.touched.size === 0) return;
      for (const acc of this.touched) if (this.busy.has(acc)) acc.sampleEquity();
      this.touched.clear();
      return;
    }
    let next = Infinity;
    for (const acc of this.busy) {
      // Expirations are due on the clock, not on a tick of the order's symbol.
      if (now >= acc.orders.nextExpiryMs) {
        acc.expireDue(now);
        acc.flush();
      }
      acc.sampleEquity();
      if (acc.orders.nextExpiryMs < next) next = acc.orders.nextExpiryMs;
    }
    this.touched.clear();
    this.nextExpiryMs = next;
    this.walkedMinute = minute;
    this.releaseIdle();
  }

  publish(account: SimAccount, deals: readonly Deal[], positionsChanged: boolean, ordersChanged: boolean): void {
    const sinks = this.sinks.get(account);
    if (!sinks || sinks.size === 0) return;
    const positions = positionsChanged ? account.positionList() : null;
    const orders = ordersChanged ? account.pendingList() : null;
    for (const sink of sinks) {
      for (const d of deals) sink.deal(d);
      if (positions) sink.positions(positions);
      if (orders) sink.orders(orders);
    }
  }

  /** Log in: loads the account, or creates it with the server's demo defaults on first
   *  connect. A wrong password is refused (the error never contains it). Each login is ended by
   *  logout (the account is let go once nobody is logged in and nothing is open). */
  login(login: string, password: string): SimAccount {
    let acc = this.accounts.get(login);
    const loadedNow = !acc;
    if (!acc) {
      const loaded = this.store.loadAccount(this.config.name, login);
      if (loaded) {
        acc = new SimAccount(this, loaded.account, loaded.positions, loaded.activeOrders);
        this.owed.set(acc, loaded.lastTicket);
      } else {
        acc = this.createAccount(login, password);
      }
      this.accounts.set(login, acc);
      this.track(acc);
    }
    try {
      if (hashPassword(acc.data.salt, password) !== acc.data.passwordHash) throw new BrokerAuthError(`invalid password for login ${login} on ${this.config.name}`);
      const last = this.owed.get(acc);
      if (last !== undefined) {
        this.issueAbove(last);
        this.owed.delete(acc);
      }
    } catch (err) {
      // Loaded for nobody: let go as any account nobody is logged in to, and, loaded by this
      // very login (no account of this thread had it), with whatever it has open (forgotten).
      if (loadedNow) this.forgotten.add(acc);
      this.releaseIfUnused(acc);
      throw err;
    }
    acc.logins++;
    this.idle.delete(acc);
    // Forgotten and still here (its store was not ready to let go): in use again, as it was.
    if (this.forgotten.delete(acc)) this.track(acc);
    return acc;
  }

  private createAccount(login: string, password: string): SimAccount {
    const d = this.config.account;
    const salt = randomBytes(8).toString('hex');
    const data: StoredAccount = {
      server: this.config.name,
      login,
      passwordHash: hashPassword(salt, password),
      salt,
      name: `Demo ${login}`,
      currency: d.currency,
      leverage: d.leverage,
      createdMs: this.market.now,
      // The deposit's balance is in the account's first checkpoint, written at once: if the commit of
      // its deal fails (the store then restarts from disk), the account still has its money.
      balance: d.balance,
      credit: 0,
    };
    this.store.createAccount(data);
    const acc = new SimAccount(this, data, [], []);
    // The initial deposit is a balance deal, as on a real server.
    const deal: Deal = { ticket: this.nextId(), order: 0, position: 0, symbol: '', type: 'Balance', entry: 'balance', volume: 0, price: 0, timeMsc: this.market.now, magic: 0, comment: 'Initial deposit', commission: 0, swap: 0, profit: d.balance };
    const change: SimChange = { balance: d.balance, deals: [deal], equity: { timeMsc: this.market.now, balance: d.balance, equity: d.balance } };
    this.store.apply(this.config.name, login, change);
    return acc;
  }
}

function hashPassword(salt: string, password: string): string {
  return createHash('sha256').update(salt).update('\u0000').update(password).digest('hex');
}

export interface SimulatorOptions {
  readonly config: SimConfig;
  readonly store: SimPersistence;
  readonly clock?: Clock;
  /** CSV text of replayed symbols per server (loadReplayData). */
  readonly replay?: ReadonlyMap<string, ReadonlyMap<string, string>>;
  /** SIM_START (`--start`): replayed recordings start there, not at this simulator's start, so every
   *  shard, run and restart plays them at the same market instants (docs/simulator.md). */
  readonly replayStartMs?: number;
}

export class Simulator {
  readonly clock: Clock;
  readonly servers = new Map<string, SimServer>();
  readonly faults: FaultController;
  private timer: ReturnType<typeof setInterval> | null = null;

  constructor(readonly options: SimulatorOptions) {
    this.clock = options.clock ?? systemClock;
    const start = this.clock.now();
    for (const sc of options.config.servers) {
      const replay = options.replay?.get(sc.name);
      const replayStartMs = options.replayStartMs;
      this.servers.set(sc.name, new SimServer(sc, options.store, { ...options.config, ...(replay ? { replay } : {}), ...(replayStartMs !== undefined ? { replayStartMs } : {}) }, start));
    }
    this.faults = new FaultController(options.config.seed, () => this.clock.now());
    this.faults.onSet((f) => {
      const server = this.servers.get(f.server);
      if (server) for (const w of server.faultWatchers) w.faultSet(f);
    });
    for (const sc of options.config.servers) for (const f of sc.faults) this.faults.set({ ...f, server: sc.name });
  }

  server(name: string): SimServer | undefined {
    return this.servers.get(name);
  }

  /** Emit every tick up to the clock's now on every server (triggers, bars, listeners). */
  advance(): void {
    const now = this.clock.now();
    for (const s of this.servers.values()) {
      s.market.advanceTo(now);
      s.visitClock(now);
    }
  }

  /** Drive the market from a timer (production); tests call advance() with a manual clock. */
  start(intervalMs = 20): void {
    if (this.timer) return;
    this.timer = setInterval(() => this.advance(), intervalMs);
    this.timer.unref?.();
  }
  /** Stop the timer and make everything applied durable (checkpoints included). */
  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.options.store.flush();
  }
}
