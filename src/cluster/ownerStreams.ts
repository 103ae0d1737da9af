// The owner's side of stream commands from several nodes (docs/cluster.md, Forwarding): every node's
// hub counts its own sockets and sends the owner's shard opens, closes, subs and unsubs as if alone;
// here they go through a ledger per node (streamInterest.ts), so one node's unsub or close never cuts
// off another's sockets, and a node that left (or was started again) has what it held released. A
// node released while it may live on (judged departed: frozen past its lease) has its stream
// commands refused until it asks to be forgotten and opens again what it holds (releasedError).
// When a shard dies, its new thread holds nothing: the ledger drops what every node held of its
// accounts and tells the other nodes, which open again what they hold (shardDied).
import { apiError, ApiError } from '../errors.js';
import type { Logger } from '../log.js';
import { NO_OPEN_STREAM } from '../runtime/hosts/streamCommands.js';
import type { ArgsOf, CommandName, ResultOf } from '../runtime/protocol.js';
import type { CallOptions } from '../runtime/shardSet.js';
import { errorMessage } from '../util/errorMessage.js';
import { StreamInterest } from './streamInterest.js';

/** The node's own shards (the router's LocalShards). */
interface Shards {
  call<C extends CommandName>(key: string, op: C, args: ArgsOf<C>, opts?: CallOptions): Promise<ResultOf<C>>;
}

/** The refusal of a stream command from a node whose holds `owner` released while it may live on:
 *  the stream host's NOT_FOUND (what its socket would get), naming the owner for the node's router. */
export function releasedError(owner: string): ApiError {
  return apiError('NOT_FOUND', NO_OPEN_STREAM, { details: { releasedBy: owner } });
}

/** The owner that refused a stream command with releasedError, if `err` is that. */
export function releasedBy(err: unknown): string | undefined {
  const by = err instanceof ApiError ? err.details?.['releasedBy'] : undefined;
  return typeof by === 'string' ? by : undefined;
}

export class OwnerStreams {
  /** What each node's sockets hold of the streams of accounts owned here. */
  readonly interest: StreamInterest;
  /** The latest incarnation of each node whose stream commands reached this one (or that the node
   *  list showed), and the release of its earlier process's holds while that runs. */
  private readonly incarnations = new Map<string, { inc: number; forgetting: Promise<void> }>();
  /** Nodes whose holds were released here when they were judged departed (forgetNode) and which
   *  have not asked to be forgotten since: one may live on (frozen past its lease, then resumed) with
   *  its sockets open, its hub counting opens this ledger no longer has, so its closes would take a
   *  later socket's open (or another node's). Their stream commands are refused (releasedError)
   *  until the node asks (AccountRouter.resyncAt: forgetAsked), then opens again what it holds. */
  private readonly lapsed = new Set<string>();
  /** An account's stream was opened again at this owner's shard after every node had closed it (or
   *  been forgotten): what happened at the broker meanwhile was not emitted. The stream edge resyncs. */
  onReopened: (accountId: string) => void = () => {};
  /** A node judged departed had holds here, released now: it is told (it may live on, frozen past
   *  its lease; then its own rejoin asks too, and this notice may be lost). */
  onReleased: (nodeId: string) => void = () => {};
  /** The shard running these accounts died while `nodeId`'s sockets held their streams here: its
   *  new thread holds none of them, nor does the ledger any more; the node is told, and opens again
   *  what it still holds of them (AccountRouter.reopen). */
  onLost: (nodeId: string, accountIds: string[]) => void = () => {};

  constructor(private readonly nodeId: string, private readonly shards: Shards, private readonly log: Logger) {
    this.interest = new StreamInterest(nodeId);
  }

  /** A stream command of `origin` (this node, or the node that forwarded it) on this node's shards. */
  async run(origin: string, key: string, op: CommandName, args: unknown, opts: CallOptions): Promise<unknown> {
    const shards = this.shards;
    if (this.lapsed.has(origin)) throw releasedError(this.nodeId);
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
        // Not an open of this node's here (released before, or the account came here after): the
        // shard's count of opens is other sockets'.
        if (!(this.interest.holding(origin, a.accountId)?.opens)) return { ok: true };
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
    // First heard of: nothing of it here yet (its commands all carry its incarnation). A new process
    // holds nothing of the earlier one's: its commands run.
    this.lapsed.delete(node);
    const forgetting = known ? this.release(node).then(() => undefined) : Promise.resolve();
    this.incarnations.set(node, { inc, forgetting });
    await forgetting;
    return true;
  }

  /** A shard of this node died (ShardSet.onDeath; `lost`: the accounts it ran): the ledger holds
   *  nothing of their streams, as the new thread, and every other node that held some is told
   *  (onLost). Nothing goes to the shard: the closes and unsubs of the dead thread's opens would take
   *  the new thread's. This node's own holds are its router's (AccountRouter.shardDied). */
  shardDied(lost: (accountId: string) => boolean): void {
    for (const [node, accountIds] of this.interest.shardLost(lost)) if (node !== this.nodeId) this.onLost(node, accountIds);
  }

  /** A node left the cluster (its heartbeat expired) with sockets on accounts owned here: release
   *  what its sockets held, as its hub would have. Until it asks to be forgotten (forgetAsked), its
   *  stream commands are refused: it may only have been frozen, and its hub still counts them. */
  async forgetNode(nodeId: string): Promise<void> {
    if (nodeId === this.nodeId) return;
    this.lapsed.add(nodeId);
    if (await this.release(nodeId)) this.onReleased(nodeId);
  }

  /** The node asks (back from a lapse, or refused): what it held here goes, and its stream commands
   *  run again (it opens again what its sockets hold right after). */
  async forgetAsked(nodeId: string): Promise<void> {
    this.lapsed.delete(nodeId);
    await this.release(nodeId);
  }

  /** Releases what `nodeId`'s sockets held here; whether they held anything. */
  private async release(nodeId: string): Promise<boolean> {
    const held = this.interest.forgetNode(nodeId);
    for (const f of held) {
      try {
        for (const u of f.unsubs) await this.shards.call(f.accountId, 'stream.unsub', { accountId: f.accountId, ...u });
        for (let i = 0; i < f.closes; i++) await this.shards.call(f.accountId, 'stream.close', { accountId: f.accountId });
      } catch (err) {
        this.log.warn('could not release a departed node\'s stream', { node: nodeId, accountId: f.accountId, err: errorMessage(err) });
      }
    }
    return held.length > 0;
  }
}
