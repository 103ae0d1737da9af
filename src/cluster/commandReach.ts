// Which shard commands can reach an account's broker, and which of those trade: what the owner
// checks before running one (fencedShards.ts). The table is typed over the whole CommandMap, so a
// command added anywhere (declaration merging) does not compile until it is classified here.
import { GATEWAY_TRADE_OPS } from '../runtime/brokerFailures.js';
import type { ArgsOf, CommandName } from '../runtime/protocol.js';

export type Reach =
  /** Places, changes or closes an order: lease check and a fenced idempotency claim in PostgreSQL. */
  | 'trade'
  /** Can make a broker call (a read, a login, a subscription): the lease check. */
  | 'broker'
  /** Changes the account's state outside an order (its login re-bound, its connection upgraded, a
   *  gateway session made, subscribed or ended): the lease check, then the same epoch check in
   *  PostgreSQL a trade's claim makes, so an owner whose lease moved on there (taken back by a newer
   *  process of its NODE_ID, or taken over while it was slow) runs none of it. */
  | 'change'
  /** Touches no broker (the shard's own state, the node's lease machinery, shard-wide simulator
   *  faults addressed by shard index): runs as it is. */
  | 'local';

/** Gateway session operations that change the session's record: the (un)subscribes and Disconnect. */
export const SESSION_CHANGES = /^((Un)?[Ss]ubscribe|Disconnect$)/;

type ReachTable = { readonly [C in CommandName]: Reach | ((args: ArgsOf<C>) => Reach) };

export const COMMAND_REACH: ReachTable = {
  'shard.ping': 'local',
  'shard.adopt': 'local',
  'shard.release': 'local',
  'seat.create': 'local',
  'seat.get': 'local',
  'seat.remove': 'local',
  'seat.prepared': 'local',
  'sim.faults.set': 'local',
  'sim.faults.clear': 'local',
  'sim.faults.list': 'local',
  // A shard's own simulated copy of a login let go (addressed by shard index; bridge mode holds none).
  'sim.release': 'local',
  // Stops the account's actors; the lease loss itself does that on a stale owner.
  'account.remove': 'local',
  'session.closeAccount': 'local',
  // Starts the account's connection when it is not running yet (a login).
  'account.status': 'broker',
  'account.bind': 'change',
  'account.op': 'broker',
  'account.upgrade': 'change',
  'account.check': 'broker',
  'account.fault': 'broker',
  // A login at the broker on a connection of its own: binds nothing.
  'account.probe': 'broker',
  'account.faults': 'broker',
  'account.faults.clear': 'broker',
  'account.trade': 'trade',
  // Asks the broker about an order an earlier owner sent: a read, sends nothing.
  'account.lookupTrade': 'broker',
  'session.connect': 'change',
  // Gateway sessions carry both families' operations: the trading ones are orders.
  'session.op': (a) => (GATEWAY_TRADE_OPS.has(a.op) ? 'trade' : a.op !== 'SubscribedSymbols' && SESSION_CHANGES.test(a.op) ? 'change' : 'broker'),
  'stream.open': 'broker',
  'stream.snapshot': 'broker',
  'stream.sub': 'broker',
  'stream.unsub': 'broker',
  'stream.close': 'broker',
  // A node's near sources (nearSources.ts) go to its own shards only, for accounts running there.
  'stream.source': 'broker',
  'stream.unsource': 'broker',
  'stream.quote': 'broker',
  'stream.unquote': 'broker',
  'stream.quoteSessions': 'local',
};

export function reachOf<C extends CommandName>(op: C, args: ArgsOf<C>): Reach {
  const r = COMMAND_REACH[op] as Reach | ((a: ArgsOf<C>) => Reach) | undefined;
  // A command unknown at run time (a forwarded call from a newer node): the shard refuses it, but
  // not before the lease check.
  if (r === undefined) return 'broker';
  return typeof r === 'function' ? r(args) : r;
}
