// The CLI's HTTP client for a running gateway: the address from the same configuration the gateway
// reads (HOST, PORT, TAGW_CONFIG), or TAGW_URL / --url. Errors become CliErrors with exit codes;
// the management key goes in a header and never into a message.
import type { Config } from '../config.js';
import { CliError, EXIT } from './errors.js';

/** Where a gateway started with `config` listens, as a client reaches it from this machine. */
export function gatewayUrl(config: Config, override?: string): string {
  if (override) return override.replace(/\/+$/, '');
  // A wildcard address is not one to connect to: the loopback of the same family is.
  const host = config.host === '0.0.0.0' ? '127.0.0.1' : config.host === '::' ? '::1' : config.host;
  const tls = Boolean((config as { tlsCertFile?: string }).tlsCertFile);
  return `${tls ? 'https' : 'http'}://${host.includes(':') ? `[${host}]` : host}:${config.port}`;
}

export interface ApiErrorBody { error?: string; message?: string }

export class GatewayClient {
  constructor(readonly url: string, private readonly key: () => Promise<string>) {}

  /** JSON of a 2xx answer; anything else throws a CliError naming the status and the gateway's message. */
  async call<T = any>(method: string, path: string, body?: unknown, opts: { auth?: boolean } = {}): Promise<T> {
    const headers: Record<string, string> = {};
    if (opts.auth !== false) headers.authorization = `Bearer ${await this.key()}`;
    if (body !== undefined) headers['content-type'] = 'application/json';
    let res: Response;
    try {
      res = await fetch(this.url + path, { method, headers, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) });
    } catch (e) {
      const cause = (e as { cause?: { code?: string; message?: string } }).cause;
      throw new CliError(EXIT.UNREACHABLE, `no gateway answers at ${this.url} (${cause?.code ?? cause?.message ?? (e as Error).message}); is it running, and are HOST/PORT (or TAGW_URL) those it was started with?`);
    }
    const text = await res.text();
    let json: unknown;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    if (res.ok) return json as T;
    const e = (json ?? {}) as ApiErrorBody;
    const what = `${method} ${path}: ${res.status} ${e.error ?? res.statusText}${e.message ? `: ${e.message}` : ''}`;
    if (res.status === 401) throw new CliError(EXIT.AUTH, `${what} (the management key was refused: rotated or revoked?)`);
    if (res.status === 404 && e.error === 'ROUTE_NOT_FOUND') throw new CliError(EXIT.FAILED, `${what} (the gateway at ${this.url} is an older build without this route)`);
    throw new CliError(EXIT.FAILED, what);
  }
}
