// Why a login attempt failed, as `tagw accounts list` shows it (src/runtime/hosts/loginFailure.ts):
// the error's message on one bounded line, never the account's password, a key's secret or an
// address's credentials, whatever a broker or bridge put in it.
import { describe, expect, it } from 'vitest';
import { loginFailureReason, REASON_MAX } from '../../src/runtime/hosts/loginFailure.js';

describe('a failed login attempt\'s reason', () => {
  it('is the message, the password (given sealed too) redacted, key secrets and URL credentials cut, one line, bounded', () => {
    expect(loginFailureReason(new Error('cannot reach bridge 127.0.0.1:4510'), 'pw-1')).toBe('cannot reach bridge 127.0.0.1:4510');
    expect(loginFailureReason(new Error('login 7 refused: password Hunter2! is wrong'), () => 'Hunter2!')).toBe('login 7 refused: password [redacted] is wrong');
    const key = `tagw_k_${'0123456789abcdef'}_${'s'.repeat(43)}`;
    expect(loginFailureReason(new Error(`echo ${key} via tls://ops:tok3n@bridge:4510\n  at line`), 'x')).toBe('echo tagw_k_0123456789abcdef_[redacted] via tls://[redacted]@bridge:4510 at line');
    const long = loginFailureReason(new Error('x'.repeat(1_000)), 'pw');
    expect(long).toHaveLength(REASON_MAX);
    expect(loginFailureReason('plain string', 'pw')).toBe('plain string');
    expect(loginFailureReason(new Error(''), 'pw')).toBe('Error');
  });
});
