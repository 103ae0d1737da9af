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
import { assertAccountScope } from '../../auth/rights.js';
import type { Platform } from '../../broker/types.js';
import { loadSecretKey, SecretBox } from '../../crypto/secretBox.js';
import { apiError } from '../../errors.js';
import type { AccountStatus } from '../../runtime/hosts/accountCommands.js';
import type { Services } from '../../services.js';
import { qInt, qString } from '../schemas.js';
import { defineRoute, type AnyRoute } from '../route.js';
import { ownedSeat } from './provisioning.js';

export const BrokerFields = {
  user: z.string().min(1).max(64).describe('Broker login. Never returned.'),
  password: z.string().min(1).max(256).describe('Broker password. Encrypted at rest, never returned or logged.'),
  server: z.string().min(1).max(128).describe('Broker server name, e.g. Sim-P5-Demo'),
  platform: z.enum(['P4', 'P5']).optional().describe('Checked against the server; inferred from it when omitted'),
  build: z.number().int().min(1).max(100_000).optional().describe('Terminal build of the connection (default: the server build); endpoints newer than it answer 501'),
};

const boxes = new WeakMap<Services, SecretBox>();
export function secretBox(s: Services): SecretBox {
  let b = boxes.get(s);
  if (!b) boxes.set(s, (b = new SecretBox(loadSecretKey(s.config.secretKey, s.config.dataDir))));
  return b;
}

export interface BindInput {
  accountId: string;
  customerId: string;
  user: string;
  password: string;
  server: string;
  platform?: Platform | undefined;
  build?: number | undefined;
}

/** Seals the password and has the account's shard verify and bind the login. Used by /ConnectEx and POST /v1/seats. */
export function bindBroker(s: Services, b: BindInput): Promise<AccountStatus> {
  const passwordEnc = secretBox(s).seal(b.password, b.accountId);
  return s.shards.call(b.accountId, 'account.bind', {
    accountId: b.accountId, customerId: b.customerId, server: b.server, login: b.user, passwordEnc,
    ...(b.platform ? { platform: b.platform } : {}), ...(b.build !== undefined ? { build: b.build } : {}),
  }, { retryOnRestart: true });
}

const ConnectExQuery = z.object({
  user: qString(), password: qString(), server: qString(),
  platform: z.preprocess((v) => (Array.isArray(v) ? v[v.length - 1] : v), BrokerFields.platform),
  build: qInt().pipe(z.number().int().min(1).max(100_000)).optional(),
  id: qString().optional().describe('Existing account to bind (re-bind); omitted: a new shared seat'),
  accountId: qString().optional(),
});
const ConnectExBody = z.object({ ...BrokerFields, id: z.string().optional(), accountId: z.string().optional() }).strict();
type ConnectExInput = z.infer<typeof ConnectExBody>;

const Reply = z.object({ id: z.string().uuid() }).meta({ id: 'ConnectExReply' });

export function connectExRoutes(s: Services): AnyRoute[] {
  const handler = async (input: ConnectExInput, principal: Principal) => {
    const existing = input.id ?? input.accountId;
    const bind = { customerId: principal.customerId, user: input.user, password: input.password, server: input.server, platform: input.platform, build: input.build };
    if (existing) {
      if (principal.kind === 'api') assertAccountScope(principal, existing);
      ownedSeat(s, principal.customerId, existing);
      await bindBroker(s, { ...bind, accountId: existing });
      return { body: { id: existing } };
    }
    if (principal.kind === 'api' && principal.accountScoped) {
      throw apiError('ACCOUNT_SCOPE', 'an account-scoped key cannot create accounts; pass id=<its account>');
    }
    const id = randomUUID();
    // Verified and bound first: a refused login creates nothing.
    await bindBroker(s, { ...bind, accountId: id });
    const now = s.clock.now();
    s.tenancy.insertSeat({ id, customer_id: principal.customerId, private_hosting: 0, region: null, created_at: now });
    await s.shards.call(id, 'seat.create', { seatId: id, readyAt: now });
    return { body: { id } };
  };
  const common = {
    path: '/ConnectEx', family: 'classic' as const, auth: 'connection' as const, tags: ['classic', 'accounts'],
    response: Reply, errors: ['BAD_REQUEST', 'BROKER_AUTH_FAILED', 'API_KEY_REQUIRED', 'INVALID_API_KEY', 'ACCOUNT_SCOPE', 'NOT_FOUND'] as const,
  };
  return [
    defineRoute({
      ...common, method: 'get', errors: [...common.errors], query: ConnectExQuery,
      summary: 'Bind a broker login to an account (query parameters); creates a shared seat when no id is given',
      handler: ({ query, principal }) => handler(query, principal!),
    }),
    defineRoute({
      ...common, method: 'post', errors: [...common.errors], body: ConnectExBody,
      summary: 'Bind a broker login to an account (JSON body); creates a shared seat when no id is given',
      handler: ({ body, principal }) => handler(body, principal!),
    }),
    defineRoute({
      method: 'post', path: '/v1/accounts/:id/upgrade', family: 'provisioning', auth: 'management', tags: ['provisioning', 'accounts'],
      summary: "Rolling upgrade of one account's connection: in-flight requests finish on the old connection, then a new one replaces it",
      body: z.object({ build: z.number().int().min(1).max(100_000).nullable().optional().describe('New terminal build; null = the server build') }).strict(),
      response: z.object({ id: z.string(), connection: z.string(), build: z.number(), generation: z.number() }),
      errors: ['NOT_FOUND', 'MANAGEMENT_KEY_REQUIRED', 'INVALID_API_KEY', 'NOT_CONNECTED'],
      handler: async ({ params, body, principal }) => {
        const row = ownedSeat(s, principal!.customerId, params[0]!);
        const st = await s.shards.call(row.id, 'account.upgrade', { accountId: row.id, ...(body.build !== undefined ? { build: body.build } : {}) }, { retryOnRestart: true });
        return { body: { id: row.id, connection: st.phase, build: st.build, generation: st.generation } };
      },
    }),
  ];
}
