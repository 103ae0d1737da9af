// The owner's side of stream commands from several nodes (docs/cluster.md, Forwarding): every node's
// hub counts its own sockets and sends the owner's shard opens, closes, subs and unsubs as if alone;
// here they go through a ledger per node (streamInterest.ts), so one node's unsub or close never cuts
// off another's sockets, and a node that left (or was started again) has what it held released.
import type { Logger } from '../log.js';
import type { ArgsOf, CommandName, ResultOf } from '../runtime/protocol.js';
import type { CallOptions } from '../runtime/shardSet.js';
import { errorMessage } from '../util/errorMessage.js';
import { StreamInterest } from './streamInterest.js';

/** The node's own shards (the router's LocalShards). */
interface Shards {
  call<C extends CommandName>(key: string, op: C, args: ArgsOf<C>, opts?: CallOptions): Promise<ResultOf<C>>;
}

export class OwnerStreams {
  /** What each node's sockets hold of the streams of accounts owned here. */
  readonly interest: StreamInterest;
  /** The latest incarnation of each node whose stream commands reached this one (or that the node
   *  list showed), and the release of its earlier process's holds while that runs. */
  private readonly incarnations = new Map<string, { inc: number; forgetting: Promise<void> }>();
  /** An account's stream was opened again at this owner's shard after every node had closed it (or
   *  been forgotten): what happened at the broker meanwhile was not emitted. The stream edge resyncs. */
  onReopened: (accountId: string) => void = () => {};

  constructor(private readonly nodeId: string, private readonly shards: Shards, private readonly log: Logger) {
    this.interest = new StreamInterest(nodeId);
  }

  /** A stream command of `origin` (this node, or the node that forwarded it) on this node's shards. */
  async run(origin: string, key: string, op: CommandName, args: unknown, opts: CallOptions): Promise<unknown> {
    const shards = this.shards;
    switch (op) {
      case 'stream.open': {
        const r = await shards.call(key, op, args as ArgsOf<'stream.open'>, opts);
        // In the reply's turn: before any event the reopened shard stream sends.
        if (this.interest.open(origin, (args as ArgsOf<'stream.open'>).accountId)) this.onReopened(key);
        return r;
      }
      case 'stream.sub': {
        const a = args as ArgsOf<'stream.sub'>;
        this.interest.sub(origin, a.accountId, a.symbol, a.timeframes);
        return shards.call(key, op, a, opts);
      }
      case 'stream.unsub': {
        const a = args as ArgsOf<'stream.unsub'>;
        const u = this.interest.unsub(origin, a.accountId, a.symbol, a.timeframes);
        return u ? shards.call(key, op, { accountId: a.accountId, ...u }, opts) : { ok: true };
      }
      case 'stream.close': {
        const a = args as ArgsOf<'stream.close'>;
        for (const u of this.interest.close(origin, a.accountId)) await shards.call(key, 'stream.unsub', { accountId: a.accountId, ...u });
        return shards.call(key, op, a, opts);
      }
      default:
        return shards.call(key, op, args as never, opts);
    }
  }

  /**
   * `node` runs as incarnation `inc` (its process's start: cluster_nodes, or its stream commands). A
   * later one than known: the node was started again under its id, within the lease, so never judged
   * departed; what its earlier process's sockets held of the accounts owned here is released (as for
   * a departed node) before any command of the new one runs. Resolves false for an earlier one than
   * known (a stray command of the dead process: not run).
   */
  async supersede(node: string, inc: number | undefined): Promise<boolean> {
    if (inc === undefined || node === this.nodeId) return true;
    const known = this.incarnations.get(node);
    if (known && inc <= known.inc) {
      await known.forgetting;
      return inc === known.inc;
    }
    // First heard of: nothing of it here yet (its commands all carry its incarnation).
    const forgetting = known ? this.forgetNode(node) : Promise.resolve();
    this.incarnations.set(node, { inc, forgetting });
    await forgetting;
    return true;
  }

  /** A node left the cluster (its heartbeat expired) with sockets on accounts owned here: release
   *  what its sockets held, as its hub would have. */
  async forgetNode(nodeId: string): Promise<void> {
    for (const f of this.interest.forgetNode(nodeId)) {
      try {
        for (const u of f.unsubs) await this.shards.call(f.accountId, 'stream.unsub', { accountId: f.accountId, ...u });
        for (let i = 0; i < f.closes; i++) await this.shards.call(f.accountId, 'stream.close', { accountId: f.accountId });
      } catch (err) {
        this.log.warn('could not release a departed node\'s stream', { node: nodeId, accountId: f.accountId, err: errorMessage(err) });
      }
    }
  }
}
