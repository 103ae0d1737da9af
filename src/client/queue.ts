// An async-iterable queue with typed callbacks: what `for await (const f of client.stream(...))`
// and `.on('TRADE', f => ...)` read from. Frames are pushed by one producer, in order.

type Listener<F> = (frame: F) => void;

/** Latest-value frames (a symbol's quotes, a bar in progress): one still in the buffer is dropped when
 *  a newer one of its topic comes, so a `for await` slower than the stream reads current prices, not
 *  a backlog that grows older without bound. */
export interface Coalescing<F> {
  /** The frame's topic when it is a latest-value frame (a QUOTE's symbol), else undefined: never dropped. */
  topic(frame: F): string | undefined;
  /** Whether a newer frame of its topic replaces it (a bar's `closed:true` frame is never replaced). */
  replaceable(frame: F): boolean;
}

export class FrameChannel<F extends { type: string }, E extends Record<string, unknown[]> = Record<string, unknown[]>> implements AsyncIterable<F> {
  private buffer: F[] = [];
  private readonly waiters: Array<(r: IteratorResult<F>) => void> = [];
  private readonly frameListeners = new Map<string, Set<Listener<F>>>();
  private readonly eventListeners = new Map<keyof E, Set<(...args: any[]) => void>>();
  private ended = false;
  private failure: unknown;
  /** Whether anything iterates. Frames are buffered for an iterator, or while nobody listens at all
   *  (one may come); a callback-only consumer leaves nothing piling up. */
  private iterated = false;
  /** Per topic, its replaceable frame still in the buffer (coalescing only). */
  private readonly pending = new Map<string, F>();
  /** Buffered frames a newer one of their topic replaced: skipped when their turn comes. */
  private readonly dropped = new Set<F>();
  /** Latest-value frames dropped from the buffer for a newer one of their topic. */
  coalesced = 0;

  /** `onTaken`: a frame reached the consumer (its callbacks ran, or an iterator was handed it),
   *  in order; a frame still in the buffer has not. `coalescing`: which buffered frames a newer one replaces. */
  constructor(
    private readonly onStop: () => void,
    private readonly onTaken: (frame: F) => void = () => undefined,
    private readonly coalescing?: Coalescing<F>,
  ) {}

  push(frame: F): void {
    if (this.ended) return;
    // Per frame on the hot path: no allocation (a replay delivers thousands in one go).
    const callbacksOnly = !this.iterated && this.frameListeners.size > 0;
    if (callbacksOnly && this.buffer.length > 0) this.flushToListeners(); // older frames first
    if (callbacksOnly) this.onTaken(frame);
    const typed = this.frameListeners.get(frame.type);
    if (typed) for (const l of typed) l(frame);
    const any = this.frameListeners.get('*');
    if (any) for (const l of any) l(frame);
    if (callbacksOnly) return;
    const w = this.waiters.shift();
    if (w) {
      this.onTaken(frame);
      w({ value: frame, done: false });
    } else this.buffer.push(frame);
    if (!w && this.coalescing) this.supersede(frame);
  }

  /** `frame` was just buffered: a replaceable frame of its topic still waiting is dropped (the newest
   *  then waits at its own place in the order). */
  private supersede(frame: F): void {
    const c = this.coalescing!;
    const topic = c.topic(frame);
    if (topic === undefined) return;
    const older = this.pending.get(topic);
    if (older !== undefined) {
      this.dropped.add(older);
      this.coalesced++;
      // Compacted once most of the buffer is replaced frames: a stalled reader holds one frame per
      // topic (and every account event), not every quote since it stalled.
      if (this.dropped.size >= 64 && this.dropped.size * 2 > this.buffer.length) {
        this.buffer = this.buffer.filter((f) => !this.dropped.has(f));
        this.dropped.clear();
      }
    }
    if (c.replaceable(frame)) this.pending.set(topic, frame);
    else this.pending.delete(topic);
  }

  /** The next buffered frame that was not replaced, taken out of the buffer. */
  private shiftLive(): F | undefined {
    for (;;) {
      const f = this.buffer.shift();
      if (f === undefined || (this.dropped.size === 0 && this.pending.size === 0)) return f;
      if (this.dropped.delete(f)) continue;
      const topic = this.coalescing!.topic(f);
      if (topic !== undefined && this.pending.get(topic) === f) this.pending.delete(topic);
      return f;
    }
  }

  emit<K extends keyof E>(event: K, ...args: E[K]): void {
    const set = this.eventListeners.get(event);
    if (set) for (const l of set) l(...args);
  }

  /** Frames of one type (or '*' for all), in order. Returns the function that removes it. Frames
   *  that came while nothing listened (a stream made, then an await, then its callbacks) are
   *  handed to the callbacks once this turn's registrations are done, unless an iterator takes them. */
  onFrame(type: string, l: Listener<F>): () => void {
    let set = this.frameListeners.get(type);
    if (!set) this.frameListeners.set(type, (set = new Set()));
    set.add(l);
    if (this.buffer.length > 0 && !this.iterated) queueMicrotask(() => this.flushToListeners());
    return () => set.delete(l);
  }

  /** Buffered frames to the callbacks, in order (nothing iterates: nothing else will take them). */
  private flushToListeners(): void {
    if (this.iterated || this.frameListeners.size === 0) return;
    for (let f = this.shiftLive(); f !== undefined; f = this.shiftLive()) {
      this.onTaken(f);
      const typed = this.frameListeners.get(f.type);
      if (typed) for (const l of typed) l(f);
      const any = this.frameListeners.get('*');
      if (any) for (const l of any) l(f);
    }
  }

  onEvent<K extends keyof E>(event: K, l: (...args: E[K]) => void): () => void {
    let set = this.eventListeners.get(event);
    if (!set) this.eventListeners.set(event, (set = new Set()));
    set.add(l as (...args: any[]) => void);
    return () => set.delete(l as (...args: any[]) => void);
  }

  /** No more frames; iterators finish (or throw `error`) once they drained what is buffered. */
  end(error?: unknown): void {
    if (this.ended) return;
    this.ended = true;
    this.failure = error;
    for (const w of this.waiters.splice(0)) {
      if (error !== undefined) w(Promise.reject(error) as never);
      else w({ value: undefined, done: true });
    }
  }

  /** Ends with an error: 'error' listeners hear it, iterators throw it. */
  fail(error: unknown): void {
    if (this.ended) return; // closed by its consumer meanwhile: nobody is told anything more
    (this.emit as (event: string, ...args: unknown[]) => void)('error', error);
    this.end(error);
  }

  get isEnded(): boolean {
    return this.ended;
  }

  [Symbol.asyncIterator](): AsyncIterator<F> {
    this.iterated = true;
    return {
      next: () => {
        const f = this.shiftLive();
        if (f !== undefined) {
          this.onTaken(f);
          return Promise.resolve({ value: f, done: false });
        }
        if (this.ended) return this.failure !== undefined ? Promise.reject(this.failure) : Promise.resolve({ value: undefined, done: true });
        return new Promise((resolve) => this.waiters.push(resolve));
      },
      return: () => {
        this.onStop();
        this.end();
        return Promise.resolve({ value: undefined, done: true });
      },
    };
  }
}

type MarketFrame = { type: string; data?: unknown };
const dataOf = (f: MarketFrame) => f.data as { symbol?: unknown; timeframe?: unknown; closed?: unknown } | undefined;

/** The market data of `/v1/stream` and `/ws`: a symbol's `QUOTE`s (and `/ws` `BOOK`s), a
 *  (symbol, timeframe)'s `CANDLE`s, of which the newest is what counts (the gateway coalesces them
 *  the same way for a slow socket, docs/stream.md *Fan-out and backpressure*); a bar's `closed:true`
 *  frame is never replaced. Account events and control frames have no topic. */
export const LATEST_MARKET_DATA: Coalescing<MarketFrame> = {
  topic(f) {
    if (f.type !== 'QUOTE' && f.type !== 'CANDLE' && f.type !== 'BOOK') return undefined;
    const d = dataOf(f);
    if (typeof d?.symbol !== 'string') return undefined;
    // Quotes by the symbol alone (no string made per quote); the other kinds by a key no symbol is.
    return f.type === 'QUOTE' ? d.symbol : `\u0000${f.type}\u0000${d.symbol}\u0000${String(d.timeframe)}`;
  },
  replaceable: (f) => f.type !== 'CANDLE' || dataOf(f)?.closed !== true,
};
