// The broker subscriptions that the gateway session host (sessions.ts) needs, reference-counted per
// account: the subscriptions of every session of an account share one placement at the broker per
// symbol (and timeframe), taken with the first and let go of with the last.
import type { SubscriptionSpec } from '../../../actors/subscription.js';
import type { BrokerConnection } from '../../broker/types.js';
import type { Timeframe } from '../../market/timeframes.js';
import type { AccountRegistry, AccountRuntime } from './accountRegistry.js';
import type { ShardContext } from './context.js';

/** One broker subscription of this host for an account, shared by the subscriptions that need it. */
interface BrokerLease {
  n: number;
  spec: SubscriptionSpec;
  /** Subscribed at the broker (through the account, which restores it after reconnects). */
  placed: boolean;
  placing: boolean;
}

export interface BrokerLeases {
  /** Takes a lease on `spec` for the account; the first one places it at the broker (now or at the next connect). */
  acquire(accountId: string, spec: SubscriptionSpec): Promise<void>;
  /** Places every lease of the account not placed yet, if its connection is up (else its next 'connected' does). */
  placeAll(accountId: string): Promise<void>;
  /** Gives a lease back; the last one lets go of the placement at the broker. */
  release(accountId: string, spec: SubscriptionSpec): Promise<void>;
}

export function createBrokerLeases(ctx: ShardContext, registry: () => AccountRegistry): BrokerLeases {
  const { timing } = ctx.settings;
  /** Broker subscriptions held by this host per account: "q|SYM" or "c|SYM|TF" -> lease. */
  const brokerRefs = new Map<string, Map<string, BrokerLease>>();

  // A lease is placed at the broker when the account's connection is up: at once if it is, else
  // when the connection reports 'connected' (placeAll from the account's phase event), however long
  // the outage lasts (a session resumed after a restart during an outage re-subscribes then). Once
  // placed, the account restores it on later reconnects (AccountEntry.restoreSubscriptions).
  const leaseKey = (s: SubscriptionSpec) => (s.kind === 'ohlc' ? `c|${s.symbol}|${s.timeframe}` : `q|${s.symbol}`);
  function acquire(accountId: string, spec: SubscriptionSpec): Promise<void> {
    const refs = brokerRefs.get(accountId) ?? new Map<string, BrokerLease>();
    brokerRefs.set(accountId, refs);
    const k = leaseKey(spec);
    const lease = refs.get(k);
    if (lease) {
      lease.n++;
      return Promise.resolve();
    }
    refs.set(k, { n: 1, spec, placed: false, placing: false });
    return placeAll(accountId);
  }

  /** Places every lease of the account not placed yet, if its connection is up (else its next 'connected' does). */
  async function placeAll(accountId: string): Promise<void> {
    const refs = brokerRefs.get(accountId);
    if (!refs) return;
    const rt = await registry().ensure(accountId);
    if (rt.phase() !== 'connected') return;
    const todo = [...refs.values()].filter((l) => !l.placed && !l.placing);
    if (!todo.length) return;
    for (const l of todo) l.placing = true;
    let conn: BrokerConnection;
    try {
      conn = await rt.whenConnected(undefined, 'gateway');
    } catch (e) {
      for (const l of todo) l.placing = false;
      throw e;
    }
    const failures: unknown[] = [];
    for (const l of todo) {
      try {
        // Released while waiting: nothing to place.
        if (refs.get(leaseKey(l.spec)) !== l) continue;
        if (l.spec.kind === 'ohlc') await conn.subscribeCandles(l.spec.symbol, [l.spec.timeframe as Timeframe]);
        else await conn.subscribe([l.spec.symbol]);
        l.placed = true;
        // Released while placing: let go of it again.
        if (refs.get(leaseKey(l.spec)) !== l) await unplace(rt, l.spec, refs);
      } catch (e) {
        failures.push(e);
      } finally {
        l.placing = false;
      }
    }
    if (failures.length) throw failures[0];
  }

  async function release(accountId: string, spec: SubscriptionSpec): Promise<void> {
    const refs = brokerRefs.get(accountId);
    const k = leaseKey(spec);
    const lease = refs?.get(k);
    if (!refs || !lease) return;
    if (--lease.n > 0) return;
    refs.delete(k);
    // Never placed (or still being placed: placeAll lets go of it when done): nothing at the broker.
    if (!lease.placed) return;
    const rt = ctx.accounts?.get(accountId);
    if (!rt || rt.phase() !== 'connected') return;
    await unplace(rt, spec, refs);
  }

  async function unplace(rt: AccountRuntime, spec: SubscriptionSpec, refs: Map<string, BrokerLease>): Promise<void> {
    if (refs.has(leaseKey(spec))) return; // wanted again meanwhile: the new lease shares the placement
    // Held per owner by the account: the broker keeps the symbol while the /v1/stream host holds it.
    const conn = await rt.whenConnected(timing.subscriptionWaitMs, 'gateway');
    if (spec.kind === 'ohlc') await conn.unsubscribeCandles(spec.symbol, [spec.timeframe as Timeframe]);
    else await conn.unsubscribe([spec.symbol]);
  }

  return { acquire, placeAll, release };
}
