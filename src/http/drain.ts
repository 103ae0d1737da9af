// The HTTP part of a gateway's shutdown: new requests are answered 503 (draining) while those in
// flight finish, and the listen socket closes only once the clients still sending have seen it.
import type { Logger } from '../log.js';

/** Shutdown waits until no request was turned away (503) for this long: the clients still sending have seen the 503. */
export const DRAIN_QUIET_MS = 50;

/**
 * The HTTP part of a shutdown: wait, up to `timeoutMs`, until no request is in flight and none
 * arrived for DRAIN_QUIET_MS (each is answered 503 meanwhile, with the listen socket still open).
 * Real elapsed time, not the injected clock: it waits on real sockets between real timers (a test
 * clock standing still would make the shutdown wait forever).
 */
export async function drainHttp(inflight: { count: number; refused: number }, timeoutMs: number, log: Logger): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let seen = inflight.refused;
  let quietSince = Date.now();
  while (Date.now() < deadline) {
    if (inflight.refused !== seen) {
      seen = inflight.refused;
      quietSince = Date.now();
    }
    if (inflight.count === 0 && Date.now() - quietSince >= DRAIN_QUIET_MS) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  if (inflight.count > 0) log.warn('drain timeout; closing with requests in flight', { inflight: inflight.count });
}
