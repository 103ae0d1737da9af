// The listening side of the gateway: plain HTTP, or HTTPS and WSS from uWS's SSLApp on the same
// port, with the certificate reloaded on SIGHUP without closing a single open socket.
//
// How a reload works on this uWS build: the SSL context an app was built with cannot be replaced,
// and the listen socket cannot move to a new app either (uSockets cannot bind the port again while
// accepted connections hold it: tried, bind fails until they close). What can change at run time
// are SNI contexts: a reload registers each DNS name of the new certificate as a server name with
// the new files (uWS keeps routes per server name, so every route and socket behaviour registered
// at start is registered again under it). A client that names the host (SNI; every client that
// checks the certificate's name does) gets the new certificate on its next handshake; open
// sockets keep theirs. A client connecting by bare IP address sends no SNI and gets the
// certificate of the start until the next restart (docs/operations.md#tls).
import { X509Certificate } from 'node:crypto';
import { createSecureContext } from 'node:tls';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AppOptions, TemplatedApp, us_listen_socket } from 'uWebSockets.js';
import type uwsModule from 'uWebSockets.js';
import { ConfigError, type Config } from '../config.js';
import { acquireCorkAnchor, releaseCorkAnchor } from './corkAnchor.js';

export interface TlsFiles {
  certFile: string;
  keyFile: string;
  caFile?: string | undefined;
  passphrase?: string | undefined;
}

/** A certificate, key or CA file that does not load: exit 2 at start, the old certificate kept on a reload. */
export class TlsConfigError extends ConfigError {}

/** The TLS files of the configuration; undefined: plain HTTP. */
export function tlsFilesOf(config: Config): TlsFiles | undefined {
  if (!config.tlsCertFile || !config.tlsKeyFile) return undefined;
  return { certFile: config.tlsCertFile, keyFile: config.tlsKeyFile, caFile: config.tlsCaFile, passphrase: config.tlsKeyPassphrase };
}

/** uWS ListenOptions.LIBUS_LISTEN_EXCLUSIVE_PORT (no SO_REUSEPORT: a second gateway cannot share the port). */
const LIBUS_LISTEN_EXCLUSIVE_PORT = 1;

/**
 * Reads the files with Node's TLS (uWS only says "construction failed"): a missing file, a key
 * that does not match the certificate or a wrong passphrase is one line naming what is wrong.
 */
export function checkTlsFiles(tls: TlsFiles): void {
  const read = (what: string, file: string) => {
    try {
      return readFileSync(file);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      throw new TlsConfigError(`${what} ${file}: ${code ? `${code}${FILE_HINT[code] ?? ''}` : (err as Error).message}`);
    }
  };
  const cert = read('TLS_CERT_FILE', tls.certFile);
  const key = read('TLS_KEY_FILE', tls.keyFile);
  const ca = tls.caFile ? read('TLS_CA_FILE', tls.caFile) : undefined;
  try {
    createSecureContext({ cert, key, ...(ca ? { ca } : {}), ...(tls.passphrase ? { passphrase: tls.passphrase } : {}) });
  } catch (err) {
    const said = (err as Error).message.split('\n')[0]!;
    throw new TlsConfigError(`TLS_CERT_FILE ${tls.certFile} / TLS_KEY_FILE ${tls.keyFile}: ${said}${tlsHint(said, tls.passphrase !== undefined)}`);
  }
}

const FILE_HINT: Record<string, string> = { ENOENT: ' (no such file)', EACCES: ' (permission denied to this user)', EISDIR: ' (a directory, not a file)' };

/** What to change, after OpenSSL's own words (which name no setting). */
function tlsHint(said: string, passphrase: boolean): string {
  if (/bad decrypt|bad password|interrupted or cancelled/i.test(said)) {
    return passphrase ? ": TLS_KEY_PASSPHRASE is not the key's passphrase" : ': the key is encrypted: set TLS_KEY_PASSPHRASE';
  }
  if (/key values mismatch/i.test(said)) return ": the key is not the certificate's (TLS_KEY_FILE names another key)";
  if (/DECODER routines|no start line|PEM routines/i.test(said)) return ': not a PEM certificate and key (BEGIN CERTIFICATE, BEGIN PRIVATE KEY)';
  return '';
}

/** The DNS names of a certificate (subjectAltName), wildcards included. */
export function dnsNamesOf(pem: Buffer): string[] {
  const san = new X509Certificate(pem).subjectAltName ?? '';
  return san.split(', ').filter((e) => e.startsWith('DNS:')).map((e) => e.slice(4));
}

/** A certificate's notAfter, in ms since the epoch. */
function notAfterOf(pem: Buffer): number {
  return Date.parse(new X509Certificate(pem).validTo);
}

function sslOptions(tls: TlsFiles): AppOptions {
  return {
    cert_file_name: tls.certFile, key_file_name: tls.keyFile,
    ...(tls.caFile ? { ca_file_name: tls.caFile } : {}),
    ...(tls.passphrase ? { passphrase: tls.passphrase } : {}),
  };
}

type Registration = [method: string, args: unknown[]];

/** The registration methods a route table or socket behaviour may call; each is replayed on a reload. */
const REGISTER = ['get', 'post', 'put', 'patch', 'del', 'options', 'head', 'any', 'connect', 'trace', 'ws'] as const;

export class Listener {
  private readonly uwsApp: TemplatedApp;
  /** Every route and socket behaviour mounted, replayed under each server name of a reload. */
  private readonly registrations: Registration[] = [];
  private listenSocket: us_listen_socket | null = null;
  /** The Unix socket the pipelining relay connects to (listenPrivate), and its directory. */
  private privateSocket: us_listen_socket | null = null;
  private privateDir: string | null = null;
  /** This listener holds the thread's upgrade anchor (src/http/corkAnchor.ts). */
  private anchored = false;
  /** SNI names registered by the last reload. */
  private serverNames: string[] = [];
  /** When the certificate loaded last (at the start or a reload) expires, in ms; undefined: plain HTTP. */
  private notAfterMs: number | undefined;
  /** What routes and socket behaviours are mounted on: the app, with registrations recorded. */
  readonly app: TemplatedApp;

  constructor(private readonly uws: typeof uwsModule, private readonly tls: TlsFiles | undefined) {
    if (tls) {
      checkTlsFiles(tls);
      this.notAfterMs = notAfterOf(readFileSync(tls.certFile));
    }
    const app = (this.uwsApp = tls ? uws.SSLApp(sslOptions(tls)) : uws.App());
    const facade: Record<string, unknown> = {
      publish: app.publish.bind(app),
      numSubscribers: app.numSubscribers.bind(app),
    };
    for (const method of REGISTER) {
      facade[method] = (...args: unknown[]) => {
        this.registrations.push([method, args]);
        (app[method] as (...x: unknown[]) => unknown).apply(app, args);
        return this.app;
      };
    }
    this.app = facade as unknown as TemplatedApp;
  }

  get secure(): boolean {
    return this.tls !== undefined;
  }

  /** When the certificate loaded last expires (ms since the epoch); undefined: plain HTTP. A client
   *  by bare IP address still gets the one of the start after a reload (above). */
  get certificateExpiresAt(): number | undefined {
    return this.notAfterMs;
  }

  /** Listens (exclusively) on host:port; the port actually bound, or false when it cannot. */
  async listen(host: string, port: number): Promise<number | false> {
    // Open before any client can connect: upgrades completed from async code need it (corkAnchor.ts).
    if (!this.anchored) {
      await acquireCorkAnchor(this.uws);
      this.anchored = true;
    }
    this.listenSocket = await this.bind(host, port);
    return this.listenSocket ? this.uws.us_socket_local_port(this.listenSocket) : false;
  }

  /**
   * A second listen socket of the same app, for the pipelining relay (src/http/pipeliningRelay.ts):
   * the same routes and sockets, whatever HOST the main one has, on a Unix socket in a directory of
   * its own (mode 0700: only this user reaches it; cheaper than TCP over loopback). Its path.
   */
  async listenPrivate(): Promise<string> {
    const dir = (this.privateDir = mkdtempSync(join(tmpdir(), 'tagw-relay-')));
    const path = join(dir, 'gateway.sock');
    this.privateSocket = await new Promise<us_listen_socket | null>((resolve) => this.uwsApp.listen_unix((s) => resolve(s || null), path));
    if (!this.privateSocket) throw new Error(`cannot listen on ${path} for the pipelining relay`);
    return path;
  }

  private bind(host: string, port: number): Promise<us_listen_socket | null> {
    // The (host, port, options, cb) form exists in this build but not in its typings.
    const listen = this.uwsApp.listen as unknown as (host: string, port: number, options: number, cb: (s: us_listen_socket | false) => void) => unknown;
    return new Promise((resolve) => listen.call(this.uwsApp, host, port, LIBUS_LISTEN_EXCLUSIVE_PORT, (s) => resolve(s || null)));
  }

  /**
   * Reads the certificate files again. New TLS connections that name a host of the certificate
   * (SNI: every client that connects by name, as certificate checks require) get the new one;
   * open sockets are untouched. Files that do not load throw TlsConfigError and change nothing.
   */
  reload(): void {
    if (!this.tls) return;
    checkTlsFiles(this.tls);
    const pem = readFileSync(this.tls.certFile);
    const names = dnsNamesOf(pem);
    const app = this.uwsApp;
    for (const n of this.serverNames) app.removeServerName(n);
    for (const n of names) {
      app.addServerName(n, sslOptions(this.tls));
      // Each server name has its own routes in uWS: the same handlers again.
      const domain = app.domain(n);
      for (const [method, args] of this.registrations) (domain[method as 'get'] as (...x: unknown[]) => unknown).apply(domain, args);
    }
    this.serverNames = names;
    this.notAfterMs = notAfterOf(pem);
  }

  /** Stops accepting connections (open sockets are closed by their owners, or closeConnections). */
  close(): void {
    for (const s of [this.listenSocket, this.privateSocket]) if (s) this.uws.us_listen_socket_close(s);
    this.listenSocket = this.privateSocket = null;
    if (this.privateDir) rmSync(this.privateDir, { recursive: true, force: true });
    this.privateDir = null;
    if (this.anchored) releaseCorkAnchor();
    this.anchored = false;
  }

  /** Ends every connection still open (FIN). App.close exists in this uWS build but not in its typings. */
  closeConnections(): void {
    (this.uwsApp as unknown as { close(): void }).close();
  }
}
