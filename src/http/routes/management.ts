// The management API (SPEC §5.7, §5.8; issue 17): list keys (never their secrets or hashes), revoke,
// replace, rotate the management key, remove a seat, read the audit log. Management key only. A
// revoked key is refused by the very next request: the authenticator's cached row and verified
// values are evicted in the same turn as the revocation commits, and open /v1/stream sockets of
// that key close at once.
import { z } from 'zod';
import { rewriteBootstrapKey } from '../../auth/bootstrap.js';
import { generateKey, hashSecret } from '../../auth/keys.js';
import { apiError } from '../../errors.js';
import type { Services } from '../services.js';
import { AccountStore } from '../../store/accounts.js';
import type { KeyRow } from '../../store/tenancy.js';
import { qInt } from '../schemas.js';
import { defineRoute, type AnyRoute } from '../route.js';
import { withAccountLogins } from './classicBinding.js';
import { noteHeldCopy } from './heldCopies.js';
import { CreatedKey, ownedSeat } from './provisioning.js';

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

export const KeyInfo = z.object({
  id: z.string(),
  kind: z.enum(['api', 'management']),
  label: z.string(),
  readOnly: z.boolean(),
  accountScoped: z.boolean(),
  seatId: z.string().nullable().describe('The seat an accountScoped key works for; null: every account of the customer'),
  createdAt: z.string(),
  lastUsedAt: z.string().nullable().describe('ISO 8601, UTC; recorded in batches, so at most a few seconds behind'),
  revoked: z.boolean(),
  revokedAt: z.string().nullable(),
  replacedBy: z.string().nullable().describe('Id of the key that replaced this one'),
  requestsPerSec: z.number().nullable().describe('Per-key override; null: the configured default'),
  ordersPerSec: z.number().nullable().describe('Per-key override; null: the configured default'),
}).meta({ id: 'KeyInfo' });

export function keyJson(s: Services, k: KeyRow): z.infer<typeof KeyInfo> {
  const pending = s.keyUsage.latest(k.id);
  const lastUsed = pending !== undefined && (k.last_used_at === null || pending > k.last_used_at) ? pending : k.last_used_at;
  return {
    id: k.id, kind: k.kind, label: k.label, readOnly: k.read_only === 1, accountScoped: k.account_scoped === 1, seatId: k.seat_id,
    createdAt: new Date(k.created_at).toISOString(), lastUsedAt: iso(lastUsed),
    revoked: k.revoked_at !== null, revokedAt: iso(k.revoked_at), replacedBy: k.replaced_by,
    requestsPerSec: k.requests_per_sec, ordersPerSec: k.orders_per_sec,
  };
}

export const KeyList = z.object({ keys: z.array(KeyInfo) });
export const KeyListQuery = z.object({
  kind: z.enum(['api', 'management', 'all']).default('api').describe('Which keys: API keys (default), management keys, or both'),
  seatId: z.string().min(1).optional().describe('Only the keys scoped to this seat'),
}).strict();

export const ReplacedKey = CreatedKey.extend({ replaced: z.string().describe('Id of the key revoked by this replacement') }).meta({ id: 'ReplacedKey' });
export const RotatedKey = z.object({
  id: z.string(),
  key: z.string().describe('The new management key. Shown only in this response; only a hash is stored.'),
  label: z.string(),
  createdAt: z.string(),
  revoked: z.string().describe('Id of the management key this rotation revoked (the one that sent the request)'),
  bootstrapFileUpdated: z.boolean().describe('Whether the answering gateway rewrote its DATA_DIR/bootstrap.json with the new key (it held the old one)'),
}).meta({ id: 'RotatedManagementKey' });

export const AuditEntry = z.object({
  id: z.number().int(),
  at: z.string().describe('ISO 8601, UTC'),
  keyId: z.string().describe("The management key that acted ('env': the one set as GATEWAY_MANAGEMENT_KEY)"),
  action: z.string().describe('e.g. key.create, key.revoke, key.replace, managementKey.rotate, seat.create, seat.delete'),
  target: z.string().nullable().describe('Id of the key, seat or account acted on'),
  detail: z.record(z.string(), z.unknown()).nullable(),
}).meta({ id: 'AuditEntry' });

/** The customer's live key `id` of kind api (404 otherwise: other customers' ids are not disclosed). */
function ownedApiKey(s: Services, customerId: string, id: string): KeyRow {
  const row = s.tenancy.keyById(id);
  if (!row || row.customer_id !== customerId || row.kind !== 'api') throw apiError('NOT_FOUND', 'key not found');
  return row;
}

/** One of a key's limits in PUT /v1/keys/{id}/limits: both are required (PUT sets the two), and one
 *  left out is told what it may be, null included ("required (a number)" sent clients looking for a
 *  number to put where they wanted the default). */
const keyLimit = z.number({ error: (iss) => (iss.input === undefined ? 'required (a number per second; null: the configured default, 0: unlimited)' : undefined) })
  .min(0).max(10_000_000).nullable();

export function managementRoutes(s: Services, closeSockets: { ofKey(keyId: string): void; ofAccount(accountId: string): void }): AnyRoute[] {
  /** After a revocation committed: the next request with the key is refused, its sockets close, its
   *  rate-limit buckets go (other nodes do the same on the cluster's notice: clusterNotices.ts). */
  const forget = (keyId: string) => {
    s.auth.evict(keyId);
    s.rateLimits.forget(keyId);
    closeSockets.ofKey(keyId);
  };
  return [
    defineRoute({
      method: 'get', path: '/v1/keys', family: 'provisioning', auth: 'management', tags: ['management'],
      summary: "List the customer's keys: label, kind, scope, created, last used, revoked (never a secret or its hash)",
      query: KeyListQuery, response: KeyList, errors: ['BAD_REQUEST'],
      handler: ({ query, principal }) => {
        const rows = query.seatId ? s.tenancy.keysOfSeat(principal!.customerId, query.seatId) : s.tenancy.keysOf(principal!.customerId);
        return { body: { keys: rows.filter((k) => query.kind === 'all' || k.kind === query.kind).map((k) => keyJson(s, k)) } };
      },
    }),
    defineRoute({
      method: 'get', path: '/v1/seats/:id/keys', family: 'provisioning', auth: 'management', tags: ['management'],
      summary: 'List the keys scoped to this seat (revoked ones included, marked)', response: KeyList, errors: ['NOT_FOUND'],
      handler: ({ params, principal }) => {
        const seat = ownedSeat(s, principal!.customerId, params[0]!);
        return { body: { keys: s.tenancy.keysOfSeat(principal!.customerId, seat.id).map((k) => keyJson(s, k)) } };
      },
    }),
    defineRoute({
      method: 'delete', path: '/v1/keys/:keyId', family: 'provisioning', auth: 'management', tags: ['management'], audit: 'key.revoke',
      summary: 'Revoke an API key: the next request with it answers 401, and its open streams close (4001)',
      response: z.object({ id: z.string(), revoked: z.literal(true) }), errors: ['NOT_FOUND'],
      handler: async ({ params, principal, audit }) => {
        const row = ownedApiKey(s, principal!.customerId, params[0]!);
        // Revoking a revoked key again is a no-op with the same answer (a retried DELETE), audited too.
        await s.tenancyWrites.revokeKey(row.id, principal!.customerId, s.clock.now(), () => audit?.row(row.id));
        forget(row.id);
        return { body: { id: row.id, revoked: true } };
      },
    }),
    defineRoute({
      method: 'post', path: '/v1/keys/:keyId/replace', family: 'provisioning', auth: 'management', tags: ['management'], audit: 'key.replace',
      summary: 'Replace a lost or leaked API key: a new key with the same label, scope and limits, shown once; the old one is revoked in the same transaction',
      body: z.object({ label: z.string().min(1).max(100).optional().describe('Label of the new key (default: the old one\'s)') }).strict(),
      response: ReplacedKey, successStatus: 201, errors: ['BAD_REQUEST', 'NOT_FOUND', 'CONFLICT'],
      handler: async ({ params, body, principal, audit }) => {
        const old = ownedApiKey(s, principal!.customerId, params[0]!);
        if (old.revoked_at !== null) throw apiError('CONFLICT', `key ${old.id} is already revoked${old.replaced_by ? ` (replaced by ${old.replaced_by})` : ''}`);
        const k = generateKey('api');
        const now = s.clock.now();
        const label = body.label ?? old.label;
        const ok = await s.tenancyWrites.replaceKey(old.id, principal!.customerId, {
          id: k.id, customer_id: old.customer_id, kind: 'api', hash: hashSecret(k.secret), label,
          read_only: old.read_only, account_scoped: old.account_scoped, seat_id: old.seat_id, created_at: now,
          requests_per_sec: old.requests_per_sec, orders_per_sec: old.orders_per_sec,
        }, now, (replaced) => (replaced ? audit?.row(old.id, { newKeyId: k.id }) : undefined));
        if (!ok) throw apiError('CONFLICT', `key ${old.id} was revoked meanwhile`);
        forget(old.id);
        return {
          status: 201,
          body: {
            id: k.id, key: k.value, label, readOnly: old.read_only === 1, accountScoped: old.account_scoped === 1, seatId: old.seat_id,
            createdAt: new Date(now).toISOString(), replaced: old.id,
          },
        };
      },
    }),
    defineRoute({
      method: 'put', path: '/v1/keys/:keyId/limits', family: 'provisioning', auth: 'management', tags: ['management'], audit: 'key.limits',
      summary: "Set an API key's own rate limits (requests/s, orders/s); null: the configured default, 0: unlimited",
      description: 'Defaults: KEY_REQUESTS_PER_SEC and KEY_ORDERS_PER_SEC. Over a limit the key gets 429 RATE_LIMITED with retry-after and RateLimit-* headers. Takes effect at the next request.',
      body: z.object({ requestsPerSec: keyLimit, ordersPerSec: keyLimit }).strict(),
      response: KeyInfo, errors: ['BAD_REQUEST', 'NOT_FOUND'],
      handler: async ({ params, body, principal, audit }) => {
        const row = ownedApiKey(s, principal!.customerId, params[0]!);
        await s.tenancyWrites.setKeyLimits(row.id, principal!.customerId, body, () => audit?.row(row.id, body));
        s.rateLimits.forget(row.id);
        return { body: keyJson(s, s.tenancy.keyById(row.id)!) };
      },
    }),
    defineRoute({
      method: 'post', path: '/v1/management-key/rotate', family: 'provisioning', auth: 'management', tags: ['management'], audit: 'managementKey.rotate',
      summary: 'Rotate the management key that sends this request: a new one is shown once, the old one is refused from the next request on',
      description: 'DATA_DIR/bootstrap.json is rewritten with the new key when it held the old one (so the tagw CLI keeps working). A key set with GATEWAY_MANAGEMENT_KEY is changed there (403 here).',
      body: z.object({ label: z.string().min(1).max(100).optional() }).strict(),
      response: RotatedKey, successStatus: 201, errors: ['BAD_REQUEST', 'FORBIDDEN', 'CONFLICT'],
      handler: async ({ body, principal, audit }) => {
        const p = principal!;
        if (p.keyId === 'env') throw apiError('FORBIDDEN', 'this management key comes from GATEWAY_MANAGEMENT_KEY: change it there and restart the gateway');
        const old = s.tenancy.keyById(p.keyId)!;
        const k = generateKey('management');
        const now = s.clock.now();
        const label = body.label ?? old.label;
        const ok = await s.tenancyWrites.replaceKey(old.id, p.customerId, {
          id: k.id, customer_id: p.customerId, kind: 'management', hash: hashSecret(k.secret), label,
          read_only: 0, account_scoped: 0, seat_id: null, created_at: now,
        }, now, (replaced) => (replaced ? audit?.row(old.id, { newKeyId: k.id }) : undefined));
        if (!ok) throw apiError('CONFLICT', 'this management key was revoked meanwhile');
        forget(old.id);
        const bootstrapFileUpdated = rewriteBootstrapKey(s.bootstrapFile, old.id, k.value, s.log);
        return {
          status: 201, body: { id: k.id, key: k.value, label, createdAt: new Date(now).toISOString(), revoked: old.id, bootstrapFileUpdated },
        };
      },
    }),
    defineRoute({
      method: 'delete', path: '/v1/seats/:id', family: 'provisioning', auth: 'management', tags: ['management'], audit: 'seat.delete',
      summary: 'Remove a seat: its broker connection, gateway sessions and streams close, the keys scoped to it are revoked; its orders and audit rows are kept',
      response: z.object({ id: z.string(), removed: z.literal(true), revokedKeys: z.array(z.string()) }), errors: ['NOT_FOUND'],
      handler: async ({ params, principal, audit }) => {
        const seat = ownedSeat(s, principal!.customerId, params[0]!);
        // Under its login's lock until its shard let the login go (account.remove): that login bound
        // again meanwhile, on another shard, would have two copies acting (withAccountLogins).
        return withAccountLogins(s, seat.id, undefined, async () => {
          const revoked = await s.tenancyWrites.removeSeat(seat.id, principal!.customerId, s.clock.now(),
            (keys) => (keys ? audit?.row(seat.id, { revokedKeys: keys }) : undefined));
          if (!revoked) throw apiError('NOT_FOUND', 'account not found');
          for (const k of revoked) forget(k);
          closeSockets.ofAccount(seat.id);
          // The seat is gone for every request from here (the store says so); the shard's actors stop after.
          // In cluster mode an account without a broker login runs on no node, so it has no owner to
          // ask: the call would wait CLUSTER_OWNER_WAIT_MS for one and answer 503 for a seat removed.
          // Nor has an account whose owner's lease round, since the removal, released it (it exists no
          // more): that release stopped its actors, so no owner means nothing left to stop.
          const stop = { unownedIsDone: true } as const;
          if (!s.tenancyWrites.clustered || AccountStore.of(s.db).get(seat.id)) {
            await s.shards.call(seat.id, 'session.closeAccount', { accountId: seat.id }, stop);
            // Its login's simulated copy kept by its shard (a full disk): no other shard loads it meanwhile.
            // No answer: no owner any more (its lease round let it go since the removal), nothing held.
            const removed = await s.shards.call(seat.id, 'account.remove', { accountId: seat.id }, stop);
            if (removed) noteHeldCopy(s, seat.id, removed);
          }
          await s.shards.call(seat.id, 'seat.remove', { seatId: seat.id }, stop);
          return { body: { id: seat.id, removed: true, revokedKeys: revoked } };
        });
      },
    }),
    defineRoute({
      method: 'get', path: '/v1/audit', family: 'provisioning', auth: 'management', tags: ['management'],
      summary: 'The audit log of management actions, newest first (page back with ?before=<id of the last entry>)',
      query: z.object({
        limit: qInt().pipe(z.number().min(1).max(1000)).default(100),
        before: qInt().pipe(z.number().min(1)).optional(),
      }).strict(),
      response: z.object({ entries: z.array(AuditEntry), next: z.number().int().nullable().describe('?before= for the next page; null: no more') }),
      errors: ['BAD_REQUEST'],
      handler: ({ query, principal }) => {
        const rows = s.audit.list(principal!.customerId, { limit: query.limit, before: query.before });
        return {
          body: {
            entries: rows.map((r) => ({
              id: r.id, at: new Date(r.at).toISOString(), keyId: r.actor_key_id, action: r.action, target: r.target,
              detail: r.detail_json === null ? null : (JSON.parse(r.detail_json) as Record<string, unknown>),
            })),
            next: rows.length === query.limit ? rows[rows.length - 1]!.id : null,
          },
        };
      },
    }),
  ];
}
