// One node's connection to NATS, shared by the account router and the stream relay. It reconnects
// for ever on its own; meanwhile `up` is false so callers answer a clean 503 at once instead of
// queueing requests that time out. noEcho: a node never receives what it published itself (its
// own sockets got those events from its shards already), so nothing is delivered twice.
import { connect, type NatsConnection } from '@nats-io/transport-node';
import type { Logger } from '../log.js';
import { errorMessage } from '../util/errorMessage.js';
import { decodeUserinfoPart, splitUrlCredentials } from '../util/urlCredentials.js';
import { EngineUnavailableError, unavailableCode } from './engineUnavailable.js';

export interface NatsLinkOptions {
  /** NATS_URL: one URL or several, comma-separated. */
  url: string;
  /** The node's id, as the connection's name (seen in the server's monitoring). */
  name: string;
  log: Logger;
  /** Wait between reconnect attempts (ms). */
  reconnectWaitMs?: number;
}

const natsUrls = (url: string): string[] => url.split(',').map((s) => s.trim()).filter((s) => s !== '');

/** host:port of each server, for logs: a URL may carry credentials. */
export function natsServersForLog(url: string): string {
  return natsUrls(url).map((u) => splitUrlCredentials(u).url.replace(/^[a-z]+:\/\//i, '')).join(',');
}

/** NATS_URL as nats.js connects with it. nats.js takes credentials as options only: a `user:password@`
 *  or `token@` left in a server URL is never sent, and a server that requires them refuses the node
 *  (Authorization Violation). The servers go without them; the credentials are the first URL's that
 *  carries any (the servers of one NATS cluster share their accounts), percent-decoded. */
export function natsConnectOptions(url: string): { servers: string[]; user?: string; pass?: string; token?: string } {
  const split = natsUrls(url).map(splitUrlCredentials);
  const userinfo = split.find((s) => s.userinfo !== undefined)?.userinfo;
  const out: { servers: string[]; user?: string; pass?: string; token?: string } = { servers: split.map((s) => s.url) };
  if (userinfo === undefined) return out;
  const colon = userinfo.indexOf(':');
  if (colon < 0) out.token = decodeUserinfoPart(userinfo);
  else Object.assign(out, { user: decodeUserinfoPart(userinfo.slice(0, colon)), pass: decodeUserinfoPart(userinfo.slice(colon + 1)) });
  return out;
}

/** No NATS server answered, or it refused this node, at start (one line, exit 1). */
export class NatsUnavailableError extends EngineUnavailableError {}

export class NatsLink {
  private isUp = true;
  private readonly listeners = new Set<(up: boolean) => void>();

  private constructor(readonly nc: NatsConnection, private readonly log: Logger) {
    void this.watch();
  }

  /** Connects (rejects with a NatsUnavailableError when no server answers now: the caller decides
   *  whether that is fatal). */
  static async connect(opts: NatsLinkOptions): Promise<NatsLink> {
    const nc = await connect({
      ...natsConnectOptions(opts.url),
      name: opts.name,
      noEcho: true,
      // No Error (with its stack) made per request: the forwarding hot path.
      noAsyncTraces: true,
      maxReconnectAttempts: -1,
      reconnectTimeWait: opts.reconnectWaitMs ?? 250,
      // A dead server is noticed by the socket closing; pings catch a silent one within ~10 s.
      pingInterval: 5_000,
      maxPingOut: 2,
    }).catch((err: unknown) => {
      // Its errors name no server (and ECONNREFUSED only as their cause): main would print a stack.
      throw new NatsUnavailableError(`NATS ${natsServersForLog(opts.url)}`, unavailableCode(err));
    });
    opts.log.info('connected to NATS', { servers: natsServersForLog(opts.url) });
    return new NatsLink(nc, opts.log);
  }

  /** Connected now (requests and publishes go out). */
  get up(): boolean {
    return this.isUp && !this.nc.isClosed();
  }

  /** Called with false when the connection drops, true when it is back. Returns an unsubscribe. */
  onStatus(listener: (up: boolean) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private set(up: boolean): void {
    if (up === this.isUp) return;
    this.isUp = up;
    for (const l of this.listeners) l(up);
  }

  private async watch(): Promise<void> {
    try {
      for await (const s of this.nc.status()) {
        if (s.type === 'disconnect' || s.type === 'reconnecting') {
          if (this.isUp) this.log.warn('NATS connection lost; reconnecting', { server: s.type === 'disconnect' ? s.server : undefined });
          this.set(false);
        } else if (s.type === 'reconnect') {
          this.log.info('NATS connection back', { server: s.server });
          this.set(true);
        } else if (s.type === 'close') {
          this.set(false);
        }
      }
    } catch (err) {
      this.log.error('NATS status watch ended', { err: errorMessage(err) });
    }
    this.set(false);
  }

  async close(): Promise<void> {
    if (this.nc.isClosed()) return;
    await this.nc.drain().catch(() => this.nc.close());
  }
}
