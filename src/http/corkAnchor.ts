// A WebSocket of the gateway to itself, corked around every upgrade completed from async code.
//
// Why. An upgrade after an await must be made inside res.cork() (outside one, uWS.js prints a
// warning at every upgrade). When that response's cork is the outermost, this uWS build's
// HttpResponse::cork() runs its post-response logic on the socket after the handler returns: the
// upgrade realloc'd the socket in place (a WebSocket's data is smaller than an HTTP response's), so
// cork() reads the "HTTP state" from memory freed by that realloc, and closes the socket, with no
// frame (the client's 1006), when those bytes say `Connection: close` and no response pending
// (uWebSockets issue 1928; fixed upstream by PR 1929, not in this build). Any small malloc on this
// thread between the upgrade and that read (the open handler, a GC) can reuse the freed bytes, so
// a rare socket closed under its client, more often in a long-lived process with a busy heap.
//
// The fix. While another socket is corked, res.cork() cannot cork the response: it runs the
// handler directly, with none of the post-response logic, and uWS.js still counts it as inside a
// cork (no warning). The upgrade then writes its 101 uncorked (before the realloc, on the
// response's real state: a handshake saying Connection: close is refused earlier, see
// assertHandshake) and nothing reads the freed memory. The anchor is that other socket: a
// WebSocket from this thread to a private app of its own, over a Unix socket in a directory only
// this user can enter. uWS's cork state is per thread (one event loop per thread), so the anchor is
// too: the gateways of one thread (tests start several) share it, counted by acquire/release.
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TemplatedApp, us_listen_socket, WebSocket } from 'uWebSockets.js';
import type uwsModule from 'uWebSockets.js';
import { uwsIsNative } from './uws.js';

/** How long the anchor may take to open at start before the gateway gives up starting. */
const OPEN_TIMEOUT_MS = 5_000;

class CorkAnchor {
  private ws: WebSocket<unknown> | null = null;
  private client: net.Socket | null = null;
  private listenSocket: us_listen_socket | null = null;
  private readonly app: TemplatedApp;
  private readonly dir: string;
  private readonly path: string;
  private opened: (() => void) | null = null;

  constructor(private readonly uws: typeof uwsModule) {
    this.dir = mkdtempSync(join(tmpdir(), 'tagw-anchor-'));
    this.path = join(this.dir, 'anchor.sock');
    this.app = uws.App().ws('/*', {
      idleTimeout: 0, // it never talks: no timeout, no pings
      sendPingsAutomatically: false,
      maxPayloadLength: 64,
      open: (ws) => {
        this.ws = ws;
        this.opened?.();
        this.opened = null;
      },
      close: (ws) => {
        if (this.ws === ws) this.ws = null;
      },
    });
  }

  async start(): Promise<void> {
    this.listenSocket = await new Promise<us_listen_socket | null>((resolve) => this.app.listen_unix((s) => resolve(s || null), this.path));
    if (!this.listenSocket) throw new Error(`cannot listen on ${this.path} (the upgrade anchor)`);
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the upgrade anchor did not open within ${OPEN_TIMEOUT_MS} ms (${this.path})`)), OPEN_TIMEOUT_MS);
      this.opened = () => {
        clearTimeout(timer);
        resolve();
      };
      this.connect();
    });
  }

  private connect(): void {
    const c = (this.client = net.connect(this.path));
    c.unref(); // never what keeps the process alive
    c.on('connect', () => c.write('GET / HTTP/1.1\r\nHost: anchor\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n'
      + 'Sec-WebSocket-Key: dGFndy1jb3JrLWFuY2hvcg==\r\nSec-WebSocket-Version: 13\r\n\r\n'));
    c.on('data', () => undefined); // the 101; nothing else is ever sent
    // Nothing but stop() closes either end (no timeout, no pings, a private socket); should it
    // close anyway, upgrades take the corked path and are counted (tagw_ws_upgrades_unanchored_total).
    c.on('error', () => undefined);
  }

  /** The anchor's socket while it is open. */
  get socket(): WebSocket<unknown> | null {
    return this.ws;
  }

  stop(): void {
    this.client?.destroy();
    this.client = null;
    if (this.listenSocket) this.uws.us_listen_socket_close(this.listenSocket);
    this.listenSocket = null;
    // App.close exists in this uWS build but not in its typings: ends the anchor's server side.
    (this.app as unknown as { close(): void }).close();
    this.ws = null;
    rmSync(this.dir, { recursive: true, force: true });
  }
}

let anchor: CorkAnchor | null = null;
let starting: Promise<void> | null = null;
let holders = 0;
/** Upgrades from async code made with no anchor open (the corked path, exposed to the fault above;
 *  on the JS fallback, which has no anchor and no such fault, every one). */
let unanchored = 0;

/** A gateway of this thread starts: the anchor is open when this resolves. */
export async function acquireCorkAnchor(uws: typeof uwsModule): Promise<void> {
  holders++;
  // The JS fallback (ALLOW_UWS_FALLBACK=1) has no such fault, nor Unix sockets to anchor on.
  if (!anchor && uwsIsNative()) {
    const a = (anchor = new CorkAnchor(uws));
    starting = a.start().catch((err: unknown) => {
      if (anchor === a) anchor = null;
      a.stop();
      throw err;
    });
  }
  try {
    await starting;
  } catch (err) {
    holders--;
    throw err;
  }
}

/** A gateway of this thread stopped: the last one closes the anchor. */
export function releaseCorkAnchor(): void {
  if (holders === 0) return;
  if (--holders > 0) return;
  anchor?.stop();
  anchor = null;
  starting = null;
}

/** Runs `fn`, an upgrade from async code, with another socket of this thread corked (see above). */
export function aroundAsyncUpgrade(fn: () => void): void {
  const ws = anchor?.socket;
  if (ws) {
    ws.cork(fn);
  } else {
    unanchored++;
    fn();
  }
}

/** Upgrades from async code made with no anchor open (0 unless it was lost; every one on the JS fallback). */
export function unanchoredUpgrades(): number {
  return unanchored;
}
