// Cluster mode, the shard side of a "near source" (docs/cluster.md "Streams"): the main thread asks
// an account running here to subscribe a symbol of its server at its broker connection for another
// account's sockets (an account of the same server owned by another node, whose quotes otherwise
// come only over the owner's relay). A holder of its own at the connection ('near'): the account's
// own sockets ('stream') and gateway sessions keep their subscriptions whatever this one does, and
// the account restores it after reconnects. What arrives goes out as the stream host's ticks do
// (forwardTick: keyed by server, deduplicated per shard). Ticks only: candles stay on the relay.
import type { Tick } from '../../market/server.js';
import { errorMessage } from '../../util/errorMessage.js';
import type { AccountRuntime } from './accountRegistry.js';
import type { Handlers, ShardContext } from './context.js';

/** This host's name as a holder of the account's broker subscriptions (AccountRuntime.whenConnected). */
const HOLDER = 'near';

/** One account's near sources: `symbols` wanted (synchronously, so an unsource processed while the
 *  account is looked up wins), `rt` the runtime whose events are listened to once known. */
interface Source { rt: AccountRuntime | undefined; symbols: Set<string>; off: () => void }

export interface StreamSources {
  handlers: Pick<Handlers, 'stream.source' | 'stream.unsource'>;
  release(accountIds: ReadonlySet<string>): void;
  stop(): void;
}

export function createStreamSources(ctx: ShardContext, forwardTick: (source: string, server: string, tick: Tick) => void): StreamSources {
  const sources = new Map<string, Source>();

  const subscribe = async (accountId: string, s: Source, rt: AccountRuntime, symbols: string[]) => {
    try {
      const conn = await rt.whenConnected(ctx.settings.timing.subscriptionWaitMs, HOLDER);
      const still = symbols.filter((x) => s.symbols.has(x));
      if (still.length && sources.get(accountId) === s) await conn.subscribe(still);
    } catch (err) {
      ctx.log.warn('near source subscribe failed', { accountId, err: errorMessage(err) });
    }
  };

  const unwant = (accountId: string, s: Source, symbol: string): boolean => {
    if (!s.symbols.delete(symbol)) return false;
    if (s.symbols.size === 0 && sources.get(accountId) === s) {
      s.off();
      sources.delete(accountId);
    }
    return true;
  };

  /** Listens to the account's ticks (of its server only: a re-bound account's are another's). */
  const attach = (accountId: string, s: Source, rt: AccountRuntime, server: string) => {
    s.off();
    s.rt = rt;
    s.off = rt.on((ev) => {
      if (ev.type === 'tick') {
        if (s.symbols.has(ev.tick.symbol) && rt.server.name === server) forwardTick(accountId, server, ev.tick);
      } else if (ev.type === 'phase' && ev.phase === 'connected') void subscribe(accountId, s, rt, [...s.symbols]);
    });
  };

  return {
    handlers: {
      'stream.source': async ({ accountId, server, symbol }) => {
        let s = sources.get(accountId);
        if (!s) sources.set(accountId, (s = { rt: undefined, symbols: new Set(), off: () => undefined }));
        const fresh = !s.symbols.has(symbol);
        s.symbols.add(symbol);
        // An account this node holds (started now if the shard restarted meanwhile), on that server.
        const rt = await ctx.accounts?.ensure(accountId).catch(() => undefined);
        if (!rt || rt.server.name !== server) {
          if (fresh) unwant(accountId, s, symbol);
          return { ok: false };
        }
        // Unsourced (or released) while it was looked up.
        if (sources.get(accountId) !== s || !s.symbols.has(symbol)) return { ok: true };
        const attached = s.rt !== rt;
        if (attached) attach(accountId, s, rt, server);
        // Connected: now; else at its next 'connected' (attach). Not waited for.
        if ((fresh || attached) && rt.phase() === 'connected') void subscribe(accountId, s, rt, attached ? [...s.symbols] : [symbol]);
        return { ok: true };
      },
      'stream.unsource': ({ accountId, symbol }) => {
        const s = sources.get(accountId);
        if (!s || !unwant(accountId, s, symbol)) return { ok: true };
        const rt = s.rt;
        if (rt?.phase() === 'connected') {
          void rt.whenConnected(ctx.settings.timing.subscriptionWaitMs, HOLDER).then((conn) => conn.unsubscribe([symbol])).catch((err: unknown) => {
            ctx.log.warn('near source release failed', { accountId, err: errorMessage(err) });
          });
        }
        return { ok: true };
      },
    },
    release(accountIds) {
      for (const id of accountIds) {
        sources.get(id)?.off();
        sources.delete(id);
      }
    },
    stop() {
      for (const s of sources.values()) s.off();
      sources.clear();
    },
  };
}
