// The refusal of a broker login bound (or, in cluster mode, held) for another account, shared by
// every path that binds one (classicBinding.ts): 409 BROKER_LOGIN_IN_USE only to a caller who
// proved the login's password, the broker's 400 otherwise, on one node and in a cluster alike.
import { timingSafeEqual } from 'node:crypto';
import type { SecretBox } from '../../crypto/secretBox.js';
import { apiError, brokerRefused, toApiError } from '../../errors.js';
import type { Platform } from '../../market/server.js';
import type { LoginHolder } from '../../store/tenancyWrites.js';
import type { Services } from '../services.js';

export const loginInUse = () => apiError('BROKER_LOGIN_IN_USE', 'this broker login is already connected to another account');

export function openedOrUndefined(box: SecretBox, sealed: string, aad: string): string | undefined {
  try {
    return box.open(sealed, aad);
  } catch {
    return undefined;
  }
}

export function samePassword(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** What the check reads of the request. */
export interface LoginTry { customerId: string; user: string; password: string; server: string; platform?: Platform | undefined }

/**
 * The refusal of a login bound to another account: 409, except that another customer gets the
 * broker's refusal of any login (400) unless the broker takes its password, so the 409 tells only
 * someone who holds the password that the login is bound at this gateway (it was an oracle of which
 * logins other customers use). The password is checked at the broker, on a connection of its own
 * in the account's shard, as a login bound nowhere is before it is bound: answered at once from the
 * stored password, the refusal came back sooner than a broker's check, and the time told the same
 * thing. (A broker that cannot be reached now: the same 400.) The same customer knows its own
 * logins: 409 whatever the password; the right stored password: 409 without asking the broker. A
 * stored password this node cannot open (sealed with a key since reset), or none (a login held for
 * a re-bind in flight): the broker decides. The probe's password is sealed with this node's key
 * for the account's owner; an owner that cannot open it (a node started with another
 * TAGW_SECRET_KEY) fails as it fails a bind of a login bound nowhere, with the same answer.
 */
export async function inUse(s: Services, b: LoginTry, bound: LoginHolder): Promise<never> {
  if (bound.customer_id !== b.customerId) {
    const stored = bound.password_enc === undefined ? undefined : openedOrUndefined(s.secretBox, bound.password_enc, bound.seat_id);
    if (stored === undefined || !samePassword(stored, b.password)) {
      const platform = bound.platform ?? b.platform;
      const { reached } = await s.shards.call(bound.seat_id, 'account.probe', {
        accountId: bound.seat_id, server: b.server, login: b.user, passwordEnc: s.secretBox.seal(b.password, bound.seat_id), ...(platform ? { platform } : {}),
      }, { retryOnRestart: true });
      if (!reached) throw brokerRefused();
    }
  }
  throw loginInUse();
}

/**
 * Cluster mode: PostgreSQL refused the login (bound to, or held for, another account: at its check
 * under the login's lock, which sees what this node's mirror may not have yet, such as another
 * node's binding made a moment ago). The answer is the one the mirror's copy would have got: the
 * account that has it, read from PostgreSQL, goes through the same check (`inUse`). Nobody has it
 * any more (removed between the two reads): 503, to be retried, rather than a 409 no password was
 * checked for.
 */
export async function takenInCluster(s: Services, b: LoginTry, exceptSeatId: string): Promise<never> {
  return inUse(s, b, await holderInCluster(s, b, exceptSeatId));
}

/** The account PostgreSQL has the login bound or held for (`takenInCluster`). */
export async function holderInCluster(s: Services, b: Pick<LoginTry, 'server' | 'user'>, exceptSeatId: string): Promise<LoginHolder> {
  const holder = await s.tenancyWrites.loginHolder(b.server, b.user, exceptSeatId);
  if (!holder) throw apiError('SERVICE_UNAVAILABLE', 'this broker login was released while the request ran; retry', { headers: { 'retry-after': '1' } });
  return holder;
}

/** Whether an error is the refusal of a login in use (where PostgreSQL refused a seat's login:
 *  `loginInUse` thrown when its write returned false, not checked against the password yet). */
export const isLoginInUse = (err: unknown) => toApiError(err).code === 'BROKER_LOGIN_IN_USE';
