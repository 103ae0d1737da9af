// Numbers and codes the SPEC states, pinned where they live: the configuration's defaults (each can
// be changed for tests and operators; a gateway started without settings keeps the SPEC's) and the
// one table of error statuses (src/errors.ts).
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config.js';
import { ERROR_STATUS } from '../../src/errors.js';

describe('SPEC §8 limits are the defaults', () => {
  it('heartbeats every 10 s; 40 failed authentications from one IP within 5 minutes block it for 10 minutes', () => {
    const c = parseConfig({});
    expect(c.streamHeartbeatMs).toBe(10_000);
    expect(c.authFailLimit).toBe(40);
    expect(c.authFailWindowMs).toBe(5 * 60_000);
    expect(c.authBlockMs).toBe(10 * 60_000);
  });
});

describe('SPEC §7 codes', () => {
  it('every code the table names answers its status', () => {
    expect({
      BAD_REQUEST: ERROR_STATUS.BAD_REQUEST, TRADE_REQUEST_ERROR: ERROR_STATUS.TRADE_REQUEST_ERROR,
      NO_SUBSCRIPTION: ERROR_STATUS.NO_SUBSCRIPTION, IDEMPOTENCY_UNCERTAIN: ERROR_STATUS.IDEMPOTENCY_UNCERTAIN,
      IDEMPOTENCY_KEY_REUSED: ERROR_STATUS.IDEMPOTENCY_KEY_REUSED, RATE_LIMITED: ERROR_STATUS.RATE_LIMITED,
      TERMINAL_ERROR: ERROR_STATUS.TERMINAL_ERROR, NOT_ON_THIS_TERMINAL: ERROR_STATUS.NOT_ON_THIS_TERMINAL,
    }).toEqual({
      BAD_REQUEST: 400, TRADE_REQUEST_ERROR: 400, NO_SUBSCRIPTION: 402, IDEMPOTENCY_UNCERTAIN: 409,
      IDEMPOTENCY_KEY_REUSED: 422, RATE_LIMITED: 429, TERMINAL_ERROR: 500, NOT_ON_THIS_TERMINAL: 501,
    });
  });
});
