// Is a node's process alive and on NATS now? Every node answers `tagw.node.<id>.alive` with its
// incarnation (the process's start, leases.ts newIncarnation). Asked with a short bound (a few NATS
// round trips), so a question that a heartbeat in PostgreSQL answers only after a renewal period is
// settled at once: NATS says at once when nobody listens (a process dead, or its connection gone),
// and a listener that does not answer within the bound is frozen or cut off. Used by a node started
// again under its NODE_ID (nodeTwin.ts) and by a forwarded call waiting at an owner (callForwarder.ts).
import type { Subscription } from '@nats-io/transport-node';
import type { NatsLink } from './natsLink.js';
import { NoReplyError, ReplyInbox } from './replyInbox.js';
import { SUBJECTS } from './subjects.js';

/** `{ incarnation }`: a process of the node answered; 'gone': nobody listens (nats-server says so at
 *  once); 'silent': a listener did not answer in time while NATS itself answered (frozen, cut off, or
 *  very late); 'unknown': NATS did not answer either. */
export type Alive = { incarnation: number } | 'gone' | 'silent' | 'unknown';

export class Liveness {
  private readonly inbox: ReplyInbox;
  private sub: Subscription | undefined;

  constructor(private readonly link: NatsLink, private readonly timeoutMs: number) {
    this.inbox = new ReplyInbox(link.nc);
  }

  /** Starts answering for this process (once it may: after its start was allowed). */
  async answer(nodeId: string, incarnation: number): Promise<void> {
    // Every process of the id (no queue group): a start asks whether an earlier one still answers,
    // and that one must hear it beside the new one.
    this.sub ??= this.link.nc.subscribe(SUBJECTS.nodeAlive(nodeId), {
      callback: (err, m) => {
        if (!err) m.respond(String(incarnation));
      },
    });
    // At the server before the caller writes its heartbeat: a heartbeat in PostgreSQL means an answer
    // here. Bounded: NATS away now must not hold the start (the subscription goes with the reconnect).
    await this.ping();
  }

  /** Asks `nodeId`'s process, waiting at most the bound (twice when NATS must be asked too). */
  async ask(nodeId: string): Promise<Alive> {
    if (!this.link.up) return 'unknown';
    try {
      const m = await this.inbox.request(SUBJECTS.nodeAlive(nodeId), '', this.timeoutMs, undefined);
      return { incarnation: Number(m.string()) };
    } catch (err) {
      if (err instanceof NoReplyError && err.reason === 'noResponders') return 'gone';
      if (!(err instanceof NoReplyError && err.reason === 'timeout')) return 'unknown';
    }
    // No answer: is it the process, or NATS? A ping to the server tells.
    return this.ping();
  }

  /** A round trip to nats-server within the bound: 'silent' when it came back (a question left
   *  unanswered was the process's doing), else 'unknown'. */
  private ping(): Promise<'silent' | 'unknown'> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'unknown'>((resolve) => { timer = setTimeout(() => resolve('unknown'), this.timeoutMs); });
    const pong = this.link.nc.flush().then(() => 'silent' as const, () => 'unknown' as const);
    return Promise.race([pong, late]).finally(() => clearTimeout(timer));
  }

  close(): void {
    this.sub?.unsubscribe();
    this.sub = undefined;
    this.inbox.close();
  }
}
