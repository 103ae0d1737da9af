// One mapping from broker failures to API errors for both route families (SPEC §7). A read that
// timed out is 503 (retry is safe); a trade that may have reached the broker is 500, never an
// invitation to retry blindly; the same failure is the same status on /v1/proxy and the classic routes.
import { describe, expect, it } from 'vitest';
import {
  BrokerAuthError, BrokerDisconnectedError, BrokerError, BrokerNotSupportedError, BrokerRequestError, BrokerTimeoutError,
} from '../../src/market/brokerErrors.js';
import { apiError } from '../../src/errors.js';
import { brokerFailure } from '../../src/runtime/brokerFailures.js';

const status = (e: unknown, kind?: 'read' | 'trade') => {
  const a = brokerFailure(e, kind);
  return [a.status, a.code];
};

describe('brokerFailure', () => {
  it('a broker timeout on a read is 503 SERVICE_UNAVAILABLE, sent or not', () => {
    expect(status(new BrokerTimeoutError(false))).toEqual([503, 'SERVICE_UNAVAILABLE']);
    expect(status(new BrokerTimeoutError(true))).toEqual([503, 'SERVICE_UNAVAILABLE']);
  });

  it('a trade that timed out before it was sent is 503; one that may have executed is 500 TERMINAL_ERROR naming OpenedOrders', () => {
    expect(status(new BrokerTimeoutError(false), 'trade')).toEqual([503, 'SERVICE_UNAVAILABLE']);
    const e = brokerFailure(new BrokerTimeoutError(true, 'reply lost', 'r1'), 'trade');
    expect([e.status, e.code]).toEqual([500, 'TERMINAL_ERROR']);
    expect(e.message).toMatch(/OpenedOrders/);
  });

  it('maps every broker error code once', () => {
    expect(status(new BrokerDisconnectedError())).toEqual([503, 'NOT_CONNECTED']);
    expect(status(new BrokerRequestError('UNKNOWN_SYMBOL', 'unknown symbol XYZ'))).toEqual([400, 'BAD_REQUEST']);
    expect(status(new BrokerNotSupportedError('balanceHistory', 'P4'))).toEqual([501, 'NOT_ON_THIS_TERMINAL']);
    expect(status(new BrokerAuthError())).toEqual([400, 'BROKER_AUTH_FAILED']);
    expect(status(new BrokerError('BROKER_PROTOCOL', 'bad frame'))).toEqual([500, 'TERMINAL_ERROR']);
    expect(status(new Error('boom'))).toEqual([500, 'TERMINAL_ERROR']);
  });

  it('every 503 says when to retry (retry-after: 1): a connection down, a read or an unsent trade that timed out', () => {
    for (const e of [brokerFailure(new BrokerDisconnectedError()), brokerFailure(new BrokerDisconnectedError(), 'trade'), brokerFailure(new BrokerTimeoutError(true)), brokerFailure(new BrokerTimeoutError(false), 'trade')]) {
      expect([e.status, e.headers?.['retry-after']]).toEqual([503, '1']);
    }
  });

  it('recognizes a broker error that lost its class crossing a thread (structured clone keeps code and sent)', () => {
    const cloned = structuredClone({ code: 'BROKER_TIMEOUT', message: 'no reply', sent: true });
    expect(status(cloned)).toEqual([503, 'SERVICE_UNAVAILABLE']);
    expect(status(cloned, 'trade')).toEqual([500, 'TERMINAL_ERROR']);
  });

  it('passes an API error through and never shows the cause of an unexpected fault', () => {
    const api = apiError('READ_ONLY_KEY', 'read-only');
    expect(brokerFailure(api)).toBe(api);
    expect(brokerFailure(new Error('password=hunter2')).message).not.toMatch(/hunter2/);
  });
});
