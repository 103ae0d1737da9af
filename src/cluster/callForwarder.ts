// The asking side of a forwarded call (docs/cluster.md, Forwarding): one try at the account's owner
// over NATS through the router's reply inbox, its reply read (fetched in parts when large), and the
// calls left waiting at an owner the account moved away from, or across a NATS outage, ended. Apart
// from router.ts, which decides where a call goes (which owner, waits, redirects) and has no wire.
import type { Msg } from '@nats-io/transport-node';
import { ApiError, fromWire, type WireError } from '../errors.js';
import type { CommandName } from '../runtime/protocol.js';
import type { Alive } from './liveness.js';
import type { NatsLink } from './natsLink.js';
import type { OwnerDirectory, OwnerInfo } from './owners.js';
import { mayRunAgain } from './moves.js';
import { NoReplyError, ReplyInbox } from './replyInbox.js';
import type { PartRequest, PartsHandle } from './replyParts.js';
import { SUBJECTS } from './subjects.js';
import { decode, encode } from './wireCodec.js';

/** A forwarded call, as it travels (JSON, wireCodec); `from`: the node that forwarded it, `inc`: its
 *  incarnation (the process's start, for stream commands). */
export interface CallEnvelope { key: string; op: CommandName; args: unknown; from: string; inc?: number; retry?: boolean }
/** The owner's answer; notOwner: it does not own the key (any more), owner is whom it believes does. */
export type CallReply =
  /** epoch: the owner's lease epoch, on the replies to stream commands (the caller notes where its
   *  sockets' streams are open: a restarted owner's shard must get them again). */
  | { ok: true; result: unknown; epoch?: number }
  | { ok: false; error: WireError }
  | { ok: false; notOwner: true; owner: string | null }
  /** Too large for one message: fetch `parts` parts of the encoded reply (replyParts.ts). */
  | { ok: 'parts'; id: string; parts: number };

/** `late`: the account moved on while the call waited at this owner (`silent`: or the owner stopped
 *  answering on NATS); its reply, if it still comes. */
export type Attempt = { done: true; value: unknown; epoch?: number } | { done: false; notOwner: boolean; late?: Late; silent?: boolean };
export interface Late { owner: string; reply: Promise<Msg> }
/** What a forwarded call waiting for its reply is about; `epoch`: the owner's lease epoch this node
 *  knew when it sent the call (0: none known); `moved`: told when the account moves on (or its owner
 *  fell silent), if the new owner may run the call too (moves.ts); `seen`: waiting at the last
 *  liveness round; `silent`: its owner did not answer one; `crossed`: it was waiting when this node's
 *  NATS connection dropped. */
interface Forwarded { key: string; owner: string; op: CommandName; epoch: number; moved?: (silent?: boolean) => void; seen?: boolean; silent?: boolean; crossed?: boolean }
/** An owner, at the lease epoch this node knew of it. */
export type At = OwnerInfo & { owner: string };

/** The owner's lease epoch as this node knows it (0: unknown, or the cache moved on to another owner). */
export function epochOf(owners: OwnerDirectory, key: string, owner: string): number {
  const k = owners.known(key);
  return k?.owner === owner ? k.epoch : 0;
}

export interface CallForwarderOptions {
  link: NatsLink;
  owners: OwnerDirectory;
  ownerWaitMs: number;
  forwardTimeoutMs: number;
  now: () => number;
  /** The router's counters (RouterStats): a call answered by its owner. */
  stats: { forwarded: number };
  /** The router's 503 (counted in its stats). */
  unavailable: (message: string, cause?: unknown) => ApiError;
  /** Asks whether an owner's process is on NATS (liveness.ts): the owners of calls waiting over a
   *  round are asked each round (`probeEveryMs`); without it, only a move ends such a call early. */
  liveness?: { ask(nodeId: string): Promise<Alive> };
  probeEveryMs?: number;
}

export class CallForwarder {
  /** Where the replies to this node's forwarded calls arrive; each waiting call tagged with its
   *  account, the owner it went to and its op, so a NATS outage or a move can end it. */
  private readonly inbox: ReplyInbox<Forwarded>;
  private readonly offStatus: () => void;
  private readonly probe: NodeJS.Timeout | undefined;
  /** Owners asked and not answered yet. */
  private readonly asking = new Set<string>();
  /** Owners whose last answer was no answer in time: a second in a row makes them silent (a live
   *  owner's event loop may stall past the bound once on a loaded machine). */
  private readonly unanswered = new Set<string>();

  constructor(private readonly opts: CallForwarderOptions) {
    this.inbox = new ReplyInbox<Forwarded>(opts.link.nc, opts.now);
    // NATS dropped with calls in flight: their replies may come after the reconnect, or be lost (the
    // request or the reply inside a nats-server that restarted, or sent before this node subscribed
    // its inbox again). Still down after the owner wait: 503. Back sooner: a call that may run again
    // (a read, an order with a clientOrderId: moves.ts) goes to its owner again at once, which
    // replays it, waits for it or runs it if the first never arrived; the others get the owner wait
    // from the reconnect for their reply, then 503 (the owner is alive and answers liveness, so
    // nothing else would end a call whose reply is gone before its 31 s bound; found by `npm run chaos`).
    this.offStatus = opts.link.onStatus((up) => {
      if (up) {
        const crossed = this.inbox.waitingIds((f) => {
          if (f.crossed) f.moved?.();
          return f.crossed === true;
        });
        if (crossed.length === 0) return;
        setTimeout(() => {
          this.inbox.abort(crossed, (f) => this.opts.unavailable(`the connection to the cluster's messaging (NATS) dropped while ${f.op} was at the owner, and no answer came within the owner wait after it was back; its outcome is unknown`));
        }, opts.ownerWaitMs).unref();
        return;
      }
      const waiting = this.inbox.waitingIds((f) => (f.crossed = true));
      if (waiting.length === 0) return;
      setTimeout(() => {
        if (this.opts.link.up) return; // the reconnect's own wait ends them
        this.inbox.abort(waiting, () => this.opts.unavailable('the connection to the cluster\'s messaging (NATS) was lost during the call; its outcome is unknown'));
      }, opts.ownerWaitMs).unref();
    });
    const { liveness } = opts;
    if (liveness) this.probe = setInterval(() => this.askOwners(liveness), opts.probeEveryMs ?? 1_000).unref();
  }

  /** One try at the owner: its answer, or why there was none to be had. */
  async forward(owner: string, env: CallEnvelope): Promise<Attempt> {
    if (!this.opts.link.up) throw this.opts.unavailable('the cluster\'s messaging (NATS) is unreachable from this node; retry');
    let msg: Msg;
    try {
      const tag: Forwarded = { key: env.key, owner, op: env.op, epoch: epochOf(this.opts.owners, env.key, owner) };
      const reply = this.inbox.request(SUBJECTS.nodeCall(owner), encode(env), this.opts.forwardTimeoutMs, tag);
      if (!mayRunAgain(env.op, env.args, env.retry)) msg = await reply;
      else {
        // Not Promise.race: one promise fewer on the forwarding path.
        const first = await new Promise<Msg | boolean>((resolve, reject) => {
          tag.moved = (silent) => resolve(silent === true);
          reply.then(resolve, reject);
        });
        if (typeof first === 'boolean') {
          reply.catch(() => undefined); // ended by the stranded call's abort unless awaited
          return { done: false, notOwner: false, late: { owner, reply }, ...(first ? { silent: true } : {}) };
        }
        msg = first;
      }
    } catch (err) {
      if (err instanceof ApiError) throw err;
      // No responders: the owner is not listening (stopped, died, restarting); wait for the next.
      if (err instanceof NoReplyError && err.reason === 'noResponders') return { done: false, notOwner: false };
      if (err instanceof NoReplyError && err.reason === 'timeout') {
        throw this.opts.unavailable(`the node owning account ${env.key} did not answer ${env.op} in time; its outcome is unknown`);
      }
      throw this.opts.unavailable(`the cluster's messaging (NATS) failed during ${env.op}; retry`, err);
    }
    return this.reply(owner, msg);
  }

  /** The old owner's answer; else (none within the owner wait, or not held) the new owner's `uncertain`. */
  async lateAnswer(late: Late, uncertain: ApiError): Promise<unknown> {
    const msg = await late.reply.catch(() => undefined);
    const a = msg && (await this.reply(late.owner, msg));
    if (a?.done) return a.value;
    throw uncertain;
  }

  /** A node SIGKILLed a moment ago may still get a request (nats-server routes to its connection
   *  until it notices the close) and never answer. Once another node holds the account (or the same
   *  node id again, restarted, at a later epoch), the old one has the owner wait to answer the calls
   *  it has (a live one finishing a slow call still does), then 503. */
  movedWhileAway(accountId: string, at: At): void {
    const stranded = this.inbox.waitingIds((f) => {
      if (f.key !== accountId || (f.owner === at.owner && f.epoch >= at.epoch)) return false;
      // A call the new owner may run too goes there now (the old owner's answer then only counts if
      // the new one found its claim: lateAnswer). Not on an epoch never known: maybe no move at all.
      if (f.owner !== at.owner || f.epoch > 0) f.moved?.();
      return true;
    });
    if (stranded.length === 0) return;
    setTimeout(() => {
      this.inbox.abort(stranded, (f) => this.opts.unavailable(`account ${f.key} moved to another node while ${f.op} was at the old one, which did not answer; its outcome is unknown`));
    }, this.opts.ownerWaitMs).unref();
  }

  /** Each round: the owners of calls waiting since the last one are asked whether they are on NATS;
   *  nobody listening, or no answer twice in a row, makes one silent. */
  private askOwners(liveness: { ask(nodeId: string): Promise<Alive> }): void {
    const owners = new Set<string>();
    this.inbox.waitingIds((f) => {
      if (f.seen && !f.silent && !this.asking.has(f.owner)) owners.add(f.owner);
      f.seen = true;
      return false;
    });
    // In a row: an owner not asked this round starts afresh.
    for (const o of this.unanswered) if (!owners.has(o) && !this.asking.has(o)) this.unanswered.delete(o);
    for (const owner of owners) {
      this.asking.add(owner);
      void liveness.ask(owner).then((a) => {
        this.asking.delete(owner);
        const again = this.unanswered.delete(owner);
        if (a === 'gone' || (a === 'silent' && again)) this.silent(owner);
        else if (a === 'silent') this.unanswered.add(owner);
      });
    }
  }

  /** The owner did not answer on NATS while NATS did (its connection cut or dead, the process gone
   *  or frozen): its calls' replies may never come. As for a move: a call the new owner may run too
   *  goes back to the router (which waits for the lease to move, not sending it there again), the
   *  others give the owner the owner wait to answer, then 503 (outcome unknown). */
  private silent(owner: string): void {
    const stranded = this.inbox.waitingIds((f) => {
      if (f.owner !== owner || f.silent) return false;
      f.silent = true;
      f.moved?.(true);
      return true;
    });
    if (stranded.length === 0) return;
    setTimeout(() => {
      this.inbox.abort(stranded, (f) => this.opts.unavailable(`the node owning account ${f.key} stopped answering on the cluster's messaging (NATS) while ${f.op} was there; its outcome is unknown`));
    }, this.opts.ownerWaitMs).unref();
  }

  /** An owner's reply to a forwarded call, as an attempt (a result) or its error, thrown. */
  private async reply(owner: string, msg: Msg): Promise<Attempt> {
    let reply = decode(msg.string()) as CallReply;
    if (reply.ok === 'parts') reply = await this.fetchParts(owner, reply);
    if (reply.ok === true) {
      this.opts.stats.forwarded++;
      return { done: true, value: reply.result, ...(reply.epoch === undefined ? {} : { epoch: reply.epoch }) };
    }
    if ('notOwner' in reply) return { done: false, notOwner: true };
    if (!('error' in reply)) throw this.opts.unavailable('the owner node answered in parts within parts; retry');
    this.opts.stats.forwarded++;
    throw fromWire(reply.error);
  }

  /** The parts of a large reply, in order, joined and decoded. */
  private async fetchParts(owner: string, h: PartsHandle): Promise<CallReply> {
    const chunks: Uint8Array[] = [];
    for (let i = 0; i < h.parts; i++) {
      const req: PartRequest = { id: h.id, i };
      const m = await this.opts.link.nc.request(SUBJECTS.nodePart(owner), JSON.stringify(req), { timeout: this.opts.forwardTimeoutMs })
        .catch((err: unknown) => { throw this.opts.unavailable('a large reply could not be fetched from the owner node; retry', err); });
      if (m.data.length === 0) throw this.opts.unavailable('the owner node no longer had a large reply when it was fetched; retry');
      chunks.push(m.data);
    }
    return decode(Buffer.concat(chunks).toString('utf8')) as CallReply;
  }

  /** Ends the calls still waiting (failing with 'closed') and stops watching NATS's status. */
  close(): void {
    clearInterval(this.probe);
    this.inbox.close();
    this.offStatus();
  }
}
