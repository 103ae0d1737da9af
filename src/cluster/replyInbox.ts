// Request/reply for forwarded calls through one reply inbox of the router's own: a subscription
// `<inbox>.*` and a map of waiting calls. nc.request (nats.js 3.4) does the same through its mux,
// but also builds a timeout promise per request and, on every reply that succeeded, an Error with
// its stack (RequestOne.cancel rejects its already settled promise with a new RequestError); on the
// forwarding hot path that was 5-10 µs of CPU per call (docs/cluster.md, Costs). The bound of the
// waiting calls is one timer, armed for the earliest deadline, not a timer per call: calls answer in
// a millisecond and their bound is 31 s. Each call carries a tag of the caller's (what it is about)
// by which the caller can end it early (abort). The owner's side is unchanged: msg.respond().
import { createInbox, type Msg, type NatsConnection, type Subscription } from '@nats-io/transport-node';
import { KeyedTable } from '../util/keyedTable.js';

/** Why no reply came: nobody listens on the subject (the server says so at once), the bound
 *  passed, or the inbox was closed with the call waiting. */
export type NoReply = 'noResponders' | 'timeout' | 'closed';

export class NoReplyError extends Error {
  constructor(readonly reason: NoReply, subject: string) {
    super(`no reply on ${subject}: ${reason}`);
    this.name = 'NoReplyError';
  }
}

interface Waiting<T> {
  subject: string;
  resolve: (m: Msg) => void;
  reject: (e: Error) => void;
  /** Monotonic ms after which the call fails with 'timeout'. */
  deadline: number;
  tag: T;
}

export class ReplyInbox<T = undefined> {
  private readonly prefix = createInbox();
  private sub: Subscription | undefined;
  private next = 0;
  /** Not a Map: see KeyedTable (keys always new, soon deleted: a call in flight each). */
  private readonly waiting = new KeyedTable<string, Waiting<T>>();
  private timer: NodeJS.Timeout | undefined;
  /** When the armed timer fires (monotonic ms). */
  private timerAt = Infinity;

  constructor(private readonly nc: NatsConnection, private readonly now: () => number = () => performance.now()) {}

  /** Publishes `data` on `subject` with a reply subject of this inbox; resolves with the first
   *  reply, rejects with NoReplyError, with what abort() gave, or with what publish throws (closed
   *  connection, too large). */
  request(subject: string, data: string | Uint8Array, timeoutMs: number, tag: T): Promise<Msg> {
    // Subscribed on first use; the SUB goes out before the PUB on the same connection.
    this.sub ??= this.nc.subscribe(`${this.prefix}.*`, { callback: (_err, m) => this.settle(m) });
    const id = (this.next++).toString(36);
    return new Promise<Msg>((resolve, reject) => {
      try {
        this.nc.publish(subject, data, { reply: `${this.prefix}.${id}` });
      } catch (err) {
        reject(err as Error);
        return;
      }
      const deadline = this.now() + timeoutMs;
      this.waiting.set(id, { subject, resolve, reject, deadline, tag });
      if (deadline < this.timerAt) this.arm(deadline);
    });
  }

  /** Calls waiting for their reply now. */
  get pending(): number {
    return this.waiting.size;
  }

  /** The ids of the calls waiting now whose tag passes `which` (all without it). */
  waitingIds(which?: (tag: T) => boolean): string[] {
    const ids: string[] = [];
    for (const [id, w] of this.waiting) if (!which || which(w.tag)) ids.push(id);
    return ids;
  }

  /** Ends those of `ids` still waiting with the error `why` makes for each. */
  abort(ids: Iterable<string>, why: (tag: T) => Error): void {
    for (const id of ids) {
      const w = this.waiting.get(id);
      if (!w) continue;
      this.waiting.delete(id);
      w.reject(why(w.tag));
    }
  }

  private settle(m: Msg | undefined): void {
    if (!m) return;
    const id = m.subject.slice(this.prefix.length + 1);
    const w = this.waiting.get(id);
    if (!w) return; // a late reply to a call that timed out
    this.waiting.delete(id);
    // The server's answer to a request nobody subscribed to: an empty message with status 503.
    if (m.data.length === 0 && m.headers?.code === 503) w.reject(new NoReplyError('noResponders', w.subject));
    else w.resolve(m);
  }

  private arm(at: number): void {
    clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(() => this.expire(), Math.max(0, at - this.now()));
    // The NATS connection keeps the process alive while calls wait; this timer need not.
    this.timer.unref();
  }

  /** Fails the calls past their deadline; arms the timer for the earliest of the others. */
  private expire(): void {
    this.timer = undefined;
    this.timerAt = Infinity;
    const now = this.now();
    let earliest = Infinity;
    for (const [id, w] of this.waiting) {
      if (w.deadline <= now) {
        this.waiting.delete(id);
        w.reject(new NoReplyError('timeout', w.subject));
      } else if (w.deadline < earliest) earliest = w.deadline;
    }
    if (earliest < Infinity) this.arm(earliest);
  }

  /** Stops listening; calls still waiting fail with 'closed'. */
  close(): void {
    this.sub?.unsubscribe();
    this.sub = undefined;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.timerAt = Infinity;
    const waiting = [...this.waiting.values()];
    this.waiting.clear();
    for (const w of waiting) w.reject(new NoReplyError('closed', w.subject));
  }
}
