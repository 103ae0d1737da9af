// Client IP addresses in text: as uWS writes them, and whom the failed-auth throttle counts.
import { isIPv4, isIPv6 } from 'node:net';

/**
 * A Node socket address as uWS writes the same address (getRemoteAddressAsText): IPv4 dotted,
 * IPv6 as eight zero-padded groups (`::ffff:1.2.3.4` becomes `0000:…:ffff:0102:0304`), so a client
 * is one key in the throttle whichever listener it came through.
 */
export function uwsAddressText(address: string): string {
  if (!address.includes(':')) return address;
  let text = address;
  const zone = text.indexOf('%');
  if (zone >= 0) text = text.slice(0, zone);
  // An embedded IPv4 tail becomes two groups.
  const v4 = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (v4) {
    const [a, b, c, d] = v4.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, v4.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.split('::') as [string, string | undefined];
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const groups = tail === undefined ? left : [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right];
  return groups.map((g) => g.padStart(4, '0')).join(':');
}

/**
 * Whom the failed-auth throttle counts (SPEC §8 "failed authentications from one IP"): an IPv4
 * address as it is (also written IPv4-mapped, `::ffff:a.b.c.d` as a dual-stack socket reports it, or
 * with a `:port` a proxy appended); an IPv6 address by its /64. A /64 is what one subscriber or
 * host is given (SLAAC and privacy addresses rotate within it at will), so counting exact IPv6
 * addresses let a client try keys from a fresh address every time and never be blocked. Anything
 * else (no address known) is its own key.
 */
export function throttleKey(address: string): string {
  let a = address.trim().toLowerCase();
  if (a.startsWith('[')) {
    const end = a.indexOf(']');
    if (end > 0) a = a.slice(1, end);
  } else if (/^\d+\.\d+\.\d+\.\d+:\d+$/.test(a)) {
    a = a.slice(0, a.lastIndexOf(':'));
  }
  if (isIPv4(a)) return a;
  const zone = a.indexOf('%');
  if (!isIPv6(zone >= 0 ? a.slice(0, zone) : a)) return address;
  const groups = uwsAddressText(a).split(':');
  if (groups.slice(0, 5).every((g) => g === '0000') && groups[5] === 'ffff') {
    const hi = parseInt(groups[6]!, 16);
    const lo = parseInt(groups[7]!, 16);
    return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  }
  return `${groups.slice(0, 4).join(':')}::/64`;
}
