// Why an account's login attempt failed, as operators see it (`tagw accounts list`'s LAST ERROR,
// /v1/accounts/connections): the error's message, one line and bounded, never the account's broker
// password, an API or management key, or the credentials of an address in it.
import { passwordOf, type Password } from '../../broker/types.js';
import { redactKeys } from '../../util/redactKeys.js';

/** Longest reason kept: a message is a line, not a dump. */
export const REASON_MAX = 200;

/** The message of a failed login attempt's error, safe to show: the password (were a broker or a
 *  bridge to echo it) and key secrets as `[redacted]`, `user:password@` of an address cut. */
export function loginFailureReason(err: unknown, password: Password): string {
  let text = err instanceof Error ? err.message || err.name : String(err);
  const pw = passwordOf(password);
  if (pw.length > 0 && text.includes(pw)) text = text.replaceAll(pw, '[redacted]');
  text = redactKeys(text).replace(/([a-z][a-z0-9+.-]*:\/\/)[^\s/@]+@/gi, '$1[redacted]@').replace(/\s+/g, ' ').trim();
  return text.length > REASON_MAX ? `${text.slice(0, REASON_MAX - 1)}…` : text || 'login failed';
}
