// Admission to /v1/stream: everything is checked before the socket exists (SPEC §5, §7), through
// the same draining/throttle/key checks as every HTTP route (http/admission.ts), then the account's
// seat, binding and stream state. Most upgrades happen at once inside uWS's upgrade handler; the
// rest after asking the shard (see upgradeNow for why the difference matters).
import { clusterSettings } from '../config.js';
import type { HttpRequest, HttpResponse, us_socket_context_t } from 'uWebSockets.js';
import type { Authenticator } from '../auth/authenticator.js';
import { assertAccountScope } from '../auth/rights.js';
import type { AuthThrottle } from '../auth/throttle.js';
import { apiError, toApiError } from '../errors.js';
import { admitSocket, assertHandshake, noteRefusal, readUpgrade } from '../http/admission.js';
import type { ClientAddress } from '../http/clientAddress.js';
import { assertWebsocketOrigin } from '../http/cors.js';
import { singleParam, type RequestInfo } from '../http/request.js';
import { sendError, type ResponseSink } from '../http/respond.js';
import { assertAliasAgrees, assertKnownParams, qBool } from '../http/schemas.js';
import { canonicalAccountId } from '../util/accountId.js';
import { parseSince } from './history.js';
import { errorMessage } from '../util/errorMessage.js';
import type { AccountStreamDeps, AccountStreams } from './accounts.js';
import type { Outbox } from './outbox.js';
import type { AccountState, Sock, StreamCounters, UserData } from './state.js';
import type { Topics } from './topics.js';

/** `heartbeat`: 0 turns heartbeats off (SPEC §6); false/true too, as every boolean parameter of the API. */
const HEARTBEAT_PARAM = qBool();
/** What /v1/stream takes (SPEC §4.2, §6; docs/stream.md): the account (or its alias), the key, heartbeat, resume. */
const STREAM_PARAMS = ['id', 'accountId', 'apiKey', 'heartbeat', 'since'] as const;

export interface StreamAdmissionDeps extends AccountStreamDeps {
  auth: Authenticator;
  throttle: AuthThrottle;
  /** How client addresses are read (TRUST_PROXY, the pipelining relay's header). */
  address: ClientAddress;
}

export class StreamAdmission {
  /** The socket `open` just made during a synchronous upgrade (see upgradeNow); set by the hub's open handler. */
  justOpened: Sock | undefined;

  /** Cluster mode: this node's id, on a refused upgrade's answer (x-tagw-node). */
  private readonly node: string | undefined;

  constructor(
    private readonly deps: StreamAdmissionDeps, private readonly accounts: AccountStreams, private readonly topics: Topics,
    private readonly out: Outbox, private readonly counters: StreamCounters,
    private readonly guard: (what: string, fn: () => void) => void,
  ) {
    this.node = clusterSettings(deps.config)?.nodeId;
  }

  upgrade(res: HttpResponse, req: HttpRequest, context: us_socket_context_t): void {
    const { key, protocol, extensions, connection, info, sink } = readUpgrade(res, req, this.deps.address);
    sink.node = this.node;
    try {
      assertWebsocketOrigin(req, this.deps.config);
    } catch (err) {
      sendError(sink, toApiError(err), true);
      return;
    }
    void this.admit(info, sink, context, key, protocol, extensions, connection);
  }

  private async admit(
    info: RequestInfo, sink: ResponseSink, context: us_socket_context_t,
    key: string, protocol: string, extensions: string, connection: string,
  ): Promise<void> {
    const d = this.deps;
    let opened: string | null = null;
    try {
      const principal = admitSocket(d, info, info.headers, info.query);
      const q = info.query;
      assertKnownParams(q, STREAM_PARAMS);
      const idParam = singleParam(q, 'id');
      const aliasParam = singleParam(q, 'accountId');
      assertAliasAgrees('id', 'accountId', idParam, aliasParam);
      const id = canonicalAccountId(idParam ?? aliasParam);
      if (!id) throw apiError('ACCOUNT_ID_REQUIRED', 'account id required: connect to /v1/stream?id=<accountUUID>');
      assertAccountScope(principal, id);
      const seat = d.tenancy.seatById(id);
      if (!seat || seat.customer_id !== principal.customerId || seat.removed_at !== null) throw apiError('NOT_FOUND', 'account not found');
      const hbParam = singleParam(q, 'heartbeat');
      const hbParsed = hbParam === undefined ? undefined : HEARTBEAT_PARAM.safeParse(hbParam);
      if (hbParsed && !hbParsed.success) throw apiError('BAD_REQUEST', "parameter 'heartbeat': use 0 (or false) to disable heartbeats, 1 (or true, the default) to keep them");
      const heartbeat = hbParsed?.data ?? true;
      const sinceParam = singleParam(q, 'since');
      const since = sinceParam === undefined ? null : sinceParam === 'message' ? 'message' : parseSince(sinceParam);
      if (sinceParam !== undefined && since === null) {
        throw apiError('BAD_REQUEST', "parameter 'since': use <epoch>:<seq> from the last account frame you got (e.g. since=m3x9q2k7a1:41), or 'message'");
      }
      assertHandshake({ key, connection });
      const known = this.accounts.accounts.get(id) ?? this.accounts.fromRecords(id);
      if (known && this.accounts.activeSeats.has(id)) {
        if (!this.accounts.accounts.has(id)) {
          this.accounts.accounts.set(id, known);
          this.accounts.onActive();
        }
        this.upgradeNow(known, sink, context, key, protocol, extensions, { accountId: id, keyId: principal.keyId, heartbeat, since });
        return;
      }
      if (!this.accounts.activeSeats.has(id)) {
        // SPEC §7 402, as on the classic routes: a seat still being prepared has no subscription yet.
        const st = await d.shards.call(id, 'seat.get', { seatId: id });
        if (st?.status !== 'ACTIVE') {
          throw apiError('NO_SUBSCRIPTION', st ? 'subscription not active: the seat is still being prepared (BUILDING_SERVER)' : 'subscription not active for this account');
        }
        this.accounts.activeSeats.add(id); // ACTIVE is the last seat status
      }
      const open = await d.shards.call(id, 'stream.open', { accountId: id }).catch((err: unknown) => {
        // The seat exists (checked above): the shard not knowing it means no broker login is bound yet.
        if (toApiError(err).code === 'NOT_FOUND') throw apiError('NOT_CONNECTED', 'this account has no broker login bound yet: call /ConnectEx with id=<accountUUID>');
        throw err;
      });
      opened = id;
      this.accounts.noteOpen(id, open);
      if (!sink.open) {
        // The client went away while we were checking: release what stream.open took.
        this.accounts.releaseIfUnused(id);
        return;
      }
      const userData: UserData = { accountId: id, keyId: principal.keyId, heartbeat, since };
      sink.upgradeLater(userData, key, protocol, extensions, context);
    } catch (err) {
      const e = toApiError(err);
      if (e.code === 'INTERNAL_ERROR') d.log.error('stream upgrade failed', { err: e.cause ?? e });
      noteRefusal(d, info, e);
      if (opened) this.accounts.releaseIfUnused(opened);
      sendError(sink, e, true);
    }
  }

  /**
   * A socket for an account that already has sockets here (its seat is ACTIVE, its broker login
   * bound): everything left to check is known in this thread, so the upgrade happens at once,
   * inside uWS's upgrade handler, and the shard's stream.open follows (an upgrade made later from
   * async code goes through ResponseSink.upgradeLater, which says what that takes on this uWS build).
   */
  private upgradeNow(
    acc: AccountState, sink: ResponseSink, context: us_socket_context_t,
    key: string, protocol: string, extensions: string, userData: UserData,
  ): void {
    const d = this.deps;
    const id = acc.id;
    this.counters.syncUpgrades++;
    acc.opens++; // reserved for this socket's stream.open: the account state stays while it is under way
    acc.openCalls++;
    userData.openPending = true;
    // uWS runs `open` synchronously inside upgrade() and hands it a copy of userData, so the new
    // socket is passed back through this field rather than through userData.
    this.justOpened = undefined;
    try {
      sink.upgradeNow(userData, key, protocol, extensions, context);
    } catch (err) {
      acc.opens--;
      acc.openCalls--;
      throw err;
    }
    const sock = this.justOpened as Sock | undefined;
    this.justOpened = undefined;
    d.shards.call(id, 'stream.open', { accountId: id }).then(
      (open) => {
        acc.openCalls--;
        if (open.serverInfo) this.topics.noteServer(open.serverInfo);
        const cur = this.accounts.accounts.get(id);
        if (cur) {
          cur.phase = open.phase;
          this.accounts.opened(cur);
        }
        if (!sock) {
          this.accounts.releaseIfUnused(id); // the socket never opened
          return;
        }
        sock.openState = 'open';
        const deferred = sock.deferred;
        sock.deferred = null;
        if (sock.closed) this.accounts.releaseIfUnused(id);
        else if (deferred) for (const f of deferred) this.guard('deferred', f);
      },
      (err: unknown) => {
        acc.openCalls--;
        d.log.warn('stream.open failed after upgrade', { accountId: id, err: errorMessage(err) });
        this.accounts.dropOpen(acc); // nothing to close at the shard: the open failed
        if (sock) {
          sock.openState = 'failed';
          sock.deferred = null;
          this.out.end(sock, 'ACCOUNT_UNAVAILABLE');
        }
      },
    );
  }
}
