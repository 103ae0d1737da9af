// Broker failures as API errors (SPEC §7), in one place for both route families: the classic
// routes (hosts/accountOps.ts, hosts/accountTrade.ts) and the gateway routes (hosts/sessions.ts,
// hosts/gatewayOps.ts) answer the same failure with the same status.
import { ApiError, apiError } from '../errors.js';
import type { BrokerError } from '../market/brokerErrors.js';

/** A read can be retried blindly; a trade whose request may have reached the broker cannot. */
export type BrokerCallKind = 'read' | 'trade';

/**
 * The API error for anything a broker call rejected with. Errors that crossed a thread or the
 * bridge socket may have lost their class, so they are recognized by their `code`.
 *
 * A timeout is 503 (retry) when nothing can have happened: any read, or a trade not sent. A trade
 * that may have been executed is 500 TERMINAL_ERROR: a client that retried a 503 without a
 * clientOrderId could place the order twice (with one, the retry answers 409 IDEMPOTENCY_UNCERTAIN).
 */
export function brokerFailure(e: unknown, kind: BrokerCallKind = 'read'): ApiError {
  if (e instanceof ApiError) return e;
  if (typeof e === 'object' && e !== null && typeof (e as { code?: unknown }).code === 'string') {
    const err = e as BrokerError & { sent?: boolean };
    switch (err.code) {
      case 'BROKER_REQUEST': return apiError('BAD_REQUEST', err.message);
      case 'BROKER_NOT_SUPPORTED': return apiError('NOT_ON_THIS_TERMINAL', err.message);
      case 'BROKER_DISCONNECTED': return apiError('NOT_CONNECTED', 'the account is not connected to its broker (reconnecting); retry shortly', { headers: { 'retry-after': '1' } });
      case 'BROKER_TIMEOUT':
        if (kind === 'trade' && err.sent !== false) {
          return apiError('TERMINAL_ERROR', 'the broker did not answer in time; the order may have been executed: check OpenedOrders before sending it again', { cause: e });
        }
        return apiError('SERVICE_UNAVAILABLE', `the broker did not answer in time: ${err.message}; retry shortly`, { headers: { 'retry-after': '1' } });
      case 'BROKER_AUTH': return apiError('BROKER_AUTH_FAILED', 'the broker refused the login');
    }
  }
  return apiError('TERMINAL_ERROR', 'unexpected fault of the account connection', { cause: e });
}

/** The gateway operations that trade (SPEC §4.4 P5, §4.5 P4). */
export const GATEWAY_TRADE_OPS: ReadonlySet<string> = new Set([
  'OrderSendSafe', 'OrderSend', 'OrderModifySafe', 'OrderModify', 'OrderCloseSafe', 'OrderClose', 'OrderDelete',
]);
