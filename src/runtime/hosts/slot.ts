// A slot of an account (accountEntry.ts): one BrokerConnection and the connection machine that
// owns its lifecycle, which rests as its snapshot while connected and idle (parkedActor.ts).
import { waitFor, type SnapshotFrom } from 'xstate';
import { connectionMachine, type ConnectionPhase as MachinePhase, type ConnectionPort } from '../../../actors/connection.js';
import type { BrokerConnection } from '../../broker/types.js';
import type { Logger } from '../../log.js';
import type { AccountEvent } from './accountRegistry.js';
import { ParkedActor, type ParkedOwner } from './parkedActor.js';

/** What a slot asks of its account (AccountEntry). */
export interface SlotOwner {
  readonly accountId: string;
  /** A login attempt of this slot failed. */
  loginFailed(slot: Slot, err?: unknown): void;
  /** This slot's connection logged in: what it says about the server is now the account's. */
  learnServer(slot: Slot): void;
  /** After each successful connect: the account's broker subscriptions on this connection. */
  restoreSubscriptions(conn: BrokerConnection): void;
  onPhase(slot: Slot, phase: MachinePhase | 'authFailed' | 'stopped'): void;
  slotGone(slot: Slot): void;
  emit(ev: AccountEvent): void;
}

export interface SlotDeps {
  log: Logger;
  backoffBaseMs: number;
  backoffCapMs: number;
}

export class Slot implements ParkedOwner<typeof connectionMachine> {
  inflight = 0;
  draining = false;
  /** The connection machine; parked as its snapshot while connected and idle (parkedActor.ts). */
  private readonly m: ParkedActor<typeof connectionMachine>;
  private readonly offState: () => void;
  private readonly log: Logger;

  constructor(readonly entry: SlotOwner, readonly conn: BrokerConnection, private readonly pinnedBuild: number | null, deps: SlotDeps) {
    this.log = deps.log;
    this.m = new ParkedActor(connectionMachine, { accountId: entry.accountId, backoffBaseMs: deps.backoffBaseMs, backoffCapMs: deps.backoffCapMs, port: new SlotPort(this) }, this);
    this.offState = conn.on('state', (s) => {
      if (s.state === 'disconnected' && this.m.value === 'connected') {
        this.m.send({ type: 'broker.dropped', ...(s.reason !== undefined ? { reason: s.reason } : {}) });
      }
    });
  }

  private accountEventsOff: Array<() => void> | null = null;

  /**
   * The connection's events for the account's listeners (stream sockets, gateway sessions) are
   * listened to only while it has some: with none, the account passes them to nobody, and an idle
   * account then holds no listener but its state's. Positions, orders and deals are moreover
   * asked of the broker only then: the simulator builds the whole position list on every change
   * for a listener, which an order nobody streams should not pay for.
   */
  listenAccountEvents(on: boolean): void {
    if (on && !this.accountEventsOff) {
      const { conn, entry } = this;
      this.accountEventsOff = [
        conn.on('tick', (tick) => entry.emit({ type: 'tick', tick })),
        conn.on('candle', (candle) => entry.emit({ type: 'candle', candle })),
        conn.on('positions', (positions) => entry.emit({ type: 'positions', positions })),
        conn.on('orders', (orders) => entry.emit({ type: 'orders', orders })),
        conn.on('deal', (deal) => entry.emit({ type: 'deal', deal })),
      ];
    } else if (!on && this.accountEventsOff) {
      for (const off of this.accountEventsOff) off();
      this.accountEventsOff = null;
    }
  }

  start(): void {
    this.m.actor.start();
  }

  /** Terminal build: the pinned one, else the server's (a bridge learns it only once connected). */
  get build(): number {
    return this.pinnedBuild ?? this.conn.server.build;
  }

  /** Connected and taking new work (top-level and atomic: its value, not matches(), which builds a state path per call, once an order). */
  get usable(): boolean {
    return !this.draining && this.m.value === 'connected';
  }

  state(): string {
    const v = this.m.value;
    return typeof v === 'string' ? v : Object.entries(v).map(([k, s]) => `${k}.${String(s)}`).join(',');
  }

  release(): void {
    this.inflight--;
    if (this.draining && this.inflight === 0) this.m.send({ type: 'drained' });
  }

  async drainAndStop(): Promise<void> {
    this.draining = true;
    this.m.send({ type: 'drain' });
    if (this.inflight === 0) this.m.send({ type: 'drained' });
    await waitFor(this.m.actor, (s) => s.status === 'done', { timeout: Infinity });
    this.dispose();
  }

  dispose(): void {
    this.offState();
    this.listenAccountEvents(false);
    this.entry.slotGone(this);
    this.m.stop();
  }

  /** CheckConnect: cuts a reconnect wait short. */
  check(): void {
    this.m.send({ type: 'check' });
  }

  actorFailed(err: unknown): void {
    this.log.error('connection actor failed', { accountId: this.entry.accountId, err });
  }

  /** Connected and not draining: the machine may rest as its snapshot. */
  restful(s: SnapshotFrom<typeof connectionMachine>): boolean {
    return s.matches('connected') && !this.draining;
  }

  // The connection machine's port (SlotPort calls these).
  async connect(signal: AbortSignal): Promise<void> {
    const { conn, entry } = this;
    await conn.connect().catch((err: unknown) => {
      entry.loginFailed(this, err);
      throw err;
    });
    // The attempt was abandoned meanwhile (drain): never leave an unowned live connection.
    if (signal.aborted) {
      await conn.disconnect();
      return;
    }
    // Before the phase event: listeners of 'connected' read the server (its clock) it learned.
    entry.learnServer(this);
    entry.restoreSubscriptions(conn);
  }

  notify(phase: Parameters<ConnectionPort['notify']>[0]): void {
    this.entry.onPhase(this, phase);
    // Connected and idle: the machine rests as its snapshot until its next event.
    if (phase === 'connected') this.m.parkSoon();
  }
}

/**
 * A slot as its machine's port: methods on the prototype, no closures per account. The slot is a
 * private field: xstate walks the context's enumerable properties when it persists and restores a
 * snapshot, and must not walk from there into the account, its connection and the simulator.
 */
class SlotPort implements ConnectionPort {
  readonly #slot: Slot;
  constructor(slot: Slot) {
    this.#slot = slot;
  }
  connect(signal: AbortSignal): Promise<void> {
    return this.#slot.connect(signal);
  }
  disconnect(): Promise<void> {
    return this.#slot.conn.disconnect();
  }
  notify(phase: Parameters<ConnectionPort['notify']>[0]): void {
    this.#slot.notify(phase);
  }
}
