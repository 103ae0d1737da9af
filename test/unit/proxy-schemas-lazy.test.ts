// The gateway operations' schemas are built when first asked for, not when the module loads (a
// gateway process start paid for all ~70 of them, and serves few): each platform's schema is a
// getter that builds it once, and whether a platform has an operation is known without building it.
import { describe, expect, it } from 'vitest';
import { OPERATIONS } from '../../src/http/routes/proxySchemas.js';

describe('the gateway operation table', () => {
  it('builds a platform schema on first use, once, and says which platforms have an operation without building it', () => {
    for (const [op, def] of Object.entries(OPERATIONS)) {
      const platforms = (['P4', 'P5'] as const).filter((p) => p in def);
      expect(platforms.length, op).toBeGreaterThan(0);
      for (const p of platforms) {
        expect(typeof Object.getOwnPropertyDescriptor(def, p)?.get, `${op} ${p}`).toBe('function');
        expect(def[p], `${op} ${p}`).toBe(def[p]);
      }
    }
    expect('P4' in OPERATIONS.OrderSendSafe!).toBe(false);
    expect(OPERATIONS.OrderSend!.P4!.safeParse({ handle: 'h', symbol: 'EURUSD', operation: 'Buy', volume: '0.01' }).success).toBe(true);
  });
});
