// Where a request comes from, as the auth throttle, the rate limits and the logs see it: the socket's
// address, the right-most X-Forwarded-For entry behind a trusted proxy (TRUST_PROXY), or, for a
// request the pipelining listener relayed (src/http/pipeliningRelay.ts), the address of the client
// of that listener. The relay says so in one header carrying a per-process secret; the header is
// believed only with that secret and only on a connection through the gateway's private Unix
// socket (which has no address), so no client can forge it.
import { randomBytes, timingSafeEqual } from 'node:crypto';

/** The header the relay sets (and removes from what clients send): `<secret> <client address>`. */
export const RELAY_HEADER = 'x-tagw-relay-peer';

/** How a gateway reads client addresses; built once at start. */
export class ClientAddress {
  private readonly secret: Buffer | undefined;
  /**
   * `relaySecret`: set only when the pipelining listener runs; without it the relay header is never
   * read (the main port's requests pay nothing for the feature).
   */
  constructor(readonly trustProxy: boolean, readonly relaySecret?: string) {
    this.secret = relaySecret === undefined ? undefined : Buffer.from(relaySecret);
  }

  /** A fresh secret for the relay of one gateway process (never logged, never sent off loopback). */
  static newRelaySecret(): string {
    return randomBytes(32).toString('base64url');
  }

  get relays(): boolean {
    return this.secret !== undefined;
  }

  /**
   * The client address the relay header `value` names, or undefined when it is not the relay's:
   * wrong or missing secret, or a connection with an address, so not through the private Unix
   * socket (`socketAddress`, read only here).
   */
  relayedPeer(value: string, socketAddress: () => string): string | undefined {
    const secret = this.secret;
    if (secret === undefined) return undefined;
    const space = value.indexOf(' ');
    if (space !== secret.length) return undefined;
    if (!timingSafeEqual(Buffer.from(value.slice(0, space)), secret)) return undefined;
    if (socketAddress() !== '') return undefined;
    const peer = value.slice(space + 1);
    return peer.length > 0 ? peer : undefined;
  }

  /** The header value the relay sends for a client at `address`. */
  relayHeader(address: string): string {
    if (this.relaySecret === undefined) throw new Error('no relay secret');
    return `${this.relaySecret} ${address}`;
  }
}

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
