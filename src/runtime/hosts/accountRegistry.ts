// The in-shard registry of live accounts. The account host (connection actors, issue 4) registers
// each account's runtime here; the other hosts of the same shard (gateway sessions, stream
// subscriptions) look accounts up through it instead of opening broker connections of their own,
// so an account has exactly one broker connection, owned by its connection actor.
import type { BrokerConnection, BrokerCredentials, BrokerEvents } from '../../broker/types.js';
import type { AccountSummary } from '../../market/account.js';
import type { Platform, ServerInfo } from '../../market/server.js';

/** SPEC §3 connection states, as HEARTBEAT `connection` reports them. */
export type ConnectionPhase = 'connecting' | 'connected' | 'reconnecting';

export type AccountEvent =
  | { type: 'phase'; phase: ConnectionPhase }
  | { type: 'tick'; tick: BrokerEvents['tick'] }
  | { type: 'positions'; positions: BrokerEvents['positions'] }
  | { type: 'orders'; orders: BrokerEvents['orders'] }
  | { type: 'deal'; deal: BrokerEvents['deal'] }
  | { type: 'candle'; candle: BrokerEvents['candle'] }
  /** The account's platform changed: re-bound to a login of the other generation, or a bridge
   *  connection learned the server's own (gateway sessions speak one platform's dialect). */
  | { type: 'platform'; platform: Platform }
  /** Bound to another broker login (/ConnectEx id=), emitted before the new login's connection
   *  starts: what the account's events describe from now on is that login (`server` its server's name). */
  | { type: 'rebound'; server: string; platform: Platform };

export interface AccountRuntime {
  readonly accountId: string;
  readonly customerId: string;
  readonly platform: Platform;
  /** The broker server. Only when `serverKnown` is its time zone (clock) and build the broker's: a
   *  bridge connection learns them at its first login, and before that `server` is a placeholder. */
  readonly server: ServerInfo;
  readonly serverKnown: boolean;
  /** Terminal build of the connection: the binding's pinned one, else the server's (SPEC §9: newer endpoints answer 501). */
  readonly build: number;
  /** Current connection state of the account's connection actor. */
  phase(): ConnectionPhase;
  /**
   * Resolves with the live broker connection; rejects with ApiError NOT_CONNECTED (503) if it is not
   * connected within `timeoutMs`. Its subscribe/unsubscribe calls are held per `owner` (one name per
   * host, e.g. 'stream', 'gateway'): the broker keeps a symbol while any owner holds it.
   */
  whenConnected(timeoutMs?: number, owner?: string): Promise<BrokerConnection>;
  /** Account events (ticks of subscribed symbols, snapshots, deals, phase changes). Returns an unsubscribe function. */
  on(listener: (ev: AccountEvent) => void): () => void;
  /** The last summary read while connected: what both route families answer, with synced:false, while reconnecting. */
  lastSummary: AccountSummary | undefined;
  /** Cuts an ongoing reconnect wait short (CheckConnect restores the connection). */
  check(): void;
}

export interface AccountRegistry {
  /** The live runtime, if the account's actor is running in this shard. */
  get(accountId: string): AccountRuntime | undefined;
  /** Starts the account's connection actor from its stored binding if needed; rejects with ApiError NOT_FOUND for an unknown account. */
  ensure(accountId: string): Promise<AccountRuntime>;
  /** A broker connection of no account, from the shard's broker source (a quote session:
   *  quoteSessions.ts); the caller connects, and disconnects it. */
  open(credentials: BrokerCredentials): BrokerConnection;
}

/**
 * AccountSummary as both route families answer it (SPEC §2): while the account is not connected,
 * its last-known values at once with `synced: false`; else a fresh read, kept as the last-known
 * values; a read that fails (no connection in time, a drop) falls back to the last-known values
 * too, and throws only when there are none.
 */
export async function summaryOrLastKnown(
  rt: Pick<AccountRuntime, 'phase' | 'lastSummary'>, read: () => Promise<AccountSummary>,
): Promise<AccountSummary & { synced: boolean }> {
  if (rt.phase() !== 'connected' && rt.lastSummary) return { ...rt.lastSummary, synced: false };
  try {
    const s = await read();
    rt.lastSummary = s;
    return { ...s, synced: true };
  } catch (err) {
    if (rt.lastSummary) return { ...rt.lastSummary, synced: false };
    throw err;
  }
}
