// The gateway socket `/ws?handle=` (SPEC §6 "Gateway socket"): live pushes started by the
// Subscribe* operations of a session are delivered here. Frames are `{"type":..., "data":...}`
// with type QUOTE, CANDLE or BOOK (docs/gateway.md), serialized once in the account's shard and
// published to the handle's uWS topic, so every socket of the handle gets the same bytes.
//
// Auth is checked before the upgrade: x-api-key header or ?apiKey=, and the handle must be a
// live session of the key's customer (and of its account for a scoped key). When the session
// ends (Disconnect) its sockets are closed with SESSION_ENDED. When the shard running its account
// dies, they are closed with RUNTIME_RESTARTED at once: the pushes stop until a new thread is up and
// has placed the session's subscriptions again (which may take long, or never happen while the
// shard crashes at every start), and a client told so reconnects with the same handle.
//
// Slow readers: a socket whose unread backlog passes WS_BACKLOG_LIMIT is closed with 4008
// (SOCKET_CLOSE.BACKPRESSURE) rather than silently losing frames: the client reconnects and places
// its subscriptions' current values again. uWS's own limit is higher by a reserve, so the close frame
// always fits (uWS drops any frame over its limit, and the client would see 1006): the backlog is
// checked every streamSweepMs, and at once whenever the bytes published since the last check pass
// half the reserve (no socket can have grown by more than that).
//
// Cluster mode: a handle this node does not know is asked of the others (tagw.session.find, as the
// proxy routes do), and every node with sockets of a handle follows its events (gw.frame, gw.end,
// keyed by the handle's hash) through the stream relay from before the upgrade until its last
// socket closes: the owner's pushes reach a socket on any node, and still do after the account
// moves (a node receives no echo of its own publications, so the owner's follow stays idle). When
// the owner's shard running the session dies, it says so there too (gw.restarted): 4011 on every node.
import { clusterSettings } from '../config.js';
import type { HttpRequest, HttpResponse, TemplatedApp, us_socket_context_t, WebSocket } from 'uWebSockets.js';
import { assertAccountScope } from '../auth/rights.js';
import type { AuthThrottle } from '../auth/throttle.js';
import { apiError, toApiError } from '../errors.js';
import { sendError } from '../http/respond.js';
import type { ClientAddress } from '../http/clientAddress.js';
import { assertWebsocketOrigin } from '../http/cors.js';
import { admitSocket, assertHandshake, noteRefusal, readUpgrade } from '../http/admission.js';
import { singleParam } from '../http/request.js';
import { assertKnownParams } from '../http/schemas.js';
import { CLIENT_MESSAGE_MAX_BYTES, SOCKET_CLOSE } from './closeCodes.js';
import { DemandTimer } from '../util/demandTimer.js';
import { withRevokedKeys } from './revokedKeys.js';
import { handleDirectory, handleHash } from '../http/routes/gateway.js';
import { GATEWAY_SOCKET_PATH } from '../http/routes/sockets.js';
import type { SessionRow } from '../store/sessions.js';
import { GATEWAY_EVENT, type GatewayEvent } from '../runtime/hosts/gatewayCommands.js';
import type { Services } from '../http/services.js';

/** `accountId`: the session's account (a socket's pushes stop when the shard running it dies). */
interface UserData { hash: string; keyId: string; followed: boolean; accountId: string }

const topic = (hash: string) => `gw/${hash}`;

/** Unread bytes per socket before it is closed with 4008. */
export const WS_BACKLOG_LIMIT = 1024 * 1024;
const RESERVE = 256 * 1024;

/** A client's ping: the text `ping`, or the object `{"action":"ping"}` however a JSON library spaces
 *  it (Python's json.dumps writes `{"action": "ping"}`). Anything longer than 64 bytes is not one. */
function isPing(msg: ArrayBuffer): boolean {
  if (msg.byteLength > 64) return false;
  const text = Buffer.from(msg).toString('utf8').trim();
  if (text === 'ping') return true;
  if (!text.startsWith('{')) return false;
  try {
    const m = JSON.parse(text) as Record<string, unknown>;
    return Object.keys(m).length === 1 && m.action === 'ping';
  } catch {
    return false;
  }
}

export class GatewaySocket {
  private app: TemplatedApp | null = null;
  private readonly sockets = new Map<string, Set<WebSocket<UserData>>>();
  private readonly dir;

  /** Cluster mode: this node's id, on a refused upgrade's answer (x-tagw-node). */
  private readonly node: string | undefined;

  constructor(
    private readonly s: Services, readonly throttle: AuthThrottle, private readonly inflight: { draining: boolean },
    private readonly address: ClientAddress,
  ) {
    this.dir = handleDirectory(s);
    this.node = clusterSettings(s.config)?.nodeId;
  }

  private keyTimer: NodeJS.Timeout | null = null;
  private offDeath: (() => void) | null = null;
  /** Armed by a publish: with nothing published since the last check there is nothing to check. */
  private sweeper: DemandTimer | null = null;
  private publishedBytes = 0;

  /** Whether a backlog check is scheduled (only after a publish). */
  get sweeping(): boolean {
    return this.sweeper?.armed ?? false;
  }

  mount(app: TemplatedApp): void {
    this.app = app;
    // Open sockets re-check their API key, as /v1/stream does: a revoked key stops receiving.
    this.keyTimer = setInterval(() => this.checkKeys(), this.s.config.streamKeyCheckMs);
    this.keyTimer.unref();
    this.offDeath = this.s.shards.onDeath((shard) => this.shardDied(shard));
    this.sweeper = new DemandTimer(this.s.config.streamSweepMs, () => {
      this.sweep();
      return false; // the next publish arms it again
    });
    app.ws<UserData>(GATEWAY_SOCKET_PATH, {
      // The socket takes no commands, but any message up to this size gets an ERROR frame rather
      // than a dropped connection (uWS closes one over the limit without a close frame).
      maxPayloadLength: CLIENT_MESSAGE_MAX_BYTES,
      maxBackpressure: WS_BACKLOG_LIMIT + RESERVE,
      closeOnBackpressureLimit: 0,
      idleTimeout: this.s.config.idleTimeoutSec,
      sendPingsAutomatically: true,
      upgrade: (res, req, context) => this.upgrade(res, req, context),
      open: (ws) => this.onOpen(ws),
      message: (ws, msg) => {
        // Subscriptions are made over HTTP (Subscribe* operations); the socket only answers pings.
        if (isPing(msg)) ws.send('{"type":"PONG","data":{}}');
        else ws.send(JSON.stringify({ type: 'ERROR', data: { error: 'BAD_REQUEST', message: 'this socket takes no messages; use the /v1/proxy Subscribe* operations' } }));
      },
      close: (ws) => {
        const { hash, followed } = ws.getUserData();
        if (followed) this.s.cluster?.relay.unfollow(hash);
        const set = this.sockets.get(hash);
        set?.delete(ws);
        if (set && set.size === 0) this.sockets.delete(hash);
      },
    });
  }

  private onOpen(ws: WebSocket<UserData>): void {
    const { hash } = ws.getUserData();
    let set = this.sockets.get(hash);
    if (!set) this.sockets.set(hash, (set = new Set()));
    set.add(ws);
    ws.subscribe(topic(hash));
  }

  private upgrade(res: HttpResponse, req: HttpRequest, context: us_socket_context_t): void {
    const { key, protocol, extensions, connection, info, sink } = readUpgrade(res, req, this.address);
    sink.node = this.node;
    const refuse = (err: unknown) => {
      const e = toApiError(err);
      noteRefusal(this, info, e);
      sendError(sink, e, true);
    };
    try {
      assertWebsocketOrigin(req, this.s.config);
      const principal = admitSocket({ auth: this.s.auth, throttle: this.throttle, inflight: this.inflight }, info, info.headers, info.query);
      assertKnownParams(info.query, ['handle', 'apiKey']);
      const handle = singleParam(info.query, 'handle');
      if (!handle) throw apiError('BAD_REQUEST', "parameter 'handle' is required: /ws?handle=<handle from POST /v1/connect>");
      assertHandshake({ key, connection });
      const hash = handleHash(handle);
      /** The session's account, once the key may use the session. */
      const check = (session: SessionRow | undefined): string => {
        if (!session || session.customer_id !== principal.customerId) throw apiError('SESSION_NOT_FOUND', 'session handle unknown or disconnected');
        assertAccountScope(principal, session.account_id);
        return session.account_id;
      };
      const cluster = this.s.cluster;
      if (!cluster) {
        const accountId = check(this.dir.get(hash));
        sink.upgradeNow({ hash, keyId: principal.keyId, followed: false, accountId } satisfies UserData, key, protocol, extensions, context);
        return;
      }
      // Cluster mode: the row may be another node's, and the relay's interest must be in place
      // before the socket can expect frames; both are awaited, so the upgrade completes later.
      void (async () => {
        let followed = false;
        try {
          const session = this.dir.get(hash) ?? (await this.dir.findElsewhere(hash, cluster));
          const accountId = check(session);
          await cluster.relay.follow(hash);
          followed = true;
          if (!sink.open) {
            cluster.relay.unfollow(hash);
            return;
          }
          sink.upgradeLater({ hash, keyId: principal.keyId, followed, accountId } satisfies UserData, key, protocol, extensions, context);
        } catch (err) {
          if (followed) cluster.relay.unfollow(hash);
          refuse(err);
        }
      })();
    } catch (err) {
      refuse(err);
    }
  }

  /** Shard events of kind gw.*: a frame to publish, or the end of a session. */
  onShardEvent(ev: GatewayEvent): void {
    // A session its shard ended (not through Disconnect): its handle is gone for /v1/proxy too.
    if (ev.kind === GATEWAY_EVENT.end) this.dir.invalidate(ev.key);
    if (!this.app) return;
    if (ev.kind === GATEWAY_EVENT.frame) {
      if (!this.sockets.has(ev.key)) return; // nobody listening: skip the copy into uWS
      const f = ev.data;
      const msg = `{"type":"${f.type}","data":${f.json}}`;
      this.app.publish(topic(ev.key), msg, false);
      this.publishedBytes += msg.length;
      if (this.publishedBytes > RESERVE / 2) this.sweep();
      else this.sweeper?.arm();
    } else if (ev.kind === GATEWAY_EVENT.end) {
      const set = this.sockets.get(ev.key);
      if (!set) return;
      for (const ws of [...set]) ws.end(SOCKET_CLOSE.SESSION_ENDED.code, SOCKET_CLOSE.SESSION_ENDED.reason);
    } else {
      // Relayed from the account's owner: its shard running the session died (see shardDied). An
      // account this node holds now is run by its own shards (a notice of an earlier owner is stale).
      const set = this.sockets.get(ev.key);
      if (!set) return;
      for (const ws of [...set]) {
        if (this.s.cluster?.owns(ws.getUserData().accountId)) continue;
        ws.end(SOCKET_CLOSE.RUNTIME_RESTARTED.code, SOCKET_CLOSE.RUNTIME_RESTARTED.reason);
      }
    }
  }

  /** Closes the sockets over the backlog limit (4008), while their close frame still fits. */
  private sweep(): void {
    if (this.publishedBytes === 0) return;
    this.publishedBytes = 0;
    for (const set of this.sockets.values()) {
      for (const ws of [...set]) {
        if (ws.getBufferedAmount() > WS_BACKLOG_LIMIT) ws.end(SOCKET_CLOSE.BACKPRESSURE.code, SOCKET_CLOSE.BACKPRESSURE.reason);
      }
    }
  }

  /** A shard of this node died (ShardSet.onDeath): the sockets of the sessions it ran are closed.
   *  Cluster mode: only of the accounts this node owns (a session of another node's account runs on
   *  that node's shards, whatever this node's shard of the same number does), and the other nodes'
   *  sockets of those sessions are told on the relay (gw.restarted per live session's handle: nothing
   *  reaches a node without a socket of it), so they close them with the same code. */
  private shardDied(shard: number): void {
    const { shards, cluster } = this.s;
    const ran = (accountId: string) => shards.shardFor(accountId) === shard && (!cluster || cluster.owns(accountId));
    for (const set of this.sockets.values()) {
      for (const ws of [...set]) if (ran(ws.getUserData().accountId)) ws.end(SOCKET_CLOSE.RUNTIME_RESTARTED.code, SOCKET_CLOSE.RUNTIME_RESTARTED.reason);
    }
    if (cluster) for (const key of this.dir.liveHandles(ran)) cluster.publish({ kind: GATEWAY_EVENT.restarted, key, data: null });
  }

  /** A key revoked through the management API: its sockets close now, not at the next check. */
  closeKey(keyId: string): void {
    for (const set of this.sockets.values()) {
      for (const ws of [...set]) if (ws.getUserData().keyId === keyId) ws.end(SOCKET_CLOSE.KEY_REVOKED.code, SOCKET_CLOSE.KEY_REVOKED.reason);
    }
  }

  private checkKeys(): void {
    try {
      const open = [...this.sockets.values()].flatMap((set) => [...set]);
      for (const ws of withRevokedKeys(open, (x) => x.getUserData().keyId, this.s.tenancy)) {
        ws.end(SOCKET_CLOSE.KEY_REVOKED.code, SOCKET_CLOSE.KEY_REVOKED.reason);
      }
    } catch (err) {
      this.s.log.error('gateway socket key check failed', { err: err instanceof Error ? err.message : String(err) });
    }
  }

  close(): void {
    if (this.keyTimer) clearInterval(this.keyTimer);
    this.offDeath?.();
    this.offDeath = null;
    this.sweeper?.stop();
    this.keyTimer = null;
    for (const set of this.sockets.values()) for (const ws of [...set]) ws.end(SOCKET_CLOSE.GOING_AWAY.code, SOCKET_CLOSE.GOING_AWAY.reason);
    this.sockets.clear();
  }
}
