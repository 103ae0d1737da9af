// Gateway session routes (SPEC §4.3): POST /v1/broker-accounts creates an account (a seat of the
// caller's customer bound to broker credentials: the same account model and the same id as the
// classic routes and /v1/seats/{id}/keys), POST /v1/connect opens (or returns) the session handle.
//
// Handles: 32 random bytes, base64url, prefixed `gwh_`; never the broker's session token. Stored
// as a SHA-256 (lookups) plus the value sealed with the gateway's secret box (to answer the same
// handle to a repeated connect). Handles survive restarts (docs/gateway.md).
import { createHash, randomBytes } from 'node:crypto';
import { boundedCache } from '../../util/boundedCache.js';
import { z } from 'zod';
import { assertCanBind } from '../../auth/rights.js';
import { apiError } from '../../errors.js';
import '../../runtime/hosts/gatewayCommands.js';
import type { Services } from '../services.js';
import { AccountStore } from '../../store/accounts.js';
import { SessionStore, type SessionRow } from '../../store/sessions.js';
import { canonicalAccountId } from '../../util/accountId.js';
import { defineRoute, type AnyRoute } from '../route.js';
import { accountForLogin } from './classicBinding.js';
import { AccountAccess } from './classicAccess.js';
import { onePer } from '../../util/onePer.js';

export const HANDLE_PREFIX = 'gwh_';

export function handleHash(handle: string): string {
  return createHash('sha256').update(handle).digest('hex');
}
const handleAad = (accountId: string) => `gateway-handle:${accountId}`;

/**
 * handle -> session row, for every /v1/proxy request: an LRU in front of one indexed SQLite read.
 * Disconnect invalidates the entry here; a session its shard ends (the account re-bound to another
 * platform, a renewed handle) is invalidated when its `gw.end` event arrives, before the reply of
 * the request that ended it (events and replies share the shard's port, in order).
 */
export class HandleDirectory {
  private readonly cache = boundedCache<string, SessionRow>(100_000);
  private readonly store: SessionStore;
  constructor(s: Services) {
    this.store = new SessionStore(s.db);
  }
  get(hash: string): SessionRow | undefined {
    let row = this.cache.get(hash);
    if (!row) {
      row = this.store.byHash(hash);
      if (row) this.cache.set(hash, row);
    }
    return row?.state === 'live' ? row : undefined;
  }
  /** Cluster mode, a miss here: the node that made the session tells its row (then cached). */
  async findElsewhere(hash: string, cluster: { findSession(hash: string): Promise<SessionRow | undefined> }): Promise<SessionRow | undefined> {
    const row = await cluster.findSession(hash);
    if (row) this.cache.set(hash, row);
    return row;
  }
  set(row: SessionRow): void {
    this.cache.set(row.handle_hash, row);
  }
  /** The handles of the live sessions of the accounts `of` selects, as this node's SQLite has them. */
  liveHandles(of: (accountId: string) => boolean): string[] {
    return this.store.live().filter((r) => of(r.account_id)).map((r) => r.handle_hash);
  }
  invalidate(hash: string): void {
    const row = this.cache.get(hash) ?? this.store.byHash(hash);
    if (row) this.cache.set(hash, { ...row, state: 'invalidated' });
  }
}

export const handleDirectory = onePer((s: Services) => new HandleDirectory(s));

export const BrokerAccountBody = z.object({
  platform: z.enum(['P4', 'P5']).describe('Platform generation of the account; checked against the server'),
  user: z.string().min(1).max(64).describe('Broker login. Never returned.'),
  password: z.string().min(1).max(256).describe('Broker password. Encrypted at rest, never returned or logged.'),
  server: z.string().min(1).max(128).describe('Broker server name, e.g. Sim-P5-Demo'),
}).strict();

export const BrokerAccount = z.object({
  id: z.string().uuid().describe('The account id: use it as brokerAccountId, as ?id= on classic routes and with /v1/seats/{id}/keys'),
  platform: z.enum(['P4', 'P5']),
  server: z.string(),
  connection: z.string().describe('connecting | connected | reconnecting'),
}).meta({ id: 'BrokerAccount' });

export const ConnectBody = z.object({ brokerAccountId: z.string().uuid() }).strict();
export const ConnectReply = z.object({ handle: z.string().describe('Opaque session handle; the same one while the session is live') }).meta({ id: 'ConnectReply' });

export function gatewayRoutes(s: Services): AnyRoute[] {
  const accounts = AccountStore.of(s.db);
  const access = new AccountAccess(s);
  const dir = handleDirectory(s);
  return [
    defineRoute({
      method: 'post', path: '/v1/broker-accounts', family: 'gateway', auth: 'connection', tags: ['gateway'],
      summary: 'Create a broker account (an account of your customer bound to a broker login)',
      description: 'Verifies the login with the broker and returns the account id (201). A login already bound to an account of yours answers 200 with that account (one account per broker login). A refused login answers 400 BROKER_AUTH_FAILED and creates nothing.',
      body: BrokerAccountBody, response: BrokerAccount, successStatus: 201, otherSuccess: [200],
      errors: ['BAD_REQUEST', 'BROKER_AUTH_FAILED', 'BROKER_LOGIN_IN_USE', 'API_KEY_REQUIRED', 'INVALID_API_KEY', 'ACCOUNT_SCOPE', 'READ_ONLY_KEY', 'TERMINAL_ERROR', 'ACCOUNT_CREATION_BUSY'],
      handler: async ({ body, principal }) => {
        const p = principal!;
        assertCanBind(p);
        if (p.kind === 'api' && p.accountScoped) throw apiError('ACCOUNT_SCOPE', 'an account-scoped key cannot create accounts');
        // One account per broker login: a login already bound answers with its account (200), a new one 201.
        const acct = await accountForLogin(s, { customerId: p.customerId, requester: p.keyId, user: body.user, password: body.password, server: body.server, platform: body.platform });
        const st = acct.status ?? await s.shards.call(acct.id, 'account.status', { accountId: acct.id });
        return { status: acct.created ? 201 : 200, body: { id: acct.id, platform: st.platform, server: st.server, connection: st.phase } };
      },
    }),
    defineRoute({
      method: 'post', path: '/v1/connect', family: 'gateway', auth: 'connection', tags: ['gateway'],
      summary: 'Open a session for a broker account and get its handle (the same handle while it is live)',
      body: ConnectBody, response: ConnectReply,
      errors: ['BAD_REQUEST', 'API_KEY_REQUIRED', 'INVALID_API_KEY', 'ACCOUNT_SCOPE', 'READ_ONLY_KEY', 'NO_SUBSCRIPTION', 'NOT_FOUND', 'NOT_CONNECTED', 'SERVICE_UNAVAILABLE', 'BROKER_AUTH_FAILED'],
      handler: async ({ body, principal }) => {
        const p = principal!;
        const accountId = canonicalAccountId(body.brokerAccountId);
        // Scope, ownership (404) and an ACTIVE seat (402), as on the classic routes and /v1/stream.
        await access.resolve(p, { id: accountId }, false);
        const binding = accounts.get(accountId);
        // A seat without a login is an account that cannot connect (503), as on the classic routes.
        if (!binding) throw apiError('NOT_CONNECTED', 'account has no broker login: bind one with /ConnectEx?id=<account> or POST /v1/seats');
        const box = s.secretBox;
        const candidate = HANDLE_PREFIX + randomBytes(32).toString('base64url');
        const connect = (renew: boolean) => s.shards.call(accountId, 'session.connect', {
          accountId, customerId: p.customerId, platform: binding.platform,
          handleHash: handleHash(candidate), handleSealed: box.seal(candidate, handleAad(accountId)), waitMs: 10_000, renew,
        }, { retryOnRestart: true });
        let r = await connect(false);
        let handle: string;
        try {
          handle = r.fresh ? candidate : box.open(r.handleSealed, handleAad(accountId));
        } catch {
          // The live session's handle was sealed with a secret key since reset (SECRET_KEY_RESET):
          // nobody can be given it again, so that session ends and a new one starts. Not for a
          // read-only key: the session is shared with the keys that trade, and it may not end it
          // (as it may not Disconnect it); a bot holding the old handle keeps using it.
          if (p.readOnly) {
            throw apiError('READ_ONLY_KEY', "the account's live session was opened before the gateway's secret key was reset and its handle cannot be given again; a key that may trade must connect (that ends the old session) before a read-only key can");
          }
          r = await connect(true);
          handle = candidate;
        }
        dir.set({
          handle_hash: r.handleHash, account_id: accountId, customer_id: p.customerId, platform: r.platform,
          handle_sealed: r.handleSealed, state: 'live', connected_at: r.connectedAt, invalidated_at: null,
        });
        return { body: { handle } };
      },
    }),
  ];
}
