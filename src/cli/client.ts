// The CLI's HTTP client for a running gateway: the address from the same configuration the gateway
// reads (HOST, PORT, TLS_CERT_FILE, TAGW_CONFIG), or TAGW_URL / --url. Errors become CliErrors with
// exit codes; the management key goes in a header and never into a message.
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { request as httpRequest, type IncomingMessage, type RequestOptions } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { isIP } from 'node:net';
import { rootCertificates } from 'node:tls';
import type { Config } from '../config.js';
import { CliError, EXIT } from './errors.js';
import { redactUrlCredentials } from '../util/urlCredentials.js';

/** Where a gateway started with `config` listens, as a client reaches it from this machine. */
export function gatewayUrl(config: Config, override?: string): string {
  if (override) return override.replace(/\/+$/, '');
  // A wildcard address is not one to connect to: the loopback of the same family is.
  const host = config.host === '0.0.0.0' ? '127.0.0.1' : config.host === '::' ? '::1' : config.host;
  return `${config.tlsCertFile ? 'https' : 'http'}://${host.includes(':') ? `[${host}]` : host}:${config.port}`;
}

/**
 * The name to check an HTTPS gateway's certificate against when the CLI reaches it on this machine
 * by its loopback address (HOST/PORT, no TAGW_URL): the first DNS name of the gateway's own
 * certificate file, e.g. the one Let's Encrypt made it for, which 127.0.0.1 is not. Undefined:
 * check the URL's host as usual (an address given by hand, or a file this user cannot read).
 */
export function loopbackServername(config: Config, url: string, override: string | undefined): string | undefined {
  if (override || !config.tlsCertFile) return undefined;
  const host = new URL(url).hostname.replace(/^\[|\]$/g, '');
  if (isIP(host) === 0 || !(host.startsWith('127.') || host === '::1')) return undefined;
  try {
    const san = new X509Certificate(readFileSync(config.tlsCertFile)).subjectAltName ?? '';
    return san.split(', ').find((e) => e.startsWith('DNS:') && !e.includes('*'))?.slice(4);
  } catch {
    return undefined;
  }
}

/**
 * Certificates an HTTPS gateway may chain to: the system's, the gateway's own certificate file
 * (a self-signed one is its own anchor; readable where the CLI runs beside the gateway), its CA
 * file, and TAGW_CA_FILE. The host name is checked as usual (TAGW_URL names the host a
 * certificate for a DNS name was made for).
 */
export function trustedCas(config: Config, env: NodeJS.ProcessEnv): string[] | undefined {
  const files = [config.tlsCertFile, config.tlsCaFile, env.TAGW_CA_FILE].filter((f): f is string => Boolean(f));
  if (files.length === 0) return undefined;
  const extra: string[] = [];
  for (const f of files) {
    try {
      extra.push(readFileSync(f, 'utf8'));
    } catch (e) {
      // Not readable by this user (the gateway's files are private): the system's roots may do.
      if (f === env.TAGW_CA_FILE) throw new CliError(EXIT.USAGE, `TAGW_CA_FILE ${f}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
    }
  }
  return [...rootCertificates, ...extra];
}

export interface ApiErrorBody { error?: string; message?: string }

interface Answer { status: number; statusText: string; text: string }

export class GatewayClient {
  /** Where the gateway is, as printed (status, errors): a `user:password@` in TAGW_URL is never sent
   *  (the management key authenticates) and never shown. */
  readonly url: string;

  constructor(url: string, private readonly key: () => Promise<string>, private readonly ca?: string[], private readonly servername?: string) {
    this.url = redactUrlCredentials(url);
  }

  /** One request; node:http(s) rather than fetch, so a private CA can be trusted for this call only. */
  private send(method: string, path: string, headers: Record<string, string>, body?: string): Promise<Answer> {
    const u = new URL(this.url + path);
    const https = u.protocol === 'https:';
    const opts: RequestOptions & { ca?: string[] } = {
      method, hostname: u.hostname.replace(/^\[|\]$/g, ''), port: u.port, path: u.pathname + u.search, headers,
      // A connection per call: a CLI makes a handful, and a pooled socket the server has just closed would reset the next one.
      agent: false,
      ...(https && this.ca ? { ca: this.ca } : {}),
      ...(https && this.servername ? { servername: this.servername } : {}),
    };
    return new Promise((resolve, reject) => {
      const req = (https ? httpsRequest : httpRequest)(opts, (res: IncomingMessage) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, statusText: res.statusMessage ?? '', text: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end(body);
    });
  }

  /** JSON of a 2xx answer; anything else throws a CliError naming the status and the gateway's message. */
  /** `accept`: other statuses whose body is the answer too (/readyz's 503 says what is down). */
  async call<T = any>(method: string, path: string, body?: unknown, opts: { auth?: boolean; accept?: number[] } = {}): Promise<T> {
    const headers: Record<string, string> = {};
    if (opts.auth !== false) headers.authorization = `Bearer ${await this.key()}`;
    if (body !== undefined) headers['content-type'] = 'application/json';
    let res: Answer;
    try {
      res = await this.send(method, path, headers, body !== undefined ? JSON.stringify(body) : undefined);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code ?? (e as Error).message;
      if (/CERT|SELF_SIGNED|ALTNAME|UNABLE_TO/.test(code)) {
        throw new CliError(EXIT.UNREACHABLE, `${this.url}: its TLS certificate is not trusted here (${code}): set TAGW_CA_FILE to the CA that signed it, or TAGW_URL to the host name it was made for`);
      }
      throw new CliError(EXIT.UNREACHABLE, `no gateway answers at ${this.url} (${code}); is it running, and are HOST/PORT (or TAGW_URL) those it was started with?`);
    }
    const text = res.text;
    let json: unknown;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    if ((res.status >= 200 && res.status < 300) || opts.accept?.includes(res.status)) return json as T;
    const e = (json ?? {}) as ApiErrorBody;
    const what = `${method} ${path}: ${res.status} ${e.error ?? res.statusText}${e.message ? `: ${e.message}` : ''}`;
    if (res.status === 401) throw new CliError(EXIT.AUTH, `${what} (the management key was refused: rotated or revoked?)`);
    if (res.status === 404 && e.error === 'ROUTE_NOT_FOUND') throw new CliError(EXIT.FAILED, `${what} (the gateway at ${this.url} is an older build without this route)`);
    throw new CliError(EXIT.FAILED, what);
  }
}
