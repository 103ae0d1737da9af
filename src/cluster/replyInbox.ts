// Request/reply for forwarded calls through one reply inbox of the router's own: a subscription
// `<inbox>.*`, a map of waiting calls, one timer each. nc.request (nats.js 3.4) does the same
// through its mux, but also builds a timeout promise per request and, on every reply that
// succeeded, an Error with its stack (RequestOne.cancel rejects its already settled promise with
// a new RequestError); on the forwarding hot path that was 5-10 µs of CPU per call
// (docs/cluster.md, Costs). The owner's side is unchanged: it answers with msg.respond().
import { createInbox, type Msg, type NatsConnection, type Subscription } from '@nats-io/transport-node';

/** Why no reply came: nobody listens on the subject (the server says so at once), the bound
 *  passed, or the inbox was closed with the call waiting. */
export type NoReply = 'noResponders' | 'timeout' | 'closed';

export class NoReplyError extends Error {
  constructor(readonly reason: NoReply, subject: string) {
    super(`no reply on ${subject}: ${reason}`);
    this.name = 'NoReplyError';
  }
}

interface Waiting {
  subject: string;
  resolve: (m: Msg) => void;
  reject: (e: Error) => void;
  timer: NodeJS.Timeout;
}

export class ReplyInbox {
  private readonly prefix = createInbox();
  private sub: Subscription | undefined;
  private next = 0;
  private readonly waiting = new Map<string, Waiting>();

  constructor(private readonly nc: NatsConnection) {}

  /** Publishes `data` on `subject` with a reply subject of this inbox; resolves with the first
   *  reply, rejects with NoReplyError (or what publish throws: closed connection, too large). */
  request(subject: string, data: string | Uint8Array, timeoutMs: number): Promise<Msg> {
    // Subscribed on first use; the SUB goes out before the PUB on the same connection.
    this.sub ??= this.nc.subscribe(`${this.prefix}.*`, { callback: (_err, m) => this.settle(m) });
    const id = (this.next++).toString(36);
    return new Promise<Msg>((resolve, reject) => {
      const timer = setTimeout(() => this.fail(id, 'timeout'), timeoutMs);
      this.waiting.set(id, { subject, resolve, reject, timer });
      try {
        this.nc.publish(subject, data, { reply: `${this.prefix}.${id}` });
      } catch (err) {
        clearTimeout(timer);
        this.waiting.delete(id);
        reject(err as Error);
      }
    });
  }

  /** Calls waiting for their reply now. */
  get pending(): number {
    return this.waiting.size;
  }

  private settle(m: Msg | undefined): void {
    if (!m) return;
    const id = m.subject.slice(this.prefix.length + 1);
    const w = this.waiting.get(id);
    if (!w) return; // a late reply to a call that timed out
    this.waiting.delete(id);
    clearTimeout(w.timer);
    // The server's answer to a request nobody subscribed to: an empty message with status 503.
    if (m.data.length === 0 && m.headers?.code === 503) w.reject(new NoReplyError('noResponders', w.subject));
    else w.resolve(m);
  }

  private fail(id: string, reason: NoReply): void {
    const w = this.waiting.get(id);
    if (!w) return;
    this.waiting.delete(id);
    clearTimeout(w.timer);
    w.reject(new NoReplyError(reason, w.subject));
  }

  /** Stops listening; calls still waiting fail with 'closed'. */
  close(): void {
    this.sub?.unsubscribe();
    this.sub = undefined;
    for (const id of [...this.waiting.keys()]) this.fail(id, 'closed');
  }
}
