// The market data of a gateway session's pushes: each tick or candle of the account goes to the
// subscription child of its key (quote:, book:, ohlc), which decides when to push it (its interval);
// a quote is written when pushed, so its ageMs is its age when it leaves.
import { subscriptionKey } from '../../../actors/subscription.js';
import type { BrokerEvents } from '../../broker/types.js';
import { clockFor, type ServerClock } from '../../market/serverClock.js';
import type { Clock } from '../../util/clock.js';
import type { Tick } from '../../market/server.js';
import { candleData, quoteData } from '../frameData.js';
import type { AccountRuntime } from './accountRegistry.js';
import type { GatewayFrameData } from './gatewayCommands.js';

/** A quote frame not written yet: a subscription with an interval may hold it back, and its ageMs
 *  must be its age when it leaves, so it is serialized by the push, not on arrival. */
/** `offsetMs`: the server's ServerInfo.clockOffsetMs (its ticks' clock from the shard's market clock). */
export interface HeldQuote { type: 'QUOTE'; tick: Tick; clock: ServerClock; offsetMs: number }

/** The subscription children of a session actor, by key. */
export type SessionChildren = Record<string, { send(e: unknown): void } | undefined>;

/** The clock of the account's server; undefined while its connection has not learned it (never
 *  a placeholder's UTC: frames are only pushed from a connected connection anyway). */
const clockOf = (rt: AccountRuntime): ServerClock | undefined => (rt.serverKnown ? clockFor(rt.server) : undefined);

/** A tick to the session's quote and book subscriptions of its symbol, if it has them. */
export function feedTick(children: SessionChildren, rt: AccountRuntime, tick: Tick): void {
  const q = children[`quote:${tick.symbol}`];
  const b = children[`book:${tick.symbol}`];
  const clock = (q || b) && clockOf(rt);
  if (!clock) return;
  // Written when pushed (see HeldQuote), so ageMs is the age at the push.
  if (q) q.send({ type: 'data', frame: { type: 'QUOTE', tick, clock, offsetMs: rt.server.clockOffsetMs ?? 0 } satisfies HeldQuote });
  if (b) b.send({ type: 'data', frame: { type: 'BOOK', json: bookJson(tick, clock) } satisfies GatewayFrameData });
}

/** A candle to the session's subscription of its symbol and timeframe, if it has one. `firstBar`:
 *  the bar open first seen per subscription, which was joined mid-way (partial). */
export function feedCandle(children: SessionChildren, firstBar: Map<string, number>, candle: BrokerEvents['candle']): void {
  const key = subscriptionKey({ kind: 'ohlc', symbol: candle.symbol, timeframe: candle.timeframe });
  const child = children[key];
  if (!child) return;
  let first = firstBar.get(key);
  if (first === undefined) firstBar.set(key, (first = candle.candle.time));
  const json = candleData(candle, candle.candle.time === first);
  child.send({ type: 'data', frame: { type: 'CANDLE', json } satisfies GatewayFrameData, urgent: candle.closed });
}

/** The frame a subscription child pushes, as it leaves: a held quote is written now. */
export function pushedFrame(f: GatewayFrameData | HeldQuote, clock: Clock): GatewayFrameData {
  return 'tick' in f ? { type: 'QUOTE', json: quoteData(f.tick, f.clock, clock.now() + f.offsetMs) } : f;
}

/** Order book frame data. The broker interface carries top of book only, so depth is one level. */
function bookJson(t: Tick, clock: ServerClock): string {
  const s = clock.toServer(t.timeMsc);
  return JSON.stringify({
    symbol: t.symbol,
    bids: [{ price: t.bid, volume: t.volume ?? 0 }],
    asks: [{ price: t.ask, volume: t.volume ?? 0 }],
    time: new Date(s).toISOString().slice(0, 23), timeMsc: s,
    timeUtc: new Date(t.timeMsc).toISOString(), timeMscUtc: t.timeMsc,
  });
}
