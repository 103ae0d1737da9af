// The subscription operations of a live gateway session (Subscribe, SubscribeMany, SubscribeOhlc,
// SubscribeOrderBook and their Un-s; SubscribedSymbols): checked against the account's symbols,
// then sent to its session actor, whose subscription children lease at the broker (brokerLeases.ts).
import type { Actor } from 'xstate';
import type { sessionMachine, SessionContext } from '../../../actors/session.js';
import { subscriptionKey, type SubscriptionSpec } from '../../../actors/subscription.js';
import { apiError } from '../../errors.js';
import type { AccountRegistry } from './accountRegistry.js';

export type SessionActor = Actor<typeof sessionMachine>;

/** A live session: its actor and its account. */
export interface SessionOf { actor: SessionActor; accountId: string }

/** listSubscriptions: what SubscribedSymbols answers (and every subscription operation after its
 *  change); subscribeOp: one subscription operation of the session. */
export function sessionSubscriptions(registry: () => AccountRegistry) {
  async function checkSymbols(accountId: string, symbols: string[]): Promise<void> {
    const rt = await registry().ensure(accountId);
    const conn = await rt.whenConnected();
    for (const s of symbols) if (!(await conn.symbol(s))) throw apiError('BAD_REQUEST', `unknown symbol '${s}'`);
  }

  function subscriptions(live: SessionOf): SessionContext['subscriptions'] {
    return live.actor.getSnapshot().context.subscriptions;
  }

  function listSubscriptions(live: SessionOf) {
    const subs = Object.values(subscriptions(live));
    return {
      quotes: subs.filter((s) => s.kind === 'quote').map((s) => ({ symbol: s.symbol, interval: s.intervalMs })),
      ohlc: subs.filter((s) => s.kind === 'ohlc').map((s) => ({ symbol: s.symbol, timeframe: s.timeframe, interval: Math.round(s.intervalMs / 1000) })),
      orderBook: subs.filter((s) => s.kind === 'book').map((s) => ({ symbol: s.symbol, interval: s.intervalMs })),
      symbols: [...new Set(subs.map((s) => s.symbol))].sort(),
    };
  }

  /** `addOnly` (a read-only key's call): subscriptions it adds are made, but one the session has
   *  already is left as it is; at another interval the call is refused whole (READ_ONLY_KEY). */
  async function subscribeOp(live: SessionOf, op: string, a: Record<string, unknown>, addOnly = false): Promise<unknown> {
    const sendAll = (specs: SubscriptionSpec[]) => {
      if (addOnly) {
        const had = subscriptions(live);
        const changed = specs.find((spec) => { const h = had[subscriptionKey(spec)]; return h !== undefined && h.intervalMs !== spec.intervalMs; });
        if (changed) {
          throw apiError('READ_ONLY_KEY', `a read-only key cannot change the interval of ${changed.symbol}'s subscription (the session's subscriptions are shared with the keys that trade); it may add its own`);
        }
      }
      for (const spec of specs) live.actor.send({ type: 'subscribe', spec });
    };
    const send = (spec: SubscriptionSpec) => sendAll([spec]);
    const unsend = (key: string) => live.actor.send({ type: 'unsubscribe', key });
    const quoteKeys = () => Object.values(subscriptions(live)).filter((s) => s.kind === 'quote').map((s) => s.symbol);
    switch (op) {
      case 'Subscribe': {
        await checkSymbols(live.accountId, [a.symbol as string]);
        send({ kind: 'quote', symbol: a.symbol as string, intervalMs: a.interval as number });
        break;
      }
      case 'SubscribeMany': {
        let symbols = a.symbols as string[] | undefined;
        if (!symbols?.length) {
          // P4: all symbols when omitted.
          const rt = await registry().ensure(live.accountId);
          symbols = (await (await rt.whenConnected()).symbols()).map((s) => s.name);
        }
        await checkSymbols(live.accountId, symbols);
        const specs = symbols.map((s): SubscriptionSpec => ({ kind: 'quote', symbol: s, intervalMs: a.interval as number }));
        if (a.replace === true) for (const s of quoteKeys()) if (!symbols.includes(s)) unsend(`quote:${s}`);
        sendAll(specs);
        break;
      }
      case 'UnSubscribe':
        unsend(`quote:${a.symbol as string}`);
        break;
      case 'UnSubscribeMany': {
        const symbols = (a.symbols as string[] | undefined)?.length ? (a.symbols as string[]) : quoteKeys();
        for (const s of symbols) unsend(`quote:${s}`);
        break;
      }
      case 'SubscribeOhlc': {
        await checkSymbols(live.accountId, [a.symbol as string]);
        send({ kind: 'ohlc', symbol: a.symbol as string, timeframe: a.timeframe as string, intervalMs: (a.interval as number) * 1000 });
        break;
      }
      case 'UnsubscribeOhlc': {
        const tf = a.timeframe as string | undefined;
        for (const s of Object.values(subscriptions(live))) {
          if (s.kind === 'ohlc' && s.symbol === a.symbol && (!tf || s.timeframe === tf)) unsend(subscriptionKey(s));
        }
        break;
      }
      case 'SubscribeOrderBook': {
        const symbols = a.symbols as string[];
        await checkSymbols(live.accountId, symbols);
        sendAll(symbols.map((s): SubscriptionSpec => ({ kind: 'book', symbol: s, intervalMs: a.interval as number })));
        break;
      }
      case 'UnsubscribeOrderBook':
        for (const s of a.symbols as string[]) unsend(`book:${s}`);
        break;
      default:
        throw apiError('ROUTE_NOT_FOUND', `unknown operation ${op}`);
    }
    return { ok: true, ...listSubscriptions(live) };
  }

  return { listSubscriptions, subscribeOp };
}
