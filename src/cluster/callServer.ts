// The owner's side of forwarded calls (docs/cluster.md, Forwarding): the calls other nodes send on
// `tagw.node.<me>.call` run on this node's shards if it owns the key (else notOwner), their replies
// sent in parts when too large for one message (replyParts.ts), and a lapsed node's request to be
// forgotten. Apart from router.ts, which sends this node's own calls; it lends its owner lookup and
// runHere, so a call runs the same way whichever node asked.
import type { Msg, Subscription } from '@nats-io/transport-node';
import { type ApiError, apiError, toWire } from '../errors.js';
import type { Logger } from '../log.js';
import type { CommandName } from '../runtime/protocol.js';
import type { CallOptions } from '../runtime/shardSet.js';
import { errorMessage } from '../util/errorMessage.js';
import type { CallEnvelope, CallReply } from './callForwarder.js';
import type { NatsLink } from './natsLink.js';
import type { OwnerDirectory } from './owners.js';
import type { OwnerStreams } from './ownerStreams.js';
import { NotHeldError } from './moves.js';
import { partSize, ReplyParts, type PartRequest } from './replyParts.js';
import { SUBJECTS } from './subjects.js';
import { decode, encode } from './wireCodec.js';

export interface CallServerOptions {
  nodeId: string;
  link: NatsLink;
  owners: OwnerDirectory;
  log: Logger;
  /** The owner's side of stream commands (its ledger per node). */
  streams: OwnerStreams;
  /** How long a large reply waits for its parts to be fetched. */
  partsTtlMs: number;
  /** The router's owner lookup (the lease store failing behind the cache: a 503). */
  ownerOf: (key: string) => Promise<string | null>;
  /** The router's runHere: a call on this node's shards for `origin`. */
  run: (origin: string, key: string, op: CommandName, args: unknown, opts: CallOptions) => Promise<unknown>;
  /** The router's counters (RouterStats): a call answered here. */
  stats: { served: number };
  /** The router's 503 (counted in its stats). */
  unavailable: (message: string, cause?: unknown) => ApiError;
  /** An owner says it released what this node's sockets held there (the router's rejoinAt). */
  released: (owner: string) => void;
  /** An owner's shard running these accounts died: what this node's sockets hold of them there is
   *  opened again (the router's reopen). */
  reopen: (owner: string, accountIds: string[]) => void;
}

export class CallServer {
  private subs: Subscription[] = [];
  private calls: Subscription | undefined;
  /** Forwarded calls received and not answered yet. */
  private readonly answering = new Set<Promise<void>>();
  /** Large replies waiting for their parts to be fetched. */
  private readonly parts: ReplyParts;

  constructor(private readonly opts: CallServerOptions) {
    this.parts = new ReplyParts(opts.partsTtlMs);
  }

  /** Starts answering the calls other nodes forward here. */
  serve(): void {
    if (this.subs.length) return;
    const nc = this.opts.link.nc;
    // Exactly one process of this NODE_ID gets each call (a queue group per id): two may listen for a
    // while (a restarted process beside a frozen or not yet exited one), and the one without the lease
    // answers "not held here" only for a call it alone got and did not run, so the caller's re-send
    // cannot run it a second time at the other (an order without clientOrderId placed twice).
    const call = SUBJECTS.nodeCall(this.opts.nodeId);
    this.calls = nc.subscribe(call, {
      queue: call,
      callback: (err, msg) => {
        if (err) return this.opts.log.error('forwarded-call subscription ended', { err: errorMessage(err) });
        const answered = this.answer(msg).finally(() => this.answering.delete(answered));
        this.answering.add(answered);
      },
    });
    this.subs.push(this.calls);
    // A node back from a lapse: what its sockets held here goes (as for a departed node) before it replays them.
    // Every process of the id (no queue group): forgetting is idempotent, and the one holding the
    // leases, whichever it is, must drop what the node held.
    this.subs.push(nc.subscribe(SUBJECTS.nodeForget(this.opts.nodeId), {
      callback: (err, msg) => {
        if (err) return;
        void this.opts.streams.forgetAsked(msg.string()).finally(() => msg.respond('ok'));
      },
    }));
    // Every process of the id: the one whose sockets' holds are meant asks to be forgotten and reopens
    // them (one without holds there does nothing).
    this.subs.push(nc.subscribe(SUBJECTS.nodeReleased(this.opts.nodeId), {
      callback: (err, msg) => {
        if (!err) this.opts.released(msg.string());
      },
    }));
    // Every process of the id: only the one whose sockets hold the accounts' streams there has anything to open.
    this.subs.push(nc.subscribe(SUBJECTS.nodeReopen(this.opts.nodeId), {
      callback: (err, msg) => {
        if (err) return;
        try {
          const { owner, accounts } = msg.json<{ owner: string; accounts: string[] }>();
          if (typeof owner === 'string' && Array.isArray(accounts)) this.opts.reopen(owner, accounts.filter((a) => typeof a === 'string'));
        } catch (e) {
          this.opts.log.warn('malformed stream reopen notice', { err: errorMessage(e) });
        }
      },
    }));
    // Every process of the id (no queue group): only the one that answered the call keeps its parts,
    // and it alone answers (another process of the id, a twin, stays silent on an id not its own).
    this.subs.push(nc.subscribe(SUBJECTS.nodePart(this.opts.nodeId), {
      callback: (err, msg) => {
        if (err) return this.opts.log.error('reply-part subscription ended', { err: errorMessage(err) });
        let chunk: Uint8Array | null = null;
        try {
          const req = msg.json<PartRequest>();
          if (!this.parts.mine(req?.id)) return;
          chunk = this.parts.take(req);
        } catch {
          chunk = null;
        }
        try {
          msg.respond(chunk ?? new Uint8Array(0));
        } catch (e) {
          this.opts.log.warn('could not send a reply part', { err: errorMessage(e) });
        }
      },
    }));
  }

  /** The owner's side: run a forwarded call on its own shards, if it owns the key. */
  private async answer(msg: Msg): Promise<void> {
    let reply: CallReply;
    try {
      const env = decode(msg.string()) as CallEnvelope;
      if (typeof env?.key !== 'string' || typeof env.op !== 'string') throw apiError('BAD_REQUEST', 'malformed forwarded call');
      const cached = this.opts.owners.fresh(env.key);
      const owner = cached !== undefined ? cached : await this.opts.ownerOf(env.key);
      if (owner !== this.opts.nodeId) {
        this.opts.streams.interest.dropAccount(env.key);
        reply = { ok: false, notOwner: true, owner };
      } else {
        const opts: CallOptions = env.retry === undefined ? {} : { retryOnRestart: env.retry };
        // A stream command of a node's new process: what its earlier one held here goes first.
        if (env.inc !== undefined && !(await this.opts.streams.supersede(String(env.from), env.inc))) {
          throw this.opts.unavailable(`a stream command of an earlier process of node ${String(env.from)}, which was started again; retry`);
        }
        const result = await this.opts.run(String(env.from), env.key, env.op, env.args, opts);
        const epoch = env.op.startsWith('stream.') ? this.opts.owners.known(env.key)?.epoch : undefined;
        reply = epoch === undefined ? { ok: true, result } : { ok: true, result, epoch };
      }
    } catch (err) {
      // Refused before it ran (handing over, lease lapsed, or a newer process of this id holds it):
      // the caller sends it again, which the queue group makes safe (no other process of the id got it).
      reply = err instanceof NotHeldError ? { ok: false, notOwner: true, owner: null } : { ok: false, error: toWire(err) };
    }
    this.opts.stats.served++;
    let out: Uint8Array | string = encode(reply);
    const size = partSize(this.opts.link.nc.info?.max_payload);
    if (out.length * 3 > size) {
      // Possibly past the server's message limit (UTF-8 is up to 3 bytes a char): measure.
      const bytes = Buffer.from(out, 'utf8');
      out = bytes.length > size ? JSON.stringify({ ok: 'parts', ...this.parts.keep(bytes, size) }) : bytes;
    }
    try {
      if (!msg.respond(out)) this.opts.log.warn('could not answer a forwarded call (no reply subject)');
    } catch (err) {
      // Closed or draining connection: the caller's wait ends with its own bound.
      this.opts.log.warn('could not answer a forwarded call', { op: reply.ok === true ? 'result' : 'error', err: errorMessage(err) });
    }
  }

  /** Takes no more forwarded calls and answers those it has (each, being fenced, "not held here"),
   *  within `limitMs`: a process taken over stops so, since the id's queue group gave those calls to
   *  it alone (unanswered, each would wait the call bound and end in a 503 of unknown outcome). */
  async stopCalls(limitMs: number): Promise<void> {
    const sub = this.calls;
    this.calls = undefined;
    let timer: NodeJS.Timeout | undefined;
    const bound = new Promise<void>((resolve) => (timer = setTimeout(resolve, limitMs)));
    const answered = (async () => {
      // drain, not unsubscribe: the calls nats-server sent before it took the unsubscription still arrive.
      await sub?.drain().catch(() => undefined);
      await Promise.all([...this.answering]);
      await this.opts.link.nc.flush().catch(() => undefined);
    })();
    await Promise.race([answered, bound]);
    clearTimeout(timer);
  }

  /** Stops answering forwarded calls; drops the large replies not fetched yet. */
  close(): void {
    for (const sub of this.subs) if (!sub.isClosed()) sub.unsubscribe();
    this.subs = [];
    this.calls = undefined;
    this.parts.clear();
  }
}
