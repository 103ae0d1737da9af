// Account streams of /v1/stream (main thread): which accounts have stream state here, the pairing of
// stream.open/stream.close with the shard, the account events (POSITIONS, ORDERS, TRADE, connection
// phase) and the P5 snapshots, the per-account reference counts of symbols and timeframes, and
// shard restarts.
import type { Config } from '../config.js';
import { toApiError } from '../errors.js';
import type { Logger } from '../log.js';
import type { Timeframe } from '../market/timeframes.js';
import type { ShardSet } from '../runtime/shardSet.js';
import type { TenancyStore } from '../store/tenancy.js';
import { errorMessage } from '../util/errorMessage.js';
import { ordersData, positionsData, tradeData } from './frames.js';
import type { Outbox } from './outbox.js';
import type { AccountState, Sock } from './state.js';
import type { Topics } from './topics.js';
import {
  STREAM_EVENT, type OrdersEventData, type PhaseEventData, type PositionsEventData, type StreamEvent, type StreamOpenResult,
} from '../runtime/hosts/streamCommands.js';

export interface AccountStreamDeps {
  config: Config;
  shards: ShardSet;
  tenancy: TenancyStore;
  log: Logger;
  inflight: { draining: boolean };
  /** The broker login bound to an account, from this thread's own database connection. */
  bindingOf?: (accountId: string) => { platform: 'P4' | 'P5'; server: string } | undefined;
}

export class AccountStreams {
  readonly accounts = new Map<string, AccountState>();
  readonly activeSeats = new Set<string>();

  constructor(private readonly deps: AccountStreamDeps, private readonly topics: Topics, private readonly out: Outbox) {}

  private threadOf(id: string): number | undefined {
    return this.deps.shards.threadId(this.deps.shards.shardFor(id));
  }

  /**
   * Stream state for an account with no socket yet, from what this thread knows without asking the
   * shard: its seat ACTIVE (cached, or in seat_state), its broker login bound (account_bindings), and
   * its server's clock (seen before). Undefined when any of that is missing: then the shard decides.
   * The phase is a placeholder until the socket's stream.open answers (milliseconds).
   */
  fromRecords(id: string): AccountState | undefined {
    const binding = this.deps.bindingOf?.(id);
    if (!binding || !this.topics.servers.has(binding.server)) return undefined;
    if (!this.activeSeats.has(id)) {
      if (this.deps.tenancy.seatState(id)?.status !== 'ACTIVE') return undefined;
      this.activeSeats.add(id);
    }
    return {
      id, platform: binding.platform, server: binding.server, phase: 'connecting', sockets: new Set(), symbolRefs: new Map(), candleRefs: new Map(), opens: 0,
      threadId: this.threadOf(id),
    };
  }

  /** A stream.open answered (before an asynchronous upgrade): the account's state here, one open more. */
  noteOpen(id: string, open: StreamOpenResult): void {
    if (open.serverInfo) this.topics.noteServer(open.serverInfo);
    let acc = this.accounts.get(id);
    if (!acc) {
      acc = { id, platform: open.platform, server: open.server, phase: open.phase, sockets: new Set(), symbolRefs: new Map(), candleRefs: new Map(), opens: 0,
        threadId: this.threadOf(id) };
      this.accounts.set(id, acc);
    } else {
      acc.phase = open.phase;
    }
    acc.opens++;
  }

  /** Every stream.open is paired with one stream.close (when its socket closes or the upgrade fails). */
  releaseIfUnused(id: string): void {
    const acc = this.accounts.get(id);
    if (acc) this.dropOpen(acc);
    // At shutdown every socket's release fails (the shards stop; their stream state goes with them):
    // not worth one warning per socket.
    this.deps.shards.call(id, 'stream.close', { accountId: id }).catch((err: unknown) => {
      if (!this.deps.inflight.draining) this.deps.log.warn('stream.close failed', { accountId: id, err: errorMessage(err) });
    });
  }

  /** One stream.open fewer for the account here; its state goes with the last one and the last socket. */
  dropOpen(acc: AccountState): void {
    acc.opens--;
    if (acc.opens <= 0 && acc.sockets.size === 0 && this.accounts.get(acc.id) === acc) this.accounts.delete(acc.id);
  }

  // ---- reference counts of what the account's sockets want at the broker ------------------------

  incRef(m: Map<string, number>, k: string): void {
    m.set(k, (m.get(k) ?? 0) + 1);
  }

  decSymbol(acc: AccountState, symbol: string): void {
    const n = (acc.symbolRefs.get(symbol) ?? 1) - 1;
    if (n > 0) {
      acc.symbolRefs.set(symbol, n);
      return;
    }
    acc.symbolRefs.delete(symbol);
    this.deps.shards.call(acc.id, 'stream.unsub', { accountId: acc.id, symbol }).catch(() => undefined);
  }

  decCandle(acc: AccountState, k: string): void {
    const n = (acc.candleRefs.get(k) ?? 1) - 1;
    if (n > 0) {
      acc.candleRefs.set(k, n);
      return;
    }
    acc.candleRefs.delete(k);
    const [symbol, tf] = k.split('|') as [string, Timeframe];
    this.deps.shards.call(acc.id, 'stream.unsub', { accountId: acc.id, symbol, timeframes: [tf] }).catch(() => undefined);
  }

  // ---- account events ---------------------------------------------------------------------------

  /** Shard events keyed by account (positions, orders, deals, connection phase). */
  onEvent(ev: StreamEvent): void {
    switch (ev.kind) {
      case STREAM_EVENT.positions: {
        const acc = this.accounts.get(ev.key);
        if (!acc) break;
        const d = ev.data;
        for (const s of acc.sockets) {
          if (s.snapshot === 'waiting') s.heldPositions = d;
          else if (d.v > s.posV) this.sendPositions(s, d);
        }
        break;
      }
      case STREAM_EVENT.orders: {
        const acc = this.accounts.get(ev.key);
        if (!acc || acc.platform !== 'P5') break; // SPEC §6: ORDERS frames exist on P5 only
        const d = ev.data;
        for (const s of acc.sockets) {
          if (s.snapshot === 'waiting') s.heldOrders = d;
          else if (d.v > s.ordV) this.sendOrders(s, d);
        }
        break;
      }
      case STREAM_EVENT.deal: {
        const acc = this.accounts.get(ev.key);
        if (!acc || acc.sockets.size === 0) break;
        const data = tradeData(ev.data.deal, this.topics.clockOf(acc));
        for (const s of acc.sockets) this.out.sendOwn(s, 'TRADE', data);
        break;
      }
      case STREAM_EVENT.phase:
        this.onPhase(ev.key, ev.data);
        break;
      default:
        break;
    }
  }

  private onPhase(id: string, d: PhaseEventData): void {
    if (d.server) this.topics.noteServer(d.server);
    const acc = this.accounts.get(id);
    if (!acc) return;
    if (d.server && d.server.name !== acc.server) {
      // Bound to a login on another server (/ConnectEx id=): the sockets' topics, clock and maybe
      // platform are the old server's. Clients reconnect; a socket arriving before the last
      // stream.open is released joins this state, so it describes the new binding from now on.
      acc.server = d.server.name;
      acc.platform = d.server.platform;
      acc.phase = d.phase;
      for (const s of [...acc.sockets]) this.out.end(s, 'ACCOUNT_REBOUND');
      return;
    }
    const was = acc.phase;
    acc.phase = d.phase;
    if (acc.phase === 'connected' && acc.platform === 'P5') {
      // A missing initial snapshot follows now; after an outage every socket gets a fresh pair,
      // since what changed at the broker meanwhile may not have reached us as events.
      for (const s of acc.sockets) if (s.snapshot === 'none' || (was === 'reconnecting' && s.snapshot === 'sent')) this.requestSnapshot(s);
    }
  }

  requestSnapshot(sock: Sock): void {
    sock.snapshot = 'waiting';
    const acc = sock.acc;
    this.deps.shards.call(acc.id, 'stream.snapshot', { accountId: acc.id, timeoutMs: this.deps.config.streamSnapshotTimeoutMs }).then(
      (snap) => {
        this.topics.noteServer(snap.server);
        if (sock.closed) return;
        const clock = this.topics.clockOf(acc);
        sock.posV = snap.posV;
        sock.ordV = snap.ordV;
        sock.snapshot = 'sent';
        sock.ws.cork(() => {
          if (!this.out.sendOwn(sock, 'POSITIONS', positionsData(snap.positions, true, clock))) return;
          if (!this.out.sendOwn(sock, 'ORDERS', ordersData(snap.orders, true, clock))) return;
          const hp = sock.heldPositions;
          const ho = sock.heldOrders;
          sock.heldPositions = sock.heldOrders = null;
          if (hp && hp.v > sock.posV) this.sendPositions(sock, hp);
          if (ho && ho.v > sock.ordV) this.sendOrders(sock, ho);
        });
      },
      (err: unknown) => {
        if (sock.closed) return;
        const e = toApiError(err);
        // Not connected yet: the snapshot follows when the account's connection comes up.
        sock.snapshot = 'none';
        this.out.errorFrame(sock, e.code, `initial snapshot unavailable (${e.message}); it is sent when the account connects`);
      },
    ).catch((err: unknown) => this.deps.log.error('stream snapshot delivery failed', { accountId: acc.id, err: errorMessage(err) }));
  }

  private sendPositions(sock: Sock, ev: PositionsEventData): void {
    sock.posV = ev.v;
    this.out.sendOwn(sock, 'POSITIONS', positionsData(ev.positions, false, this.topics.clockOf(sock.acc)));
  }

  private sendOrders(sock: Sock, ev: OrdersEventData): void {
    sock.ordV = ev.v;
    this.out.sendOwn(sock, 'ORDERS', ordersData(ev.orders, false, this.topics.clockOf(sock.acc)));
  }

  // ---- shard restarts ---------------------------------------------------------------------------

  private seenRestarts = 0;
  private recheckUntil = 0;

  /** A restarted shard lost the stream state of its accounts (subscriptions, listeners): their
   *  sockets are closed with RUNTIME_RESTARTED so clients reconnect, resubscribe and resync. The
   *  new thread may appear a little after the restart is counted, so accounts are re-checked for
   *  a few seconds. */
  checkShardRestarts(): void {
    const shards = this.deps.shards;
    const r = shards.restarts();
    const now = Date.now();
    if (r !== this.seenRestarts) {
      this.seenRestarts = r;
      this.recheckUntil = now + 5_000;
    }
    if (now > this.recheckUntil) return;
    for (const acc of this.accounts.values()) {
      if (acc.sockets.size === 0) continue;
      const current = shards.threadId(shards.shardFor(acc.id));
      if (current === acc.threadId) continue;
      acc.threadId = current;
      acc.opens = 0; // the new thread holds no stream.open of ours
      for (const s of [...acc.sockets]) this.out.end(s, 'RUNTIME_RESTARTED');
    }
  }
}
