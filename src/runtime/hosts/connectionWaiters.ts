// Requests waiting for an account's usable broker connection, and how long each waits.
//
// A request has its ordinary bound (brokerWaitMs), after which it answers 503 NOT_CONNECTED: the
// broker could not be reached, or the connection dropped and is resuming. But an account whose
// first login is still under way (its shard has just started it: a gateway restart, or this node
// has just taken it over in a cluster) has failed nothing: its request waits up to the connecting
// bound instead (cluster mode: the owner wait, the same a request waits for an owner), and past it
// answers 503 SERVICE_UNAVAILABLE with retry-after, as a request that found no owner does. Only a
// login that actually fails answers NOT_CONNECTED: a request already past its ordinary bound then
// gets it at once, a later one when its ordinary bound passes.
import { apiError, type ApiError } from '../../errors.js';

/** Past the connecting bound with the first login still under way: nothing failed, retry. */
export const stillConnecting = (): ApiError => apiError('SERVICE_UNAVAILABLE',
  "the account's broker connection is still being made (the account has just started on this gateway node); retry shortly",
  { headers: { 'retry-after': '1' }, details: { connection: 'connecting' } });

/** Whether an error is `stillConnecting`: refused before anything was sent. */
export const isStillConnecting = (err: unknown): boolean =>
  (err as ApiError | null)?.code === 'SERVICE_UNAVAILABLE' && (err as ApiError).details?.connection === 'connecting';

interface Waiter<S> {
  resolve(s: S): void;
  reject(e: unknown): void;
  timers: NodeJS.Timeout[];
  /** Its ordinary bound passed while the first login was under way. */
  overdue: boolean;
}

export interface WaitersDeps {
  /** The account's first login is under way and nothing has failed yet. */
  beingMade(): boolean;
  /** The answer past the ordinary bound (NOT_CONNECTED). */
  notConnected(): ApiError;
}

export class ConnectionWaiters<S> {
  private list: Waiter<S>[] = [];

  constructor(private readonly deps: WaitersDeps) {}

  /** Waits up to `ms`; up to `connectingMs` (when longer) while the first login is under way. */
  wait(ms: number, connectingMs: number): Promise<S> {
    return new Promise<S>((resolve, reject) => {
      const w: Waiter<S> = { resolve, reject, timers: [], overdue: false };
      const fail = (e: ApiError) => {
        this.remove(w);
        reject(e);
      };
      const longer = connectingMs > ms && this.deps.beingMade();
      w.timers.push(setTimeout(() => {
        if (!this.deps.beingMade()) fail(this.deps.notConnected());
        else if (longer) w.overdue = true;
        else fail(stillConnecting());
      }, ms));
      if (longer) w.timers.push(setTimeout(() => fail(this.deps.beingMade() ? stillConnecting() : this.deps.notConnected()), connectingMs));
      this.list.push(w);
    });
  }

  /** A login attempt failed (not refused: that fails every waiter): those past their ordinary bound answer now. */
  loginFailed(): void {
    for (const w of this.list.filter((x) => x.overdue)) {
      this.remove(w);
      w.reject(this.deps.notConnected());
    }
  }

  /** No request waits. */
  get empty(): boolean {
    return this.list.length === 0;
  }

  resolveAll(s: S): void {
    for (const w of this.take()) w.resolve(s);
  }

  rejectAll(e: unknown): void {
    for (const w of this.take()) w.reject(e);
  }

  private take(): Waiter<S>[] {
    const ws = this.list;
    this.list = [];
    for (const w of ws) for (const t of w.timers) clearTimeout(t);
    return ws;
  }

  private remove(w: Waiter<S>): void {
    for (const t of w.timers) clearTimeout(t);
    this.list = this.list.filter((x) => x !== w);
  }
}
