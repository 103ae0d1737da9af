// The end of the read a request came in: a request that changes state waits for it (exchange.ts),
// and every request of one read resumes at the same turn of the loop.
/**
 * Resolves once uWS has parsed everything else that came in the same read as this request. A
 * request pipelined behind one whose reply is pending makes uWS close the connection (see
 * ResponseSink.deferred), and it does so while parsing that read, after the first request's
 * handler ran: a request that changes state waits for this point and is dropped, unexecuted, if the
 * connection is gone by then, rather than executed with nobody left to tell. (A microtask is too
 * early: uWS.js drains them after each callback, before it parses the next request.)
 */
export const afterThisRead = () => new Promise<void>((resolve) => waitForRead(resolve));
/** What waits for the end of the read: a request (resumed by a method call, no promise: exchange.ts) or a callback. */
type ReadWaiter = { afterRead(): void } | (() => void);
let readWaiters: ReadWaiter[] = [];
export function waitForRead(w: ReadWaiter): void {
  // One immediate for every request of the read (uWS parses them all in one poll phase): they
  // resume together, so the shard calls they make leave in one message (shardSet.ts queueFlush),
  // not the first alone and the rest a loop turn later.
  if (readWaiters.length === 0) setImmediate(releaseRead);
  readWaiters.push(w);
}
function releaseRead(): void {
  const waiters = readWaiters;
  readWaiters = [];
  for (const w of waiters) {
    if (typeof w === 'function') w();
    else w.afterRead();
  }
}
