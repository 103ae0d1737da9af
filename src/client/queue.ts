// An async-iterable queue with typed callbacks: what `for await (const f of client.stream(...))`
// and `.on('TRADE', f => ...)` read from. Frames are pushed by one producer, in order.

type Listener<F> = (frame: F) => void;

export class FrameChannel<F extends { type: string }, E extends Record<string, unknown[]> = Record<string, unknown[]>> implements AsyncIterable<F> {
  private readonly buffer: F[] = [];
  private readonly waiters: Array<(r: IteratorResult<F>) => void> = [];
  private readonly frameListeners = new Map<string, Set<Listener<F>>>();
  private readonly eventListeners = new Map<keyof E, Set<(...args: any[]) => void>>();
  private ended = false;
  private failure: unknown;
  /** Whether anything iterates. Frames are buffered for an iterator, or while nobody listens at all
   *  (one may come); a callback-only consumer leaves nothing piling up. */
  private iterated = false;

  /** `onTaken`: a frame reached the consumer (its callbacks ran, or an iterator was handed it),
   *  in order; a frame still in the buffer has not. */
  constructor(private readonly onStop: () => void, private readonly onTaken: (frame: F) => void = () => undefined) {}

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
    while (this.buffer.length > 0) {
      const f = this.buffer.shift()!;
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
        const f = this.buffer.shift();
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
