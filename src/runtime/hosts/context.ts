// What every actor host inside a shard gets: its identity, its own SQLite connection, a logger and
// a way to push events to the main thread.
import type { Logger } from '../../log.js';
import type { Clock } from '../../util/clock.js';
import type { ServerInfo } from '../../market/server.js';
import type { ShardSettings } from '../settings.js';
import type { Db } from '../../store/db.js';
import type { CommitGroup } from '../../store/commitGroup.js';
import type { FullDisk } from '../../store/fullDisk.js';
import type { ArgsOf, CommandName, ResultOf, ShardEvent } from '../protocol.js';
import type { AccountRegistry } from './accountRegistry.js';

export interface ShardContext {
  shard: number;
  shards: number;
  db: Db;
  log: Logger;
  settings: ShardSettings;
  /** Now, for every host of the shard (systemClock in a worker; tests pass their own). */
  clock: Clock;
  /** Now on the market: the embedded simulator's clock (SIM_START: `clock` plus an offset kept in
   *  DATA_DIR), for what is compared with tick, bar and deal times. Absent: `clock` (marketClockOf). */
  marketClock?: Clock;
  emit(ev: ShardEvent): void;
  /** True when `key` hashes to this shard (and, in cluster mode, this node holds its lease). */
  owns(key: string): boolean;
  /** Cluster mode: accounts run only while their lease is held here (owns() says which). */
  leased?: boolean;
  /** Open while the shard works through a batch of requests: bookings then share one commit. */
  commitGroup?: CommitGroup;
  /** The shard cannot go on from its memory (the simulator's store failed a commit, so the memory
   *  is ahead of the disk): it stops, and its supervisor restarts it from SQLite. Absent: the
   *  store only refuses writes (tests of a host in their own thread restart it themselves). */
  fatal?(err: unknown): void;
  /** The shard's background writes that meet a full DATA_DIR wait for room (src/store/fullDisk.ts).
   *  Absent: the first host that needs one makes it from `log` (fullDiskOf). */
  fullDisk?: FullDisk;
  /** Set by the account host when it is created (it is first in HOST_FACTORIES); other hosts use it lazily. */
  accounts?: AccountRegistry;
}

export type Handlers = { [C in CommandName]?: (args: ArgsOf<C>) => ResultOf<C> | Promise<ResultOf<C>> };

export interface ActorHost {
  handlers: Handlers;
  /** Restarts the actors this shard owns from SQLite; returns how many. */
  rehydrate(): number;
  actorCount(): number;
  stop(): void;
  /** Cluster mode: drop these accounts' actors (their lease went to another node); returns how many. */
  release?(accountIds: ReadonlySet<string>): number;
}

/** The market's now of a shard (ShardContext.marketClock, or its clock). */
export function marketClockOf(ctx: Pick<ShardContext, 'clock' | 'marketClock'>): Clock {
  return ctx.marketClock ?? ctx.clock;
}

/** The market's now for a server: the shard's, plus the offset a bridged simulator started at a
 *  fixed instant reported (ServerInfo.clockOffsetMs). */
export function marketNowOf(ctx: Pick<ShardContext, 'clock' | 'marketClock'>, server: ServerInfo): number {
  return marketClockOf(ctx).now() + (server.clockOffsetMs ?? 0);
}
