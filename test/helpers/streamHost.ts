// The shard side of /v1/stream (src/runtime/hosts/streams.ts) in the test's own thread, over scripted
// account runtimes: the test fires their events and reads what the host emits to the main thread.
import type { BrokerConnection } from '../../src/broker/types.js';
import type { ServerInfo } from '../../src/market/server.js';
import type { AccountEvent, AccountRuntime, ConnectionPhase } from '../../src/runtime/hosts/accountRegistry.js';
import type { ShardContext } from '../../src/runtime/hosts/context.js';
import { createStreamHost } from '../../src/runtime/hosts/streams.js';
import type { ShardEvent } from '../../src/runtime/protocol.js';
import { shardSettings, type ShardTiming } from '../../src/runtime/settings.js';
import type { Clock } from '../../src/util/clock.js';

export const FAKE_SERVER: ServerInfo = { name: 'Fake-P5', platform: 'P5', build: 4620, company: 'x', timeZone: { description: 'UTC', standardOffsetMinutes: 0, dst: 'none' } };

/** An account runtime on FAKE_SERVER, connected until a fired phase event says otherwise; `conn` is
 *  its broker connection (only what the test's host uses of it); `onWait` hears each wait for it. */
export function scriptedRuntime(accountId: string, conn: object, onWait?: (ms: number | undefined, owner: string | undefined) => void) {
  const listeners = new Set<(ev: AccountEvent) => void>();
  let phase: ConnectionPhase = 'connected';
  const rt = {
    accountId, customerId: 'c', platform: 'P5', server: FAKE_SERVER, serverKnown: true, phase: () => phase,
    whenConnected: async (ms?: number, owner?: string) => {
      onWait?.(ms, owner);
      return { server: FAKE_SERVER, ...conn } as unknown as BrokerConnection;
    },
    on: (l: (ev: AccountEvent) => void) => {
      listeners.add(l);
      return () => listeners.delete(l);
    },
    lastSummary: undefined,
    check: () => undefined,
  } as unknown as AccountRuntime;
  const fire = (ev: AccountEvent) => {
    if (ev.type === 'phase') phase = ev.phase;
    for (const l of listeners) l(ev);
  };
  return { rt, fire, listeners };
}

export interface StreamHostOptions {
  clock?: Clock;
  timing?: Partial<ShardTiming>;
  /** The registry's ensure (default: the runtime of that id, or undefined). */
  ensure?: (accountId: string) => Promise<AccountRuntime | undefined>;
}

/** A stream host on shard 0 of 1 whose account registry holds `runtimes`; `events`: what it emitted. */
export function streamHostOver(runtimes: readonly AccountRuntime[], o: StreamHostOptions = {}) {
  const events: ShardEvent[] = [];
  const get = (id: string) => runtimes.find((rt) => rt.accountId === id);
  const ctx = {
    shard: 0, shards: 1, log: { warn: () => undefined, info: () => undefined, error: () => undefined, debug: () => undefined },
    settings: shardSettings({ timing: o.timing ?? {} }), clock: o.clock ?? { now: () => Date.now() },
    emit: (ev: ShardEvent) => events.push(ev), owns: () => true,
    accounts: { get, ensure: o.ensure ?? (async (id: string) => get(id)) },
  } as unknown as ShardContext;
  return { host: createStreamHost(ctx), events };
}
