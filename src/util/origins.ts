// Browser origins as CORS_ORIGINS lists them: parsed once, at configuration time (src/config.ts),
// and compared exactly per request (src/http/cors.ts).

/**
 * One configured origin in its canonical form (`scheme://host[:port]`, lower case, no default port,
 * no path), or an error message naming what is wrong with it. `null` (opaque origins such as
 * file:// pages and sandboxed frames) is refused: every such page would share it.
 */
export function canonicalOrigin(text: string): { origin: string } | { error: string } {
  const t = text.trim();
  if (t === '*') return { error: "'*' is not accepted: list each origin (scheme://host[:port])" };
  let url: URL;
  try {
    url = new URL(t);
  } catch {
    return { error: `'${t}' is not an origin (scheme://host[:port])` };
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return { error: `'${t}': only http and https origins` };
  if ((url.pathname !== '/' && url.pathname !== '') || url.search || url.hash || url.username || url.password) {
    return { error: `'${t}' has more than scheme://host[:port]` };
  }
  return { origin: url.origin };
}

/** The comma-separated list of CORS_ORIGINS, canonical and deduplicated (throws a one-line message). */
export function parseOrigins(value: string | readonly string[]): string[] {
  const items = (typeof value === 'string' ? value.split(',') : value).map((s) => s.trim()).filter((s) => s !== '');
  const out = new Set<string>();
  for (const item of items) {
    const r = canonicalOrigin(item);
    if ('error' in r) throw new Error(r.error);
    out.add(r.origin);
  }
  return [...out];
}
