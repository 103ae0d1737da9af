// /ConnectEx (SPEC §4.2, §5.2): binds a broker login to an account of the caller's customer.
// Without `id` it creates a shared seat (ACTIVE at once, 14 USD/month) for the login; with `id`
// it re-binds that seat (a rolling replacement of its connection). The password is sealed with
// AES-256-GCM before it leaves this thread and is never returned or logged.
//
// A login the broker refuses answers 400 BROKER_AUTH_FAILED, not 401: 401 is reserved for the
// gateway's own API keys (and counts toward the failed-auth block of the caller's IP), and 403
// would suggest the key lacks a right. Nothing is created when the broker refuses.
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { Principal } from '../../auth/authenticator.js';
import { assertAccountScope, assertCanBind } from '../../auth/rights.js';
import { apiError } from '../../errors.js';
import type { Services } from '../services.js';
import { assertAliasAgrees, one, qInt, qString } from '../schemas.js';
import { AccountStore } from '../../store/accounts.js';
import { defineRoute, type ActionAudit, type AnyRoute } from '../route.js';
import { canonicalAccountId } from '../../util/accountId.js';
import { accountForLogin, BrokerFields, rebindAccount } from './classicBinding.js';
import { ownedSeat } from './provisioning.js';

// Kept exported here too: the gateway routes (issue 5) bind broker accounts with them.
export { bindBroker, BrokerFields, type BindInput } from './classicBinding.js';

const ConnectExQuery = z.object({
  user: qString(), password: qString(), server: qString(),
  platform: z.preprocess(one, BrokerFields.platform),
  build: qInt().pipe(z.number().int().min(1).max(100_000)).optional(),
  id: qString().optional().describe('Existing account to bind (re-bind); omitted: a new shared seat'),
  accountId: qString().optional(),
});
export const ConnectExBody = z.object({ ...BrokerFields, id: z.string().optional(), accountId: z.string().optional() }).strict();
type ConnectExInput = z.infer<typeof ConnectExBody>;

export const ConnectExReply = z.object({ id: z.string().uuid() }).meta({ id: 'ConnectExReply' });
const Reply = ConnectExReply;

/**
 * The body methods also read `id`/`accountId` from the query string, as every classic route
 * addresses its account (SPEC §5.1). Ignoring it turned `POST /ConnectEx?id=<account>` (a re-bind)
 * into the creation of a new billable seat. Query and body naming different accounts: 400.
 */
function withQueryId(body: ConnectExInput, query: Record<string, unknown>): ConnectExInput {
  const out = { ...body };
  for (const k of ['id', 'accountId'] as const) {
    const v = one(query[k]);
    if (v === undefined) continue;
    if (typeof v !== 'string' || v === '') throw apiError('BAD_REQUEST', `parameter '${k}': ${typeof v === 'string' ? 'empty' : 'given more than once with different values'}`);
    if (out[k] === undefined) out[k] = v;
    else if (canonicalAccountId(out[k]) !== canonicalAccountId(v)) {
      throw apiError('BAD_REQUEST', `parameter '${k}': given in the query and in the body with different values; send one of them`);
    }
  }
  return out;
}

export function connectExRoutes(s: Services): AnyRoute[] {
  const handler = async (input: ConnectExInput, principal: Principal, audit: ActionAudit | undefined) => {
    assertCanBind(principal);
    const given = canonicalAccountId(input.id);
    const alias = canonicalAccountId(input.accountId);
    // Overruling either would re-bind the wrong account to another login.
    assertAliasAgrees('id', 'accountId', given, alias);
    const existing = given ?? alias;
    const bind = { customerId: principal.customerId, requester: principal.keyId, user: input.user, password: input.password, server: input.server, platform: input.platform, build: input.build };
    if (existing) {
      if (principal.kind === 'api') assertAccountScope(principal, existing);
      ownedSeat(s, principal.customerId, existing);
      // A management key's bind (the dashboard's seat page) is recorded with the binding it makes.
      await rebindAccount(s, { ...bind, accountId: existing, audit: audit && { ...audit.row(existing, { server: input.server, login: input.user }), ref: randomUUID() } });
      return { body: { id: existing } };
    }
    if (principal.kind === 'api' && principal.accountScoped) {
      throw apiError('ACCOUNT_SCOPE', 'an account-scoped key cannot create accounts; pass id=<its account>');
    }
    // A login already bound answers with its account: ConnectEx is safe to call at every bot start.
    const { id } = await accountForLogin(s, bind, audit && ((accountId, newSeat) =>
      ({ ...audit.row(accountId, { server: input.server, login: input.user, ...(newSeat ? { newSeat } : {}) }), ref: randomUUID() })));
    // Found bound with the same password: nothing changed, nothing to record.
    audit?.none();
    return { body: { id } };
  };
  const common = {
    path: '/ConnectEx', family: 'classic' as const, auth: 'connection' as const, tags: ['classic', 'accounts'], audit: 'account.bind',
    response: Reply, errors: ['BAD_REQUEST', 'BROKER_AUTH_FAILED', 'BROKER_LOGIN_IN_USE', 'API_KEY_REQUIRED', 'INVALID_API_KEY', 'ACCOUNT_SCOPE', 'READ_ONLY_KEY', 'NOT_FOUND', 'TERMINAL_ERROR', 'ACCOUNT_CREATION_BUSY'] as const,
  };
  return [
    defineRoute({
      ...common, method: 'get', errors: [...common.errors], query: ConnectExQuery, secretQuery: true, changesState: true,
      summary: 'Bind a broker login to an account (query parameters); creates a shared seat when no id is given',
      handler: ({ query, principal, audit }) => handler(query, principal!, audit),
    }),
    // SPEC §4.2 lists /ConnectEx under "any" method: every method but GET takes the JSON body.
    ...(['post', 'put', 'patch', 'delete'] as const).map((method) => defineRoute({
      ...common, method, errors: [...common.errors], body: ConnectExBody,
      summary: 'Bind a broker login to an account (JSON body); creates a shared seat when no id is given',
      description: 'The account to re-bind is `id` (alias `accountId`) in the body or in the query string (`?id=`, as on the other classic routes); both given with different values is a 400.',
      handler: ({ body, principal, req, audit }) => handler(withQueryId(body, req.query), principal!, audit),
    })),
    defineRoute({
      method: 'post', path: '/v1/accounts/:id/upgrade', family: 'provisioning', auth: 'management', audit: 'account.upgrade', tags: ['provisioning', 'accounts'],
      summary: "Rolling upgrade of one account's connection: in-flight requests finish on the old connection, then a new one replaces it",
      body: z.object({ build: z.number().int().min(1).max(100_000).nullable().optional().describe('New terminal build; null = the server build') }).strict(),
      response: z.object({ id: z.string(), connection: z.string(), build: z.number(), generation: z.number() }),
      errors: ['NOT_FOUND', 'MANAGEMENT_KEY_REQUIRED', 'INVALID_API_KEY', 'NOT_CONNECTED', 'SERVICE_UNAVAILABLE'],
      handler: async ({ params, body, principal, audit }) => {
        const row = ownedSeat(s, principal!.customerId, params[0]!);
        // Its audit row goes with the build it records (the account's owner writes both at once),
        // under a reference of this request's: the call re-sent (a shard restarted) writes it once.
        const st = await s.shards.call(row.id, 'account.upgrade', {
          accountId: row.id, ...(body.build !== undefined ? { build: body.build } : {}), ...(audit ? { audit: { ...audit.row(row.id), ref: randomUUID() } } : {}),
        }, { retryOnRestart: true });
        return { body: { id: row.id, connection: st.phase, build: st.build, generation: st.generation } };
      },
    }),
    defineRoute({
      method: 'post', path: '/v1/accounts/upgrade', family: 'provisioning', auth: 'management', audit: 'accounts.upgrade', tags: ['provisioning', 'accounts'],
      summary: "Rolling upgrade of every account of the customer, one account at a time",
      description: 'Each account is replaced like POST /v1/accounts/{id}/upgrade (requests in flight finish on its old connection first); the next account starts only when the previous one is connected again, so at most one account is between connections at any moment.',
      body: z.object({ build: z.number().int().min(1).max(100_000).nullable().optional().describe('New terminal build for every account; null = each server build') }).strict(),
      response: z.object({ upgraded: z.array(z.object({ id: z.string(), connection: z.string(), build: z.number(), generation: z.number() })) }),
      errors: ['MANAGEMENT_KEY_REQUIRED', 'INVALID_API_KEY'],
      handler: async ({ body, principal }) => {
        const accounts = AccountStore.of(s.db);
        const upgraded = [];
        for (const seat of s.tenancy.seatsOf(principal!.customerId)) {
          if (!accounts.get(seat.id)) continue; // a seat without a broker login has no connection to replace
          const st = await s.shards.call(seat.id, 'account.upgrade', { accountId: seat.id, ...(body.build !== undefined ? { build: body.build } : {}) }, { retryOnRestart: true });
          upgraded.push({ id: seat.id, connection: st.phase, build: st.build, generation: st.generation });
        }
        return { body: { upgraded } };
      },
    }),
  ];
}
