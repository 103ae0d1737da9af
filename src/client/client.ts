// TagwClient: one typed method per gateway route, the stream and gateway sessions.
//
//   const client = new TagwClient({ baseUrl, apiKey, WebSocket });       // WebSocket: `ws` on Node 20
//   const acct = client.account(id);
//   await acct.OrderSend({ symbol: 'BTCUSD', operation: 'Buy', volume: 0.01 });   // clientOrderId made for you
//   for await (const f of client.stream(id, { symbols: ['BTCUSD'] })) ...
import type { CallSafety } from './backoff.js';
import { TagwError } from './errors.js';
import { newClientOrderId } from './ids.js';
import { type CallOptions, type CallSpec, type QueryValue, Transport, type TransportOptions } from './http.js';
import { CLASSIC_READS, CLASSIC_TRADES } from './routes.js';
import { GatewaySession } from './session.js';
import type { WebSocketConstructor } from './socket.js';
import { StreamSubscription, type StreamOptions } from './stream.js';
import type {
  BrokerAccountInfo, BrokerAccountInput, CalendarEvent, ClassicParams, ClassicReadName, ClassicResponse, ClassicTradeName,
  AccountFaultInfo, AccountFaultInput, AccountFaultListing, AuditLogEntry, ConnectExInput, ConnectExResult, Json, JsonObject, KeyInput, KeyListEntry, KeyListParams, NewKey, NewsParams, ReplacedKeyInfo,
  RotatedManagementKey, SeatInfo, SeatInput, SimFaultInfo, SimFaultInput, SimFaultListing,
} from './types.js';

export interface TagwClientOptions extends TransportOptions {
  /** The platform WebSocket by default; on Node 20 pass `ws` (globalThis.WebSocket is behind a flag there). */
  WebSocket?: WebSocketConstructor | undefined;
}

type Args<P> = {} extends P ? [params?: P, options?: CallOptions] : [params: P, options?: CallOptions];
/** One method per classic route, bound to an account: `account.AccountSummary()`. */
export type AccountApi = { readonly id: string } & {
  [N in ClassicReadName]: (...args: Args<ClassicParams<N>>) => Promise<ClassicResponse<N>>;
} & {
  /** Trading calls always carry a clientOrderId (yours, or one the SDK makes), so a lost answer is
   *  retried safely: the gateway replays the first result. */
  [N in ClassicTradeName]: (params: ClassicParams<N>, options?: CallOptions) => Promise<ClassicResponse<N>>;
} & {
  /** The trading calls again, answering the result with what the gateway said of it:
   *  `const { result, replayed } = await acct.withMeta.OrderSend({...})`. */
  readonly withMeta: { [N in ClassicTradeName]: (params: ClassicParams<N>, options?: CallOptions) => Promise<TradeAnswer<ClassicResponse<N>>> };
};

/** A trading call's result and what the answer said of it (`account(id).withMeta.<Route>`). */
export interface TradeAnswer<T> {
  /** What the plain method answers. */
  result: T;
  /** The gateway answered from its record of an earlier request with this clientOrderId
   *  (`Idempotent-Replay: true`): nothing went to the broker this time. The earlier request was
   *  yours (the same id sent again) or a try of this very call whose answer was lost and which the
   *  SDK sent again. False: this request placed (or changed) it. */
  replayed: boolean;
  /** Yours, or the one the SDK made. */
  clientOrderId: string;
  /** The gateway's `x-request-id` of the answer (its request log's id); the SDK's own id of the
   *  call when the answer had none, as on its errors. */
  requestId: string;
  /** Tries it took (1 = no retry). */
  tries: number;
}

const enc = encodeURIComponent;

export class TagwClient {
  readonly transport: Transport;
  private readonly WebSocket: WebSocketConstructor | undefined;
  private readonly random: (() => number) | undefined;

  constructor(o: TagwClientOptions) {
    this.transport = new Transport(o);
    this.WebSocket = o.WebSocket ?? (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
    this.random = o.random;
  }

  /** Ends what the client has going: calls in flight and their retry waits (ABORTED: a trading call
   *  may still have been placed; its error names the clientOrderId), its streams and session sockets.
   *  Later calls fail at once. Nothing of it then keeps a process alive. */
  close(): void {
    this.transport.close();
  }

  /** The classic routes (SPEC §4.1) of one account. */
  account(id: string): AccountApi {
    const api: Record<string, unknown> = { id };
    for (const name of Object.keys(CLASSIC_READS)) {
      api[name] = (p: Record<string, QueryValue> = {}, o: CallOptions = {}) => this.req({ method: 'GET', path: `/${name}`, auth: 'api', safety: 'safe', query: { ...p, id }, signal: o.signal });
    }
    const withMeta: Record<string, unknown> = {};
    for (const name of Object.keys(CLASSIC_TRADES)) {
      const trade = async (p: Record<string, QueryValue>, o: CallOptions = {}): Promise<TradeAnswer<Json>> => {
        const clientOrderId = (p.clientOrderId as string | undefined) ?? newClientOrderId();
        const r = await this.transport.call<Json>({ method: 'GET', path: `/${name}`, auth: 'api', safety: 'safe', query: { ...p, id, clientOrderId }, clientOrderId, signal: o.signal });
        return { result: r.body, replayed: r.replay, clientOrderId, requestId: r.requestId, tries: r.tries };
      };
      withMeta[name] = trade;
      api[name] = async (p: Record<string, QueryValue>, o?: CallOptions) => (await trade(p, o)).result;
    }
    api.withMeta = withMeta;
    return api as AccountApi;
  }

  /** Opens (or joins) the gateway session of a broker account: POST /v1/connect. */
  async connect(brokerAccountId: string): Promise<GatewaySession> {
    const r = await this.req<{ handle: string }>({ method: 'POST', path: '/v1/connect', auth: 'api', safety: 'safe', body: { brokerAccountId } });
    return new GatewaySession(this.transport, this.WebSocket, brokerAccountId, r.handle, this.random);
  }

  /** /v1/stream of an account, reconnecting and resuming (see docs/client.md). */
  stream(accountId: string, o: StreamOptions = {}): StreamSubscription {
    const WS = this.WebSocket;
    if (!WS) throw new TagwError({ code: 'NO_WEBSOCKET', status: 0, message: 'no WebSocket: pass one to new TagwClient({ WebSocket }) (Node 20: the `ws` package)' });
    return new StreamSubscription(this.transport, WS, accountId, o, this.random);
  }

  /** Binds a broker login (SPEC §4.2 /ConnectEx): a new shared seat, or `id` re-bound. */
  connectEx(body: ConnectExInput): Promise<ConnectExResult> {
    // Binding the same login again answers the same account: safe to retry.
    return this.req({ method: 'POST', path: '/ConnectEx', auth: 'api', safety: 'safe', body });
  }

  news(params: NewsParams = {}): Promise<CalendarEvent[]> {
    return this.get('/news', 'safe', params as Record<string, QueryValue>);
  }

  whoami(): Promise<{ keyId: string; readOnly: boolean; accountScoped: boolean; seatId: string | null }> {
    return this.get('/v1/whoami', 'safe');
  }

  readonly brokerAccounts = {
    /** One account per broker login: the same login again answers that account (200). */
    create: (body: BrokerAccountInput): Promise<BrokerAccountInfo> =>
      this.req({ method: 'POST', path: '/v1/broker-accounts', auth: 'api', safety: 'safe', body }),
  };

  /** Provisioning (management key). Creating is not retried after a lost answer (it could create twice). */
  readonly seats = {
    create: (body: SeatInput = {}): Promise<SeatInfo> => this.req({ method: 'POST', path: '/v1/seats', auth: 'management', safety: 'unsafe', body }),
    list: (): Promise<{ seats: SeatInfo[] }> => this.req({ method: 'GET', path: '/v1/seats', auth: 'management', safety: 'safe' }),
    get: (id: string): Promise<SeatInfo> => this.req({ method: 'GET', path: `/v1/seats/${enc(id)}`, auth: 'management', safety: 'safe' }),
    createKey: (id: string, body: KeyInput): Promise<NewKey> =>
      this.req({ method: 'POST', path: `/v1/seats/${enc(id)}/keys`, auth: 'management', safety: 'unsafe', body }),
    listKeys: (id: string): Promise<{ keys: KeyListEntry[] }> => this.req({ method: 'GET', path: `/v1/seats/${enc(id)}/keys`, auth: 'management', safety: 'safe' }),
    /** Removes the seat: its sessions, streams and scoped keys end. */
    remove: (id: string): Promise<{ id: string; removed: true; revokedKeys: string[] }> =>
      this.req({ method: 'DELETE', path: `/v1/seats/${enc(id)}`, auth: 'management', safety: 'safe' }),
  };

  readonly keys = {
    create: (body: { label: string }): Promise<NewKey> => this.req({ method: 'POST', path: '/v1/keys', auth: 'management', safety: 'unsafe', body }),
    list: (params: KeyListParams = {}): Promise<{ keys: KeyListEntry[] }> =>
      this.req({ method: 'GET', path: '/v1/keys', auth: 'management', safety: 'safe', query: params }),
    revoke: (keyId: string): Promise<{ id: string; revoked: true }> =>
      this.req({ method: 'DELETE', path: `/v1/keys/${enc(keyId)}`, auth: 'management', safety: 'safe' }),
    /** A new key in place of `keyId`, which is revoked in the same step. */
    replace: (keyId: string, body: { label?: string } = {}): Promise<ReplacedKeyInfo> =>
      this.req({ method: 'POST', path: `/v1/keys/${enc(keyId)}/replace`, auth: 'management', safety: 'unsafe', body }),
    /** The key's own rate limits (requests/s, orders/s); null: the configured default, 0: unlimited. */
    setLimits: (keyId: string, body: { requestsPerSec: number | null; ordersPerSec: number | null }): Promise<KeyListEntry> =>
      this.req({ method: 'PUT', path: `/v1/keys/${enc(keyId)}/limits`, auth: 'management', safety: 'safe', body }),
    /** A new management key; the one this client holds is revoked (make a new client with the answer's key). */
    rotateManagementKey: (body: { label?: string } = {}): Promise<RotatedManagementKey> =>
      this.req({ method: 'POST', path: '/v1/management-key/rotate', auth: 'management', safety: 'unsafe', body }),
  };

  /** The audit log of management actions, newest first; page back with `before: page.next`. */
  audit(params: { limit?: number; before?: number } = {}): Promise<{ entries: AuditLogEntry[]; next: number | null }> {
    return this.req({ method: 'GET', path: '/v1/audit', auth: 'management', safety: 'safe', query: params });
  }

  /** Version, uptime, shard health, accounts per connection phase, configuration (operator's management key). */
  status(): Promise<JsonObject> {
    return this.req({ method: 'GET', path: '/v1/status', auth: 'management', safety: 'safe' });
  }

  /** Account connections and rolling upgrades (management key). */
  readonly accounts = {
    /** Each account's broker connection: phase, synced, recent changes, the last drop. */
    connections: (): Promise<JsonObject> => this.req({ method: 'GET', path: '/v1/accounts/connections', auth: 'management', safety: 'safe' }),
    upgrade: (id: string, body: { build?: number } = {}): Promise<JsonObject> =>
      this.req({ method: 'POST', path: `/v1/accounts/${enc(id)}/upgrade`, auth: 'management', safety: 'safe', body }),
    upgradeAll: (body: { build?: number } = {}): Promise<JsonObject> =>
      this.req({ method: 'POST', path: '/v1/accounts/upgrade', auth: 'management', safety: 'safe', body }),
    /** Simulator fault on one account (docs/simulator.md). */
    addFault: (id: string, body: AccountFaultInput): Promise<AccountFaultInfo> =>
      this.req({ method: 'POST', path: `/v1/accounts/${enc(id)}/faults`, auth: 'management', safety: 'unsafe', body }),
    /** The simulator faults set on the account's login (an API key of the account; read-only keys too). */
    listFaults: (id: string): Promise<AccountFaultListing> => this.req({ method: 'GET', path: `/v1/accounts/${enc(id)}/faults`, auth: 'api', safety: 'safe' }),
    /** Clears them, or the one `faultId` names (an API key of the account that may trade). */
    clearFaults: (id: string, faultId?: number): Promise<{ cleared: number }> =>
      this.req({ method: 'DELETE', path: `/v1/accounts/${enc(id)}/faults`, auth: 'api', safety: 'safe', query: { faultId } }),
  };

  /** Simulator faults of a whole server (operator management key; docs/simulator.md). */
  readonly sim = {
    addFault: (body: SimFaultInput): Promise<SimFaultInfo> => this.req({ method: 'POST', path: '/v1/sim/faults', auth: 'management', safety: 'unsafe', body }),
    listFaults: (): Promise<SimFaultListing> => this.req({ method: 'GET', path: '/v1/sim/faults', auth: 'management', safety: 'safe' }),
    clearFaults: (server?: string): Promise<{ cleared: number }> =>
      this.req({ method: 'DELETE', path: '/v1/sim/faults', auth: 'management', safety: 'safe', query: { server } }),
  };

  private get<T>(path: string, safety: CallSafety, query?: Record<string, QueryValue>): Promise<T> {
    return this.req({ method: 'GET', path, auth: 'api', safety, query });
  }

  private async req<T = Json>(spec: CallSpec): Promise<T> {
    return (await this.transport.call<T>(spec)).body;
  }
}
