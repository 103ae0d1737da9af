// A token bucket, pure: the state is two numbers the caller keeps, time comes in as an argument.
// `rate` tokens per second refill a bucket of `burst` tokens; a request takes one. No timers, no
// allocation: the per-key rate limiter calls this on every request.

export interface Bucket { tokens: number; at: number }

/** Float slack: a bucket refilled for exactly the wait take() announced holds its token. */
const EPS = 1e-9;

/** A full bucket at `now`. */
export function fullBucket(burst: number, now: number): Bucket {
  return { tokens: burst, at: now };
}

/**
 * Takes one token at `now` (ms). Returns 0 when it was taken, otherwise the ms to wait until one
 * is there (nothing taken). `rate` <= 0 means unlimited. A clock that steps back refills nothing.
 */
export function take(b: Bucket, rate: number, burst: number, now: number): number {
  if (rate <= 0) return 0;
  if (now > b.at) {
    b.tokens = Math.min(burst, b.tokens + ((now - b.at) * rate) / 1000);
    b.at = now;
  }
  if (b.tokens >= 1 - EPS) {
    b.tokens = Math.max(0, b.tokens - 1);
    return 0;
  }
  // The smallest whole wait after which take() finds the token, computed with the same float
  // expression take() uses: the plain ceil was 1 ms long when (1 - tokens) carried a rounding error
  // (0.688 tokens at 1/s announced 313 ms, and the token was there at 312).
  let w = Math.max(1, Math.ceil(((1 - b.tokens) * 1000) / rate));
  while (!hasAfter(b, rate, w)) w++;
  while (w > 1 && hasAfter(b, rate, w - 1)) w--;
  return w;
}

/** Whether the bucket holds a token after `w` ms. Not a closure inside take(): one capturing take's
 *  parameters made V8 allocate a context for them at every call, the common one included (~50 B). */
function hasAfter(b: Bucket, rate: number, w: number): boolean {
  return b.tokens + (w * rate) / 1000 >= 1 - EPS;
}
