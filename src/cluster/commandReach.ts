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
  /** Touches no broker (the shard's own state, the node's lease machinery, shard-wide simulator
   *  faults addressed by shard index): runs as it is. */
  | 'local';

type ReachTable = { readonly [C in CommandName]: Reach | ((args: ArgsOf<C>) => Reach) };

export const COMMAND_REACH: ReachTable = {
  'shard.ping': 'local',
  'shard.adopt': 'local',
  'shard.release': 'local',
  'seat.create': 'local',
  'seat.get': 'local',
  'seat.remove': 'local',
  'sim.faults.set': 'local',
  'sim.faults.clear': 'local',
  'sim.faults.list': 'local',
  // Stops the account's actors; the lease loss itself does that on a stale owner.
  'account.remove': 'local',
  'session.closeAccount': 'local',
  // Starts the account's connection when it is not running yet (a login).
  'account.status': 'broker',
  'account.bind': 'broker',
  'account.op': 'broker',
  'account.upgrade': 'broker',
  'account.check': 'broker',
  'account.fault': 'broker',
  'account.trade': 'trade',
  'session.connect': 'broker',
  // Gateway sessions carry both families' operations: the trading ones are orders.
  'session.op': (a) => (GATEWAY_TRADE_OPS.has(a.op) ? 'trade' : 'broker'),
  'stream.open': 'broker',
  'stream.snapshot': 'broker',
  'stream.sub': 'broker',
  'stream.unsub': 'broker',
  'stream.close': 'broker',
};

export function reachOf<C extends CommandName>(op: C, args: ArgsOf<C>): Reach {
  const r = COMMAND_REACH[op] as Reach | ((a: ArgsOf<C>) => Reach) | undefined;
  // A command unknown at run time (a forwarded call from a newer node): the shard refuses it, but
  // not before the lease check.
  if (r === undefined) return 'broker';
  return typeof r === 'function' ? r(args) : r;
}
