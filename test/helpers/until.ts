/** Resolves once `cond()` holds; rejects after `limitMs` with `what` (a bound so a broken case fails
 *  instead of hanging; never a timing assertion). */
const T0 = Date.now();
export async function until(cond: () => boolean | Promise<boolean>, what: string, limitMs = 15_000): Promise<void> {
  const deadline = Date.now() + limitMs;
  const s = Date.now();
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`still waiting after ${limitMs} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
  if (process.env.UNTIL_LOG) console.log(`UNTIL ${String(s - T0).padStart(6)} +${Date.now() - s} ${what.slice(0, 90)}`);
}
