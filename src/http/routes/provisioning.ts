// Provisioning (SPEC §4.2, §5.7): seats and keys, management key only. Seats of another customer
// answer 404 exactly like unknown ones, so seat ids cannot be probed across tenants.
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { seatStatusAt } from '../../../actors/seatStatus.js';
import { generateKey, hashSecret } from '../../auth/keys.js';
import { apiError } from '../../errors.js';
import type { SeatView } from '../../runtime/protocol.js';
import type { Services } from '../services.js';
import type { NewAuditRow } from '../../store/audit.js';
import type { SeatRow } from '../../store/tenancy.js';
import { canonicalAccountId } from '../../util/accountId.js';
import { defineRoute, type AnyRoute } from '../route.js';
import { bindSeatBroker, SeatBrokerFields } from './classicBinding.js';
import { loginInUse } from './loginInUse.js';

/** Billing constants (SPEC §1): USD per account per month. */
export const SEAT_PRICE = { shared: 14, private: 17, currency: 'USD' } as const;

export const SeatBody = z.object({
  privateHosting: z.boolean().default(false).describe('Dedicated IP and device id, not shared with other customers'),
  region: z.string().min(1).max(64).optional().describe('Region for a private seat, e.g. us-east'),
  // Optional broker login bound at creation, like /ConnectEx (issue 4).
  ...SeatBrokerFields,
}).strict();

export const Seat = z.object({
  id: z.string().uuid(),
  status: z.enum(['BUILDING_SERVER', 'ACTIVE']),
  serverBuilding: z.boolean(),
  privateHosting: z.boolean(),
  region: z.string().nullable(),
  monthlyPrice: z.number().describe('14 for a shared seat, 17 for a privately hosted one'),
  currency: z.literal('USD'),
  createdAt: z.string().describe('ISO 8601, UTC'),
  readyAt: z.string().describe('ISO 8601, UTC: when the seat became (or becomes) ACTIVE'),
}).meta({ id: 'Seat' });

export const KeyBody = z.object({
  label: z.string().min(1).max(100),
  readOnly: z.boolean().default(false),
  accountScoped: z.boolean().default(false),
}).strict();

export const CreatedKey = z.object({
  id: z.string(),
  key: z.string().describe('The full key. Shown only in this response; only a hash is stored.'),
  label: z.string(),
  readOnly: z.boolean(),
  accountScoped: z.boolean(),
  seatId: z.string().nullable(),
  createdAt: z.string(),
}).meta({ id: 'CreatedKey' });

function seatJson(row: SeatRow, state: SeatView | null) {
  const status = state?.status ?? 'BUILDING_SERVER';
  const priv = row.private_hosting === 1;
  return {
    id: row.id,
    status,
    serverBuilding: status === 'BUILDING_SERVER',
    privateHosting: priv,
    region: row.region,
    monthlyPrice: priv ? SEAT_PRICE.private : SEAT_PRICE.shared,
    currency: SEAT_PRICE.currency,
    createdAt: new Date(row.created_at).toISOString(),
    readyAt: new Date(state?.readyAt ?? row.created_at).toISOString(),
  };
}

export function ownedSeat(s: Services, customerId: string, seatId: string): SeatRow {
  const row = s.tenancy.seatById(canonicalAccountId(seatId));
  if (!row || row.customer_id !== customerId) throw apiError('NOT_FOUND', 'account not found');
  return row;
}

export function provisioningRoutes(s: Services): AnyRoute[] {
  return [
    defineRoute({
      method: 'post', path: '/v1/seats', family: 'provisioning', auth: 'management', tags: ['provisioning'], audit: 'seat.create',
      summary: 'Create a seat (account)',
      description: 'A shared seat is ACTIVE at once; a privately hosted seat starts BUILDING_SERVER with serverBuilding=true. Poll GET /v1/seats/{id}.',
      body: SeatBody, response: Seat, successStatus: 201, errors: ['BAD_REQUEST', 'MANAGEMENT_KEY_REQUIRED', 'INVALID_API_KEY', 'BROKER_AUTH_FAILED', 'BROKER_LOGIN_IN_USE', 'TERMINAL_ERROR', 'ACCOUNT_CREATION_BUSY'],
      handler: async ({ body, principal, audit }) => {
        const id = randomUUID();
        return bindSeatBroker(s, id, principal!.customerId, { ...body, requester: principal!.keyId }, async (binding) => {
          const now = s.clock.now();
          const row: SeatRow = {
            id, customer_id: principal!.customerId, private_hosting: body.privateHosting ? 1 : 0,
            region: body.region ?? null, created_at: now, removed_at: null,
          };
          const readyAt = body.privateHosting ? now + s.config.seatBuildMs : now;
          // Cluster mode: the seat, its state (and binding) in one commit, the one that makes the seat.
          const state = { seat_id: row.id, status: seatStatusAt(readyAt, now), ready_at: readyAt, updated_at: now };
          // A seat made with a broker login says which (as /ConnectEx's account.bind row does; never the password).
          const detail = body.user !== undefined ? { server: body.server, login: body.user } : undefined;
          if (!(await s.tenancyWrites.insertSeat(row, state, binding, (made) => (made ? audit?.row(row.id, detail) : undefined)))) throw loginInUse();
          const view = await s.shards.call(row.id, 'seat.create', { seatId: row.id, readyAt });
          return { status: 201, body: seatJson(row, view) };
        }, audit);
      },
    }),
    defineRoute({
      method: 'get', path: '/v1/seats', family: 'provisioning', auth: 'management', tags: ['provisioning'],
      summary: "List the customer's seats", response: z.object({ seats: z.array(Seat) }),
      handler: async ({ principal }) => {
        const rows = s.tenancy.seatsOf(principal!.customerId);
        const states = await Promise.all(rows.map((r) => s.shards.call(r.id, 'seat.get', { seatId: r.id })));
        return { body: { seats: rows.map((r, i) => seatJson(r, states[i]!)) } };
      },
    }),
    defineRoute({
      method: 'get', path: '/v1/seats/:id', family: 'provisioning', auth: 'management', tags: ['provisioning'],
      summary: 'Get a seat with its status', response: Seat, errors: ['NOT_FOUND', 'MANAGEMENT_KEY_REQUIRED', 'INVALID_API_KEY'],
      handler: async ({ params, principal }) => {
        const row = ownedSeat(s, principal!.customerId, params[0]!);
        const state = await s.shards.call(row.id, 'seat.get', { seatId: row.id });
        return { body: seatJson(row, state) };
      },
    }),
    defineRoute({
      method: 'post', path: '/v1/seats/:id/keys', family: 'provisioning', auth: 'management', tags: ['provisioning'], audit: 'key.create',
      summary: 'Create an API key for the customer, optionally read-only and/or scoped to this seat',
      description: 'The key is returned once. An accountScoped key works only with ?id= of this seat; a readOnly key answers 403 on trading calls.',
      body: KeyBody, response: CreatedKey, successStatus: 201, errors: ['BAD_REQUEST', 'NOT_FOUND'],
      handler: async ({ params, body, principal, audit }) => {
        const seat = ownedSeat(s, principal!.customerId, params[0]!);
        const detail = { seatId: seat.id, readOnly: body.readOnly, accountScoped: body.accountScoped };
        const key = await issueApiKey(s, principal!.customerId, body, seat.id, (keyId) => audit?.row(keyId, detail));
        return { status: 201, body: key };
      },
    }),
    defineRoute({
      method: 'post', path: '/v1/keys', family: 'provisioning', auth: 'management', tags: ['provisioning'], audit: 'key.create',
      summary: 'Create a full-access API key (the dashboard equivalent: not scoped, not read-only)',
      body: z.object({ label: z.string().min(1).max(100) }).strict(), response: CreatedKey, successStatus: 201,
      handler: async ({ body, principal, audit }) => {
        const key = await issueApiKey(s, principal!.customerId, { label: body.label, readOnly: false, accountScoped: false }, null, (keyId) => audit?.row(keyId));
        return { status: 201, body: key };
      },
    }),
    defineRoute({
      method: 'get', path: '/v1/whoami', family: 'provisioning', auth: 'api', tags: ['provisioning'],
      summary: 'Describe the API key sent as x-api-key (lets a bot check its key without side effects)',
      response: z.object({ keyId: z.string(), readOnly: z.boolean(), accountScoped: z.boolean(), seatId: z.string().nullable() }),
      handler: ({ principal }) => ({
        body: { keyId: principal!.keyId, readOnly: principal!.readOnly, accountScoped: principal!.accountScoped, seatId: principal!.seatId },
      }),
    }),
  ];
}

/** `audit`: the key.create row of the new key's id, written with it. */
async function issueApiKey(s: Services, customerId: string, o: { label: string; readOnly: boolean; accountScoped: boolean }, seatId: string | null,
  audit: (keyId: string) => NewAuditRow | undefined) {
  const k = generateKey('api');
  const now = s.clock.now();
  // An unscoped key is not tied to the seat it was created under: it works for every account of the customer.
  const boundSeat = o.accountScoped ? seatId : null;
  await s.tenancyWrites.insertKey({
    id: k.id, customer_id: customerId, kind: 'api', hash: hashSecret(k.secret), label: o.label,
    read_only: o.readOnly ? 1 : 0, account_scoped: o.accountScoped ? 1 : 0, seat_id: boundSeat, created_at: now,
  }, () => audit(k.id));
  return {
    id: k.id, key: k.value, label: o.label, readOnly: o.readOnly, accountScoped: o.accountScoped, seatId: boundSeat,
    createdAt: new Date(now).toISOString(),
  };
}
