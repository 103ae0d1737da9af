// Rights of a principal over an account (SPEC §5.4-5.6). Ownership is checked by the caller
// (an unknown or foreign account is 404, so ids of other customers are not disclosed).
import { apiError } from '../errors.js';
import type { Principal } from './authenticator.js';

export function assertAccountScope(p: Principal, accountId: string): void {
  if (p.accountScoped && p.seatId !== accountId) {
    throw apiError('ACCOUNT_SCOPE', 'this key is scoped to another account');
  }
}

export function assertCanTrade(p: Principal): void {
  if (p.readOnly) throw apiError('READ_ONLY_KEY', 'this key is read-only: trading calls are not allowed');
}

/** Binding broker logins (creating seats, re-binding) is not "data and streaming" (SPEC §2 readOnly). */
export function assertCanBind(p: Principal): void {
  if (p.kind === 'api' && p.readOnly) throw apiError('READ_ONLY_KEY', 'this key is read-only: it cannot create or bind broker accounts');
}
