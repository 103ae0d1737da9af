/** Resolves once `cond()` holds; rejects after `limitMs` with `what` (a bound so a broken case fails
 *  instead of hanging; never a timing assertion). */
export async function until(cond: () => boolean | Promise<boolean>, what: string, limitMs = 15_000): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`still waiting after ${limitMs} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
