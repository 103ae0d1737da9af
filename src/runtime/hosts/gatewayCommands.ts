// Shard commands of the gateway session host (issue 5), merged into the runtime's CommandMap.
// Types only, shared by the HTTP routes (main thread) and the host (shard).
import type { Platform } from '../../market/server.js';
import type { EventOf } from '../protocol.js';

export interface SessionConnectArgs {
  accountId: string;
  customerId: string;
  platform: Platform;
  /** A fresh candidate: used only when no session of the account is live. */
  handleHash: string;
  handleSealed: string;
  /** How long to wait for the broker connection before answering (ms). */
  waitMs: number;
  /** End the live session first (its sealed handle no longer opens: the secret key was reset). */
  renew?: boolean;
}

export interface SessionConnectResult {
  /** The handle of the live session (sealed; the main thread opens it). */
  handleSealed: string;
  handleHash: string;
  fresh: boolean;
  connectedAt: number;
  /** The platform (dialect) of the session: the account's as its broker server reported it. */
  platform: Platform;
}

export interface SessionOpArgs {
  accountId: string;
  handleHash: string;
  op: string;
  args: Record<string, unknown>;
  /** The caller's key is read-only: a Subscribe* operation may add subscriptions to the session, not
   *  change the interval of one it has (403 READ_ONLY_KEY; the session is shared with the keys that
   *  trade). The Un* operations and a replacing SubscribeMany are refused before the shard. */
  addOnly?: boolean;
  /** Cluster mode, a trading op: the id its fenced claim in PostgreSQL is recorded under (made on
   *  the owner when absent; the gateway routes take none from clients). The same call repeated
   *  with it replays the recorded answer. The shard ignores it. */
  clientOrderId?: string;
}

/** ShardEvent kinds of the gateway socket: a frame for a handle's /ws sockets, or its end; in cluster
 *  mode also the death of the shard running the session on the account's owner (`restarted`). */
export const GATEWAY_EVENT = { frame: 'gw.frame', end: 'gw.end', restarted: 'gw.restarted' } as const;
export interface GatewayFrameData {
  type: 'QUOTE' | 'CANDLE' | 'BOOK';
  /** JSON text of the frame's data, serialized once in the shard. */
  json: string;
}

declare module '../protocol.js' {
  interface CommandMap {
    'session.connect': { args: SessionConnectArgs; result: SessionConnectResult };
    'session.op': { args: SessionOpArgs; result: unknown };
    /** Ends the live session of an account (its seat was removed), as Disconnect does. */
    'session.closeAccount': { args: { accountId: string }; result: { closed: boolean } };
  }
  interface ShardEventMap {
    /** key: the session's handle hash. */
    'gw.frame': GatewayFrameData;
    /** The session ended (not through Disconnect): its handle is gone. */
    'gw.end': null;
    /** Cluster mode, not from a shard: the account's owner says the shard running the session died
     *  there (GatewaySocket.shardDied publishes it on the relay): the other nodes' /ws sockets of the
     *  handle are closed with 4011 as the owner's are. A node of a build before it has no receiver for
     *  the kind: its stream hub finds no account under a handle hash and drops it. */
    'gw.restarted': null;
  }
}

/** The events the gateway socket (/ws) receives. */
export type GatewayEvent = EventOf<(typeof GATEWAY_EVENT)[keyof typeof GATEWAY_EVENT]>;
