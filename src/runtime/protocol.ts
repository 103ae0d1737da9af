import type { MessagePort } from 'node:worker_threads';
// The main <-> shard protocol. Commands are request/reply records keyed by a numeric id and sent
// over a dedicated MessagePort per shard, several per postMessage (batched per microtask), so a
// burst of requests costs one structured-clone round trip instead of one per request.
import type { WireError } from '../errors.js';
import type { ShardSettings } from './settings.js';

/**
 * Every command a shard understands: its argument and result types. Feature modules extend this
 * map (declaration merging from their own files keeps this one small).
 */
export interface CommandMap {
  'shard.ping': { args: Record<string, never>; result: { shard: number; actors: number; pid: number } };
  'seat.create': { args: { seatId: string; readyAt: number }; result: SeatView };
  'seat.get': { args: { seatId: string }; result: SeatView | null };
  /** Stops the actor of a removed seat (its seat_state row stays, as history). */
  'seat.remove': { args: { seatId: string }; result: { stopped: boolean } };
  /** The seat's server is built now, whatever time its build was promised for: a seat still
   *  building turns ACTIVE (its actor's `seat.prepared`); null for an unknown seat. No HTTP route
   *  sends it: tests finish a long build on demand with it instead of racing a short one. */
  'seat.prepared': { args: { seatId: string }; result: SeatView | null };
}

export interface SeatView { seatId: string; status: 'BUILDING_SERVER' | 'ACTIVE'; readyAt: number }

export type CommandName = keyof CommandMap;
export type ArgsOf<C extends CommandName> = CommandMap[C]['args'];
export type ResultOf<C extends CommandName> = CommandMap[C]['result'];

export interface RequestMsg { id: number; op: CommandName; args: unknown }
export type ReplyMsg = { id: number; ok: true; result: unknown } | { id: number; ok: false; error: WireError };

/**
 * Every event a shard pushes without a request (ticks, account events), by kind: its data. Feature
 * modules extend this map (declaration merging, as CommandMap) in the same files as their commands:
 * hosts/accountCommands.ts, hosts/gatewayCommands.ts, hosts/streamCommands.ts.
 */
export interface ShardEventMap {}
export type ShardEventKind = keyof ShardEventMap;
/** One pushed event: `kind` tells the type of `data`, so the receiver narrows with a switch, no cast. */
export type ShardEvent = { [K in ShardEventKind]: { kind: K; key: string; data: ShardEventMap[K] } }[ShardEventKind];
/** The events of some kinds, e.g. `EventOf<'gw.frame' | 'gw.end'>`. */
export type EventOf<K extends ShardEventKind> = Extract<ShardEvent, { kind: K }>;

export type MainToShard = { t: 'req'; batch: RequestMsg[] } | { t: 'stop' };
export type ShardToMain = { t: 'rep'; batch: ReplyMsg[] } | { t: 'ev'; batch: ShardEvent[] } | { t: 'ready'; actors: number };

export interface ShardInit {
  shard: number;
  shards: number;
  dataDir: string;
  /** Settings a shard needs, plain data (cloned into the worker). */
  settings: ShardSettings;
  port: MessagePort;
  /** Cluster mode: the accounts this node holds leases for (the shard runs only these, and those it
   *  adopts later: ownershipCommands.ts). Absent on a single node: the shard runs every account that
   *  hashes to it. */
  owned?: string[];
}

/** FNV-1a: stable across processes and restarts, so an account always lands on the same shard. */
export function shardOf(key: string, shards: number): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) {
    h ^= key.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0) % shards;
}
