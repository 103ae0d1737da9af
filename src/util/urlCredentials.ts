// Addresses given by operators (DATABASE_URL, NATS_URL, TAGW_URL) may carry a user and password or a
// token before the host: never shown.

const USERINFO = /\/\/[^@/\s]*@/g;

/** The URL (or comma-separated URLs) with each `user:password@` shown as `[redacted]@`. */
export function redactUrlCredentials(url: string): string {
  return url.replace(USERINFO, '//[redacted]@');
}
