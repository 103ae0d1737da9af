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
