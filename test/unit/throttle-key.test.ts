// Whom the failed-auth throttle counts (SPEC §8 "from one IP"): an IPv4 address, or an IPv6 /64 (a
// client holds a whole /64 and rotates its address within it at will, so counting exact IPv6
// addresses never blocked it).
import { describe, expect, it } from 'vitest';
import { AuthThrottle } from '../../src/auth/throttle.js';
import { throttleKey } from '../../src/util/ipAddress.js';

describe('throttleKey', () => {
  it('IPv6: the /64, however the address is written', () => {
    const k = throttleKey('2001:db8:1:2::a');
    expect(k).toBe('2001:0db8:0001:0002::/64');
    for (const same of ['2001:db8:1:2:ffff:ffff:ffff:ffff', '2001:0DB8:0001:0002:0000:0000:0000:0001', '[2001:db8:1:2::b]:443', '2001:db8:1:2::c%eth0', ' 2001:db8:1:2::d ']) {
      expect(throttleKey(same), same).toBe(k);
    }
    expect(throttleKey('2001:db8:1:3::a')).not.toBe(k);
    expect(throttleKey('::1')).toBe('0000:0000:0000:0000::/64');
  });

  it('IPv4: the address, also written IPv4-mapped (a dual-stack socket) or with a port', () => {
    expect(throttleKey('198.51.100.7')).toBe('198.51.100.7');
    expect(throttleKey('198.51.100.7:5123')).toBe('198.51.100.7');
    expect(throttleKey('::ffff:198.51.100.7')).toBe('198.51.100.7');
    // as uWS writes it
    expect(throttleKey('0000:0000:0000:0000:0000:ffff:c633:6407')).toBe('198.51.100.7');
    // Neighbours are other clients (one IPv4 address is one client, as SPEC §8 says).
    expect(throttleKey('::ffff:198.51.100.8')).toBe('198.51.100.8');
  });

  it('anything else is its own key, as it is', () => {
    expect(throttleKey('unknown')).toBe('unknown');
    expect(throttleKey('')).toBe('');
  });
});

describe('AuthThrottle keyed by throttleKey', () => {
  it('failures from addresses rotating within one /64 block the /64, not another /64 or an IPv4 client', () => {
    let now = 1_000_000;
    const th = new AuthThrottle({ limit: 3, windowMs: 60_000, blockMs: 120_000, clock: { now: () => now } });
    th.fail('2001:db8:1:2::1');
    th.fail('2001:db8:1:2:aaaa::2');
    expect(th.blockedFor('2001:db8:1:2::1')).toBe(0);
    th.fail('2001:db8:1:2:bbbb:cccc:dddd:3');
    expect(th.blockedFor('2001:db8:1:2:9999::9')).toBe(120);
    expect(th.blockedFor('2001:db8:1:3::1')).toBe(0);
    expect(th.blockedFor('198.51.100.7')).toBe(0);
    // IPv4 clients stay one address each, the IPv4-mapped form the same client.
    th.fail('198.51.100.7');
    th.fail('198.51.100.8');
    th.fail('0000:0000:0000:0000:0000:ffff:c633:6407');
    expect(th.blockedFor('198.51.100.8')).toBe(0);
    th.fail('::ffff:198.51.100.7');
    expect(th.blockedFor('198.51.100.7')).toBe(120);
    now += 120_000;
    expect(th.blockedFor('2001:db8:1:2::1')).toBe(0);
  });
});
