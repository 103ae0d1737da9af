// Addresses given by operators (DATABASE_URL, NATS_URL, TAGW_URL) may carry a user and password or a
// token before the host, or a password in a query parameter (`?password=`, `?sslpassword=`): never
// shown.
//
// The credentials end at the LAST `@`: a password with an `@` or a `/` the operator did not
// percent-encode (`postgres://tagw:p@ss/w0rd@db:5432/tagw`) is still a password to its last
// character, as node-postgres reads it (WHATWG URL takes the last `@` of the authority). Splitting at
// the first `@` showed the rest of it. A path or query with an `@` after the host is cut too: shown
// less, never more.

const SCHEME = /^(\s*[a-z][a-z0-9+.-]*:\/\/)/i;
const SECRET_PARAM = /([?&][^=&#]*(?:pass|secret|token|key)[^=&#]*=)[^&#]*/gi;

/** One URL split into itself without its `user:password@` (or `token@`) and that user info (raw,
 *  still percent-encoded), if it had any. */
export function splitUrlCredentials(url: string): { url: string; userinfo?: string } {
  const scheme = SCHEME.exec(url)?.[1] ?? '';
  const rest = url.slice(scheme.length);
  const at = rest.lastIndexOf('@');
  if (at < 0) return { url };
  return { url: scheme + rest.slice(at + 1), userinfo: rest.slice(0, at) };
}

/** The URL (or comma-separated URLs) with each `user:password@` shown as `[redacted]@`, and the value
 *  of each query parameter named like a secret as `[redacted]`. */
export function redactUrlCredentials(url: string): string {
  return url.split(',').map((one) => {
    const { url: bare, userinfo } = splitUrlCredentials(one);
    const scheme = SCHEME.exec(bare)?.[1] ?? '';
    const shown = userinfo === undefined ? bare : `${scheme}[redacted]@${bare.slice(scheme.length)}`;
    return shown.replace(SECRET_PARAM, '$1[redacted]');
  }).join(',');
}

/** Percent-decoded, or as given when it is not valid percent-encoding. */
export function decodeUserinfoPart(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}
