// Binding a broker login to an account, shared by /ConnectEx and POST /v1/seats (kept apart from
// both route files so neither imports the other). The password is sealed here, in the main thread,
// with AES-256-GCM (aad = the account id) and only the sealed form reaches the shard and SQLite.
import { z } from 'zod';
import type { Platform } from '../../broker/types.js';
import { loadSecretKey, SecretBox } from '../../crypto/secretBox.js';
import { apiError } from '../../errors.js';
import type { AccountStatus } from '../../runtime/hosts/accountCommands.js';
import type { Services } from '../../services.js';

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

/** The same fields, optional, for POST /v1/seats: all of user, password and server, or none. */
export const SeatBrokerFields = {
  user: BrokerFields.user.optional(),
  password: BrokerFields.password.optional(),
  server: BrokerFields.server.optional(),
  platform: BrokerFields.platform,
  build: BrokerFields.build,
};

/** POST /v1/seats: binds the login when the body has broker fields (before the seat is created, so a refused login creates nothing). */
export async function bindSeatBroker(
  s: Services, accountId: string, customerId: string,
  b: { user?: string | undefined; password?: string | undefined; server?: string | undefined; platform?: Platform | undefined; build?: number | undefined },
): Promise<void> {
  const given = [b.user, b.password, b.server].filter((x) => x !== undefined).length;
  if (given === 0) {
    if (b.platform !== undefined || b.build !== undefined) throw apiError('BAD_REQUEST', 'platform/build need user, password and server');
    return;
  }
  if (given !== 3) throw apiError('BAD_REQUEST', 'broker binding needs all of user, password and server');
  await bindBroker(s, { accountId, customerId, user: b.user!, password: b.password!, server: b.server!, platform: b.platform, build: b.build });
}
