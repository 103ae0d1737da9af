// One account inside its shard: the AccountRuntime other hosts see, and the connection slot(s)
// behind it. A slot = one BrokerConnection + the connection actor that owns its lifecycle.
//
// Rolling upgrade (replace): the current slot is told to drain; requests that already hold a
// lease on it finish; new requests wait in `waiting`; when its lease count reaches 0 the actor
// disconnects and stops, and only then the replacement slot is created and connects. So an
// account never has two live broker connections, and nothing in flight is cut off.
import { phaseOf } from '../../../actors/connection.js';
import type { BrokerConnection, BrokerCredentials, BrokerEvents } from '../../broker/types.js';
import type { AccountSummary } from '../../market/account.js';
import type { Platform, ServerInfo } from '../../market/server.js';
import { apiError } from '../../errors.js';
import type { Logger } from '../../log.js';
import type { OperatorPhase } from './accountCommands.js';
import type { AccountEvent, AccountRuntime, ConnectionPhase } from './accountRegistry.js';
import { Slot, type SlotOwner } from './slot.js';
import { SlotLease, type Lease } from './lease.js';
import { ConnectionWaiters } from './connectionWaiters.js';
import { loginFailureReason } from './loginFailure.js';

export interface SlotSpec {
  credentials: BrokerCredentials;
  /** Terminal build of this connection; null = the server's own. */
  build: number | null;
}

export interface EntryDeps {
  log: Logger;
  factory: (c: BrokerCredentials) => BrokerConnection;
  /** A connection learned its server at login (a bridge): the host keeps the binding's platform right. */
  onServer?: (accountId: string, server: ServerInfo) => void;
  /** The account's connection phase as operators see it: `refused` is a login the broker refused
   *  (no automatic retry). Called on every change, with the phase before (none at the first). */
  onPhase?: (accountId: string, phase: OperatorPhase, was: OperatorPhase | undefined, server: string) => void;
  /** A login attempt failed: why (loginFailure.ts: never the password). */
  onLoginFailed?: (accountId: string, reason: string) => void;
  backoffBaseMs: number;
  backoffCapMs: number;
  /** How long a request waits for a usable connection by default (ms; ShardTiming.brokerWaitMs). */
  brokerWaitMs?: number;
  /** How long it waits while the account's first login is under way (ms; ShardTiming.connectingWaitMs). */
  connectingWaitMs?: number;
}

export type { Lease } from './lease.js';

export class AccountEntry implements AccountRuntime, SlotOwner {
  private slot: Slot | null = null;
  /** Listeners of the account's events (stream sockets, gateway sessions); none while idle. */
  private listeners: Set<(ev: AccountEvent) => void> | undefined;
  /** Slots not yet disposed: the current one, and during a switch the draining and the next one. */
  // Replaced, not grown, on a change (rare), by arrays of their exact length (concat, slice): a
  // pushed, spread or filtered array reserves 17 places.
  private slots: readonly Slot[] = [];
  /** Requests waiting for a usable connection: made by the first, dropped once none waits (an idle account has none). */
  private waiting: ConnectionWaiters<Slot> | undefined;
  /** A login attempt of this account failed (the broker unreachable, or refused). */
  private failedLogin = false;
  private lastPhase: ConnectionPhase = 'connecting';
  /** Last phase given to deps.onPhase (refused included). */
  private lastSeenPhase: OperatorPhase | undefined;
  private everConnected = false;
  private switching: Promise<void> | null = null;
  generation = 0;
  /** Last summary read while connected: /AccountSummary answers it with synced=false while reconnecting. */
  lastSummary: AccountSummary | undefined;
  /** Symbols and candle timeframes subscribed through this account, restored on a replacement connection. */
  // Who holds each broker subscription: several hosts of the account (/v1/stream sockets,
  // gateway sessions) may want the same symbol, and the broker unsubscribe must wait for the last.
  // Both created by the first subscription (an idle account has none; an empty Map costs its table).
  private ticks: Map<string, Set<string>> | undefined;
  private get tickHolders() { return (this.ticks ??= new Map()); }
  /** symbol -> timeframe -> holders */
  private candles: Map<string, Map<string, Set<string>>> | undefined;
  private get candleHolders() { return (this.candles ??= new Map()); }
  authFailed = false;
  /** The current slot, or the replacement being prepared during a switch. */
  private lastSlot: Slot | undefined;
  /** The server as a connection of this account reported it; undefined while none has (a bridge
   *  connection learns it at its first login): never a placeholder. */
  private knownServer: ServerInfo | undefined;
  private toldPlatform: Platform | undefined; // the platform listeners last heard of

  constructor(
    readonly accountId: string,
    readonly customerId: string,
    private spec: SlotSpec,
    private readonly deps: EntryDeps,
  ) {}

  get platform(): Platform {
    return this.server.platform;
  }
  /**
   * The server as last learned from a connection of this account (the draining one's while a
   * replacement to the same server has not logged in yet). Before any connection learned it, the
   * connection's placeholder: name and bound platform are right, build and time zone are not; see
   * `serverKnown`.
   */
  get server(): ServerInfo {
    return this.knownServer ?? this.lastSlot!.conn.server;
  }
  /** Whether `server` is the broker's own (time zone, build), not a placeholder. */
  get serverKnown(): boolean {
    return this.knownServer !== undefined;
  }

  /** A slot's connection logged in: what it says about the server is now the account's. */
  learnServer(slot: Slot): void {
    if (slot !== this.lastSlot) return;
    const info = slot.conn.server;
    const changed = this.knownServer !== info;
    this.knownServer = info;
    if (changed) this.deps.onServer?.(this.accountId, info);
    this.platformChanged();
  }
  get build(): number {
    return this.lastSlot!.build;
  }
  get credentials(): BrokerCredentials {
    return this.spec.credentials;
  }

  /** Creates the first slot and starts connecting. Throws (synchronously) for an unknown server. */
  start(): void {
    this.slot = this.makeSlot(this.spec);
    this.slot.start();
  }

  private makeSlot(spec: SlotSpec): Slot {
    const conn = this.deps.factory(spec.credentials);
    const slot = new Slot(this, conn, spec.build, this.deps);
    this.lastSlot = slot;
    if (conn.serverKnown !== false) this.knownServer = conn.server;
    // Re-bound to another server (known only once this connection logs in): the old one is not it.
    else if (this.knownServer && this.knownServer.name !== spec.credentials.server) this.knownServer = undefined;
    this.slots = this.slots.concat(slot);
    slot.listenAccountEvents((this.listeners?.size ?? 0) > 0);
    this.platformChanged();
    return slot;
  }

  /** Tells listeners when the platform is not the one they last heard of (re-bind, server learned); not
   *  `platform` read before: a bridge's placeholder becomes the server at its login, so is the new one. */
  private platformChanged(): void {
    const now = this.platform;
    if (this.toldPlatform !== undefined && now !== this.toldPlatform) this.emit({ type: 'platform', platform: now });
    this.toldPlatform = now;
  }

  /** A slot was disposed: it gets no listener changes any more. */
  slotGone(slot: Slot): void {
    this.slots = this.slots.filter((s) => s !== slot).slice();
  }

  phase(): ConnectionPhase {
    return this.lastPhase;
  }

  state(): string {
    return this.slot ? this.slot.state() : 'switching';
  }

  onPhase(slot: Slot, phase: ConnectionPhase | 'authFailed' | 'stopped'): void {
    if (slot !== this.slot) return;
    this.authFailed = phase === 'authFailed';
    let next: ConnectionPhase;
    if (phase === 'stopped') return;
    if (phase === 'authFailed') next = this.everConnected ? 'reconnecting' : 'connecting';
    else next = phaseOf(phase, this.everConnected);
    if (phase === 'connected') this.everConnected = true;
    if (phase === 'authFailed') this.failWaiters(apiError('NOT_CONNECTED', 'the broker refused the stored login (a wrong password, or a server it does not know); bind the account again with /ConnectEx'));
    const seen = this.authFailed ? 'refused' : next;
    if (seen !== this.lastSeenPhase) {
      const was = this.lastSeenPhase;
      this.lastSeenPhase = seen;
      this.deps.onPhase?.(this.accountId, seen, was, this.server.name);
    }
    if (next !== this.lastPhase) {
      this.lastPhase = next;
      this.emit({ type: 'phase', phase: next });
    }
    // Actions run inside the transition: the actor's snapshot says 'connected' only after it.
    if (phase === 'connected') queueMicrotask(() => this.wakeWaiters());
  }

  emit(ev: AccountEvent): void {
    if (this.listeners) for (const l of this.listeners) {
      try {
        l(ev);
      } catch (err) {
        this.deps.log.error('account event listener failed', { accountId: this.accountId, err });
      }
    }
  }

  on(listener: (ev: AccountEvent) => void): () => void {
    const listeners = (this.listeners ??= new Set());
    listeners.add(listener);
    if (listeners.size === 1) for (const slot of this.slots) slot.listenAccountEvents(true);
    return () => {
      if (listeners.delete(listener) && listeners.size === 0) for (const slot of this.slots) slot.listenAccountEvents(false);
    };
  }

  /** Waits for a usable connection: 503 NOT_CONNECTED after `timeoutMs`. A request's own wait
   *  (`timeoutMs` not given) waits longer while the first login is under way (connectionWaiters.ts). */
  private usableSlot(timeoutMs: number | undefined): Promise<Slot> {
    const s = this.slot;
    if (s && s.usable) return Promise.resolve(s);
    if (s && this.authFailed) return Promise.reject(apiError('NOT_CONNECTED', 'the broker refused the stored login (a wrong password, or a server it does not know); bind the account again with /ConnectEx'));
    const ms = timeoutMs ?? this.deps.brokerWaitMs ?? 2_000;
    const connectingMs = timeoutMs === undefined ? (this.deps.connectingWaitMs ?? ms) : 0;
    if (ms <= 0 && connectingMs <= 0) return Promise.reject(this.notConnected());
    this.waiting ??= new ConnectionWaiters<Slot>({ beingMade: () => this.firstLoginUnderWay(), notConnected: () => this.notConnected() });
    return this.waiting.wait(ms, connectingMs);
  }

  /** The first login of this account is under way and no attempt has failed. */
  private firstLoginUnderWay(): boolean {
    return this.slot !== null && !this.everConnected && !this.authFailed && !this.failedLogin;
  }

  /** A login attempt of the current slot failed: waits past their ordinary bound end now. */
  loginFailed(slot: Slot, err?: unknown): void {
    if (slot !== this.slot) return;
    this.failedLogin = true;
    if (err !== undefined) this.deps.onLoginFailed?.(this.accountId, loginFailureReason(err, this.spec.credentials.password));
    this.waiting?.loginFailed();
    this.dropWaitersIfNone();
  }

  private notConnected() {
    return apiError('NOT_CONNECTED', this.everConnected
      ? 'the account connection is resuming; retry shortly'
      : 'the account is not connected to its broker yet; retry shortly', { headers: { 'retry-after': '1' } });
  }

  private wakeWaiters(): void {
    const s = this.slot;
    if (s && s.usable) this.waiting?.resolveAll(s);
    this.dropWaitersIfNone();
  }

  private dropWaitersIfNone(): void {
    if (this.waiting?.empty) this.waiting = undefined;
  }

  private failWaiters(e: unknown): void {
    this.waiting?.rejectAll(e);
    this.dropWaitersIfNone();
  }

  whenConnected(timeoutMs?: number, owner = 'default'): Promise<BrokerConnection> {
    return this.usableSlot(timeoutMs).then((s) => this.tracked(s.conn, owner));
  }

  /** A connection held for one request: a rolling upgrade waits for its release. */
  async acquire(timeoutMs?: number): Promise<Lease> {
    return new SlotLease(await this.usableSlot(timeoutMs));
  }

  /** A lease at once when the connection is usable (no promise, no turn: the order's path), else undefined. */
  tryAcquire(): Lease | undefined {
    const s = this.slot;
    return s && s.usable ? new SlotLease(s) : undefined;
  }

  /** CheckConnect: cut a reconnect wait short (or retry after an auth failure) and report. */
  check(): void {
    this.slot?.check();
  }

  /** Rolling upgrade / re-bind: drain the current connection, then connect the replacement. */
  replace(spec: SlotSpec): Promise<void> {
    const run = async () => {
      if (this.switching) await this.switching.catch(() => undefined);
      const old = this.slot;
      // Built first so an unknown server fails before anything is torn down.
      const next = this.makeSlot(spec);
      this.slot = null;
      this.generation++;
      if (old) await old.drainAndStop();
      // Another login (re-bind): the last-known summary was that login's, not this one's; listeners
      // learn of it before any event of the new login (a phase change may not come: the account can
      // stay 'connected' throughout, and the server may be the same).
      const rebound = spec.credentials.server !== this.spec.credentials.server || spec.credentials.login !== this.spec.credentials.login;
      if (rebound) this.lastSummary = undefined;
      this.spec = spec;
      this.slot = next;
      this.authFailed = false;
      if (rebound) this.emit({ type: 'rebound', server: spec.credentials.server, platform: this.platform });
      next.start();
    };
    const p = run();
    this.switching = p;
    return p.finally(() => {
      if (this.switching === p) this.switching = null;
    });
  }

  stop(): void {
    this.failWaiters(apiError('SERVICE_UNAVAILABLE', 'account runtime stopping'));
    const s = this.slot;
    this.slot = null;
    if (s) {
      void s.conn.disconnect().catch(() => undefined);
      s.dispose();
    }
  }

  // Subscriptions made through the registry are held per owner: the broker is subscribed when the
  // first owner wants a symbol and unsubscribed when the last lets go. A repeated subscribe by the
  // same owner is a no-op, and a replacement connection (reconnect, rolling upgrade, re-bind) is
  // subscribed to everything still held (restoreSubscriptions).
  private tracked(conn: BrokerConnection, owner: string): BrokerConnection {
    const self = this;
    type Tf = BrokerEvents['candle']['timeframe'];
    return new Proxy(conn, {
      get(target, prop) {
        if (prop === 'subscribe') {
          return async (symbols: readonly string[]) => {
            const fresh = symbols.filter((s) => {
              let h = self.tickHolders.get(s);
              if (!h) self.tickHolders.set(s, (h = new Set()));
              const first = h.size === 0;
              h.add(owner);
              return first;
            });
            try {
              if (fresh.length) await target.subscribe(fresh);
            } catch (err) {
              for (const s of symbols) self.release(self.tickHolders, s, owner);
              throw err;
            }
          };
        }
        if (prop === 'unsubscribe') {
          return async (symbols: readonly string[]) => {
            const last = symbols.filter((s) => self.release(self.tickHolders, s, owner));
            if (last.length) await target.unsubscribe(last);
          };
        }
        if (prop === 'subscribeCandles') {
          return async (symbol: string, tfs: readonly Tf[]) => {
            let bySymbol = self.candleHolders.get(symbol);
            if (!bySymbol) self.candleHolders.set(symbol, (bySymbol = new Map()));
            const fresh = tfs.filter((tf) => {
              let h = bySymbol.get(tf);
              if (!h) bySymbol.set(tf, (h = new Set()));
              const first = h.size === 0;
              h.add(owner);
              return first;
            });
            try {
              if (fresh.length) await target.subscribeCandles(symbol, fresh);
            } catch (err) {
              for (const tf of tfs) self.release(bySymbol, tf, owner);
              throw err;
            }
          };
        }
        if (prop === 'unsubscribeCandles') {
          return async (symbol: string, tfs?: readonly Tf[]) => {
            const bySymbol = self.candleHolders.get(symbol);
            if (!bySymbol) return;
            const which = tfs ?? ([...bySymbol.keys()] as Tf[]);
            const last = which.filter((tf) => self.release(bySymbol, tf, owner));
            if (bySymbol.size === 0) self.candleHolders.delete(symbol);
            if (last.length) await target.unsubscribeCandles(symbol, last);
          };
        }
        const v = Reflect.get(target, prop) as unknown;
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    });
  }

  /** Drops `owner` from `key`'s holders; true when it was the last one (the broker should let go). */
  private release(holders: Map<string, Set<string>>, key: string, owner: string): boolean {
    const h = holders.get(key);
    if (!h || !h.delete(owner)) return false;
    if (h.size > 0) return false;
    holders.delete(key);
    return true;
  }

  /** Called after each successful connect of a slot. */
  restoreSubscriptions(conn: BrokerConnection): void {
    if (this.ticks && this.ticks.size > 0) {
      conn.subscribe([...this.ticks.keys()]).catch((err: unknown) => this.deps.log.warn('resubscribe failed', { accountId: this.accountId, err }));
    }
    if (this.candles) for (const [symbol, byTf] of this.candles) {
      conn.subscribeCandles(symbol, [...byTf.keys()] as BrokerEvents['candle']['timeframe'][])
        .catch((err: unknown) => this.deps.log.warn('candle resubscribe failed', { accountId: this.accountId, err }));
    }
  }
}
