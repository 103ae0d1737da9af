// Hosts the gateway session actors (actors/session.ts) of the accounts this shard owns, and their
// subscription children. One live session per account: a repeated connect answers the same
// handle. Sessions and their subscription sets are persisted (src/store/sessions.ts), so a shard
// restart or a gateway restart resumes them (docs/gateway.md).
//
// Pushes: the host listens to the account's events through the AccountRegistry (one broker
// connection per account, owned by the account host) and feeds each tick/candle to the matching
// subscription child (sessionFrames.ts); the child decides (interval throttle) and its `push` action
// emits the frame to the main thread, serialized once here, where the /ws sockets of the handle
// receive it. The subscription operations are in sessionSubscriptions.ts, the broker subscriptions
// they need in brokerLeases.ts.
import { createActor, fromCallback, type EventObject } from 'xstate';
import { sessionMachine, sessionState } from '../../../actors/session.js';
import { subscriptionMachine, type SubscriptionSpec } from '../../../actors/subscription.js';
import { clockFor } from '../../market/serverClock.js';
import type { AccountSummary } from '../../market/account.js';
import { parseTimeframe } from '../../market/timeframes.js';
import { apiError } from '../../errors.js';
import { SessionStore } from '../../store/sessions.js';
import { errorMessage } from '../../util/errorMessage.js';
import { summaryOrLastKnown, type AccountEvent, type AccountRegistry, type AccountRuntime } from './accountRegistry.js';
import { createBrokerLeases } from './brokerLeases.js';
import { marketClockOf, marketNowOf, type ActorHost, type ShardContext } from './context.js';
import { GATEWAY_EVENT, type GatewayFrameData, type SessionConnectResult } from './gatewayCommands.js';
import { assertAvailable } from './accountOps.js';
import { runOp } from './gatewayOps.js';
import { feedCandle, feedTick, pushedFrame, type HeldQuote, type SessionChildren } from './sessionFrames.js';
import { sessionSubscriptions, type SessionActor } from './sessionSubscriptions.js';
import { brokerFailure, GATEWAY_TRADE_OPS } from '../brokerFailures.js';
import './gatewayCommands.js';

interface Live {
  actor: SessionActor;
  accountId: string;
  handleHash: string;
  /** Stops the account-event listener. */
  detach: () => void;
  /** Bar open (UTC s) first seen per candle subscription: that bar was joined mid-way (partial). */
  firstBar: Map<string, number>;
}

export function createSessionHost(ctx: ShardContext): ActorHost {
  const store = new SessionStore(ctx.db);
  const { timing } = ctx.settings;
  const byAccount = new Map<string, Live>();
  const byHash = new Map<string, Live>();
  const registry = (): AccountRegistry => {
    if (!ctx.accounts) throw apiError('SERVICE_UNAVAILABLE', 'account runtime is not available in this shard');
    return ctx.accounts;
  };
  const leases = createBrokerLeases(ctx, registry);
  const { listSubscriptions, subscribeOp } = sessionSubscriptions(registry);

  const emit = (handleHash: string, frame: GatewayFrameData) => ctx.emit({ kind: GATEWAY_EVENT.frame, key: handleHash, data: frame });

  function machineFor(accountId: string, handleHash: () => string | null, leased: (key: string) => void) {
    return sessionMachine.provide({
      actors: {
        subscription: subscriptionMachine.provide({
          actors: {
            lease: fromCallback<EventObject, SubscriptionSpec & { key: string }>(({ input }) => {
              const spec: SubscriptionSpec = { kind: input.kind, symbol: input.symbol, intervalMs: input.intervalMs, ...(input.timeframe ? { timeframe: input.timeframe } : {}) };
              leased(input.key);
              leases.acquire(accountId, spec).catch((e: unknown) => ctx.log.warn('gateway subscription: broker subscribe failed; retried at the next connect', { accountId, key: input.key, err: errorMessage(e) }));
              return () => {
                leases.release(accountId, spec).catch((e: unknown) => ctx.log.warn('gateway subscription: broker unsubscribe failed', { accountId, key: input.key, err: errorMessage(e) }));
              };
            }),
          },
          actions: {
            push: (_a, p) => {
              const h = handleHash();
              if (!h) return;
              emit(h, pushedFrame(p.frame as GatewayFrameData | HeldQuote, marketClockOf(ctx)));
            },
          },
        }),
      },
      actions: {
        persist: (_a, { state, context }) => {
          if (!context.handleHash || !context.handleSealed || state === 'none') return;
          store.upsert({
            handle_hash: context.handleHash, account_id: context.accountId, customer_id: context.customerId, platform: context.platform,
            handle_sealed: context.handleSealed, state, connected_at: context.connectedAt, invalidated_at: context.invalidatedAt,
          });
        },
        persistSubscriptions: (_a, { context }) => {
          if (context.handleHash) store.setSubscriptions(context.handleHash, context.subscriptions);
        },
      },
    });
  }

  /** Ends a live session as Disconnect does (its subscriptions stop, its /ws sockets close with 4013). */
  function disconnect(live: Live): void {
    live.actor.send({ type: 'disconnect', at: ctx.clock.now() });
    end(live);
  }

  /** The session speaks the dialect of the platform it was opened on: once the account is another
   *  platform's (re-bound to a login of the other generation), the session ends and its handle with it. */
  const platformOf = (live: Live) => live.actor.getSnapshot().context.platform;

  function onAccountEvent(live: Live, rt: AccountRuntime, ev: AccountEvent): void {
    if (ev.type === 'platform') {
      if (ev.platform !== platformOf(live) && byHash.get(live.handleHash) === live) disconnect(live);
    } else if (ev.type === 'phase') {
      if (ev.phase === 'connected') {
        leases.placeAll(live.accountId).catch((e: unknown) => ctx.log.warn('gateway subscription: broker subscribe failed; retried at the next connect', { accountId: live.accountId, err: errorMessage(e) }));
      }
    } else if (ev.type === 'tick') {
      feedTick(live.actor.getSnapshot().children as SessionChildren, rt, ev.tick);
    } else if (ev.type === 'candle') {
      feedCandle(live.actor.getSnapshot().children as SessionChildren, live.firstBar, ev.candle);
    }
  }

  function startActor(input: Parameters<typeof createActor<typeof sessionMachine>>[1] extends infer O ? O : never, accountId: string): Live {
    let hash: string | null = null;
    // A subscription that starts (again) joins its bar in progress mid-way: forget the first bar of
    // an earlier subscription of the same key, or a re-subscribe after that bar would say partial:false.
    const firstBar = new Map<string, number>();
    const actor = createActor(machineFor(accountId, () => hash, (key) => firstBar.delete(key)), input);
    const live: Live = { actor, accountId, handleHash: '', detach: () => {}, firstBar };
    actor.subscribe({
      next: (s) => {
        hash = s.context.handleHash;
      },
      error: (err) => ctx.log.error('session actor failed', { accountId, err: errorMessage(err) }),
    });
    actor.start();
    hash = actor.getSnapshot().context.handleHash;
    return live;
  }

  async function attach(live: Live): Promise<void> {
    try {
      const rt = await registry().ensure(live.accountId);
      if (byHash.get(live.handleHash) !== live) return;
      live.detach = rt.on((ev) => onAccountEvent(live, rt, ev));
      // A resumed session (restart) learns last-known values once the connection is up.
      if (!rt.lastSummary) void rt.whenConnected(timing.resumeWaitMs).then((c) => readSummary(rt, c)).catch(() => undefined);
    } catch (e) {
      ctx.log.warn('gateway session: account not available for pushes', { accountId: live.accountId, err: errorMessage(e) });
    }
  }

  function register(live: Live): void {
    const c = live.actor.getSnapshot().context;
    live.handleHash = c.handleHash!;
    byAccount.set(live.accountId, live);
    byHash.set(live.handleHash, live);
    void attach(live);
  }

  function end(live: Live): void {
    live.detach();
    byHash.delete(live.handleHash);
    if (byAccount.get(live.accountId) === live) byAccount.delete(live.accountId);
    ctx.emit({ kind: GATEWAY_EVENT.end, key: live.handleHash, data: null });
  }

  function liveSession(handleHash: string): Live {
    const live = byHash.get(handleHash);
    if (!live || sessionState(live.actor.getSnapshot().value) !== 'live') {
      throw apiError('SESSION_NOT_FOUND', 'session handle unknown or disconnected: POST /v1/connect for a new one');
    }
    return live;
  }

  /** Reads the summary from the broker and keeps it as the account's last-known values. */
  async function readSummary(rt: AccountRuntime, conn: Awaited<ReturnType<AccountRuntime['whenConnected']>>): Promise<AccountSummary> {
    const s = await conn.accountSummary();
    rt.lastSummary = s;
    return s;
  }

  /** AccountSummary as the classic route answers it: without a connection or last-known values, the short wait and 503. */
  async function accountSummary(rt: AccountRuntime): Promise<unknown> {
    try {
      return await summaryOrLastKnown(rt, async () => (await rt.whenConnected()).accountSummary());
    } catch (e) {
      throw brokerFailure(e);
    }
  }

  return {
    handlers: {
      'session.connect': async (args): Promise<SessionConnectResult> => {
        const current = byAccount.get(args.accountId);
        const answer = (l: Live, fresh: boolean): SessionConnectResult => {
          const c = l.actor.getSnapshot().context;
          return { handleSealed: c.handleSealed!, handleHash: c.handleHash!, fresh, connectedAt: c.connectedAt, platform: c.platform };
        };
        // A live session of another platform than the account's now (see onAccountEvent) is not reused.
        const known = ctx.accounts?.get(args.accountId);
        if (current && sessionState(current.actor.getSnapshot().value) === 'live') {
          if (!args.renew && (!known?.serverKnown || known.platform === platformOf(current))) return answer(current, false);
          disconnect(current);
        }
        const rt = await registry().ensure(args.accountId);
        try {
          const conn = await rt.whenConnected(args.waitMs);
          // Last-known values for AccountSummary during a later outage (best effort).
          await readSummary(rt, conn).catch(() => undefined);
        } catch (e) {
          throw brokerFailure(e);
        }
        // Another connect may have opened the session while this one waited.
        const raced = byAccount.get(args.accountId);
        if (raced && sessionState(raced.actor.getSnapshot().value) === 'live') return answer(raced, false);
        // Connected, so the platform is the broker server's own (the binding's may have been a guess
        // made while a bridge was unreachable, corrected at this login).
        const platform = rt.serverKnown ? rt.platform : args.platform;
        const live = startActor({ input: { accountId: args.accountId, customerId: args.customerId, platform } }, args.accountId);
        live.actor.send({ type: 'connect', handleHash: args.handleHash, handleSealed: args.handleSealed, at: ctx.clock.now() });
        register(live);
        return answer(live, true);
      },
      'session.closeAccount': ({ accountId }) => {
        const live = byAccount.get(accountId);
        if (live) disconnect(live);
        return { closed: live !== undefined };
      },
      'session.op': async ({ handleHash, op, args, addOnly }) => {
        const live = liveSession(handleHash);
        switch (op) {
          case 'Disconnect': {
            disconnect(live);
            return { ok: true, disconnected: true };
          }
          case 'SubscribedSymbols':
            return listSubscriptions(live);
          case 'ConnectionStatus':
          case 'CheckConnect': {
            // Reports at once; CheckConnect also restores: it cuts the reconnect wait short and
            // gives the connection a moment (as the classic account.check), never the 5 s of old.
            const rt = await registry().ensure(live.accountId);
            if (op === 'CheckConnect' && rt.phase() !== 'connected') {
              rt.check();
              await rt.whenConnected(timing.checkWaitMs).catch(() => undefined);
            }
            const phase = rt.phase();
            return { connected: phase === 'connected', phase, server: rt.server.name, platform: rt.platform };
          }
          case 'AccountSummary':
            return accountSummary(await registry().ensure(live.accountId));
        }
        if (/^(Un)?[Ss]ubscribe/.test(op) && op !== 'SubscribedSymbols') {
          try {
            return await subscribeOp(live, op, args, addOnly === true);
          } catch (e) {
            throw brokerFailure(e);
          }
        }
        const rt = await registry().ensure(live.accountId);
        try {
          const conn = await rt.whenConnected();
          // An operation newer than the terminal answers 501 here as on the classic route of its name (SPEC §9).
          assertAvailable(op, rt.platform, rt.build);
          // The clock of the connection that answers: it has logged in, so its server is the broker's.
          // Times on the market's clock (SIM_START's offset, a bridged simulator's): the session's connect is the shard's.
          const connectedAt = live.actor.getSnapshot().context.connectedAt + (ctx.settings.simClockOffsetMs ?? 0) + (conn.server.clockOffsetMs ?? 0);
          return await runOp(op, args, { runtime: rt, conn, clock: clockFor(conn.server), connectedAt, now: () => marketNowOf(ctx, conn.server) });
        } catch (e) {
          throw brokerFailure(e, GATEWAY_TRADE_OPS.has(op) ? 'trade' : 'read');
        }
      },
    },
    rehydrate() {
      let n = 0;
      for (const row of store.live()) {
        if (!ctx.owns(row.account_id) || byHash.has(row.handle_hash)) continue;
        const live = startActor({
          input: {
            accountId: row.account_id, customerId: row.customer_id, platform: row.platform,
            resume: { handleHash: row.handle_hash, handleSealed: row.handle_sealed, connectedAt: row.connected_at },
          },
        }, row.account_id);
        register(live);
        for (const { spec } of store.subscriptions(row.handle_hash)) {
          const s = spec as SubscriptionSpec;
          if (s.kind === 'ohlc' && !parseTimeframe(String(s.timeframe))) continue;
          live.actor.send({ type: 'subscribe', spec: s });
        }
        n++;
      }
      return n;
    },
    actorCount: () => byHash.size,
    // Cluster mode: the account went to another node (not disconnected: as stop(), for those accounts).
    release: (ids) => [...byHash.values()].filter((l) => ids.has(l.accountId) && (l.detach(), l.actor.stop(), byHash.delete(l.handleHash), byAccount.delete(l.accountId))).length,
    stop() {
      // Stopping is not disconnecting: the sessions stay live in storage and resume on start.
      for (const l of byHash.values()) {
        l.detach();
        l.actor.stop();
      }
      byHash.clear();
      byAccount.clear();
    },
  };
}
