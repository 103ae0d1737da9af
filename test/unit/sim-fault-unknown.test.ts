// unknownAfterSend: a trade it takes executes and loses its reply, and for lookupFailMs from then the
// login's lookups fail (the broker cannot be asked). What the gateway and a bot see of it:
// test/integration/client-uncertain-fault.test.ts.
import { describe, expect, it } from 'vitest';
import { FaultController } from '../../src/sim/faults.js';

describe('simulator fault unknownAfterSend', () => {
  it('takes its count of trades; lookups fail for lookupFailMs after each, then work; listed until then', () => {
    let now = 0;
    const f = new FaultController(1, () => now);
    f.set({ server: 'S', login: 'a', kind: 'unknownAfterSend', count: 1, lookupFailMs: 1_000 });
    expect(f.claimsFirst('S', 'a')).toBe(true);
    expect(f.claimsFirst('S', 'b')).toBe(false);
    expect(f.lookupFails('S', 'a')).toBe(false); // no trade taken yet
    expect(f.tradeFault('S', 'a')).toBe('unknownAfterSend');
    expect(f.claimsFirst('S', 'a')).toBe(false); // its count is used up
    expect(f.tradeFault('S', 'a')).toBeNull();
    expect(f.lookupFails('S', 'a')).toBe(true);
    expect(f.lookupFails('S', 'b')).toBe(false);
    expect(f.list()).toHaveLength(1);
    now = 999;
    expect(f.lookupFails('S', 'a')).toBe(true);
    now = 1_000;
    expect(f.lookupFails('S', 'a')).toBe(false);
    expect(f.list()).toHaveLength(0);
  });

  it('clearing it, or its durationMs, ends the lookup failures at once', () => {
    let now = 0;
    const f = new FaultController(1, () => now);
    f.set({ server: 'S', login: 'a', kind: 'unknownAfterSend', count: 1, lookupFailMs: 60_000 });
    f.tradeFault('S', 'a');
    expect(f.lookupFails('S', 'a')).toBe(true);
    expect(f.clear(undefined, 'S', 'a')).toBe(1);
    expect(f.lookupFails('S', 'a')).toBe(false);
    f.set({ server: 'S', kind: 'unknownAfterSend', probability: 1, lookupFailMs: 60_000, durationMs: 5_000 });
    expect(f.tradeFault('S', 'a')).toBe('unknownAfterSend');
    expect(f.lookupFails('S', 'a')).toBe(true);
    now = 5_000;
    expect(f.lookupFails('S', 'a')).toBe(false);
    expect(f.tradeFault('S', 'a')).toBeNull();
  });
});
