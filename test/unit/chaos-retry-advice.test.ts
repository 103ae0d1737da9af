// The single-node chaos run's clients (test/helpers/clusterTraffic.ts, followsRetryAdvice) send a
// request again when its answer says to (docs/accounts-and-trading.md, the record's `recovering`
// row): a reply lost after sending (500 TERMINAL_ERROR with retry-after), a broker that cannot be
// asked yet (409 final:false); never after a final answer.
import { describe, expect, it } from 'vitest';
import { followsRetryAdvice, type Answer } from '../helpers/clusterTraffic.js';

const answer = (status: Answer['status'], body?: unknown, retryAfter?: string): Answer => ({
  clientOrderId: 'x', node: 'gw', status, body, replay: false, sentAt: 0, answeredAt: 0, ...(retryAfter ? { retryAfter } : {}),
});

describe('followsRetryAdvice', () => {
  it('again after no answer, a 503, a lost reply (500 with retry-after) and a 409 not final', () => {
    expect(followsRetryAdvice(answer('refused'))).toBe(true);
    expect(followsRetryAdvice(answer(503, { error: 'NOT_CONNECTED' }, '1'))).toBe(true);
    expect(followsRetryAdvice(answer(500, { error: 'TERMINAL_ERROR' }, '1'))).toBe(true);
    expect(followsRetryAdvice(answer(409, { error: 'IDEMPOTENCY_UNCERTAIN', final: false }, '1'))).toBe(true);
  });
  it('not after a 200, a final 409, a 500 without retry-after, or a refusal by the broker', () => {
    expect(followsRetryAdvice(answer(200, { ticket: 1 }))).toBe(false);
    expect(followsRetryAdvice(answer(409, { error: 'IDEMPOTENCY_UNCERTAIN', final: true }))).toBe(false);
    expect(followsRetryAdvice(answer(500, { error: 'TERMINAL_ERROR' }))).toBe(false);
    expect(followsRetryAdvice(answer(400, { error: 'TRADE_REQUEST_ERROR' }))).toBe(false);
  });
});
