// Request ids: each response carries `x-request-id`, the client's own when it sent a sane one (a
// proxy's or a bot's trace id), else one made here; the same id is in the request's log lines.
// Made from a per-process random prefix and a counter: unique enough to find a request in the
// logs, and cheap (no random bytes per request).
import { randomBytes } from 'node:crypto';

const PREFIX = randomBytes(4).toString('hex');
let seq = 0;
const SANE = /^[\w.:@/+=-]{1,128}$/;

export function requestIdOf(given: string | undefined): string {
  if (given !== undefined && SANE.test(given)) return given;
  return `${PREFIX}-${(++seq).toString(36)}`;
}
