/** The first poll's wait, and the longest: the wait grows by half each poll from the first to the
 *  longest. `cond` often asks a shard, a node or PostgreSQL, and the cluster files wait seconds for
 *  leases and handovers: polled every 10 ms throughout, those asks were 10-15% of such a file's CPU
 *  (cluster-wired 18.2-19.1 CPU-s polling every 10 ms, 16.0-16.3 every 50 ms, 2026-11-28). A
 *  condition that holds at once or soon is still seen within 10-25 ms; one that holds only for a
 *  moment was never sure to be seen (a loaded machine delays a 10 ms timer by more than that). */
const FIRST_MS = 10;
const LONGEST_MS = 50;

/** Resolves once `cond()` holds; rejects after `limitMs` with `what` (a bound so a broken case fails
 *  instead of hanging; never a timing assertion). */
export async function until(cond: () => boolean | Promise<boolean>, what: string, limitMs = 15_000): Promise<void> {
  const deadline = Date.now() + limitMs;
  let wait = FIRST_MS;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`still waiting after ${limitMs} ms: ${what}`);
    await new Promise((r) => setTimeout(r, wait));
    wait = Math.min(LONGEST_MS, Math.round(wait * 1.5));
  }
}
