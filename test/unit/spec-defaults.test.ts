// The numbers SPEC §8 states are the configuration's defaults (each can be changed for tests and
// operators; a gateway started without settings keeps the SPEC's).
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config.js';

describe('SPEC §8 limits are the defaults', () => {
  it('heartbeats every 10 s; 40 failed authentications from one IP within 5 minutes block it for 10 minutes', () => {
    const c = parseConfig({});
    expect(c.streamHeartbeatMs).toBe(10_000);
    expect(c.authFailLimit).toBe(40);
    expect(c.authFailWindowMs).toBe(5 * 60_000);
    expect(c.authBlockMs).toBe(10 * 60_000);
  });
});
