// First-start set-up: the default customer and its management key. With GATEWAY_MANAGEMENT_KEY
// set, that value is the key (scripted set-ups); otherwise one is generated on the first start and
// written to DATA_DIR/bootstrap.json readable by the owner only, and printed by the first start
// that gets as far as listening (a start that failed before, e.g. on a busy port, never showed it).
import { randomUUID } from 'node:crypto';
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { TenancyStore } from '../store/tenancy.js';
import { generateKey, hashSecret, parseKey } from './keys.js';

export const DEFAULT_CUSTOMER = 'default';

export interface BootstrapResult {
  customerId: string;
  /** The generated management key, until a start has printed it (see markKeyShown). */
  createdKey?: string;
  bootstrapFile: string;
}

export function createManagementKey(store: TenancyStore, customerId: string, label: string, now: number): string {
  const k = generateKey('management');
  store.insertKey({
    id: k.id, customer_id: customerId, kind: 'management', hash: hashSecret(k.secret), label,
    read_only: 0, account_scoped: 0, seat_id: null, created_at: now,
  });
  return k.value;
}

/** A further tenant with its own management key (operator CLI and tests). */
export function createCustomer(store: TenancyStore, name: string, now = Date.now()): { customerId: string; managementKey: string } {
  const c = store.createCustomer(randomUUID(), name, now);
  return { customerId: c.id, managementKey: createManagementKey(store, c.id, 'initial', now) };
}

export function bootstrap(store: TenancyStore, dataDir: string, envKey: string | undefined, now: number): BootstrapResult {
  const bootstrapFile = join(dataDir, 'bootstrap.json');
  const customer = store.customerByName(DEFAULT_CUSTOMER) ?? store.createCustomer(randomUUID(), DEFAULT_CUSTOMER, now);
  if (envKey) return { customerId: customer.id, bootstrapFile };
  const hasKey = store.keysOf(customer.id).some((k) => k.kind === 'management' && k.revoked_at === null);
  if (hasKey) {
    const unshown = unshownKey(bootstrapFile);
    return { customerId: customer.id, bootstrapFile, ...(unshown ? { createdKey: unshown } : {}) };
  }
  const value = createManagementKey(store, customer.id, 'bootstrap', now);
  // Written whatever the file held: without a management key in the database, a bootstrap.json
  // left there (a reset that removed only the database, a damaged file) holds no valid key.
  writeBootstrap(bootstrapFile, { customerId: customer.id, managementKey: value, shown: false });
  return { customerId: customer.id, createdKey: value, bootstrapFile };
}

/** Cluster mode: a management key another store (PostgreSQL) made for this start, kept in
 *  bootstrap.json as the SQLite bootstrap keeps its own; bootstrap() then shows it once. */
export function keepCreatedKey(dataDir: string, customerId: string, managementKey: string): void {
  writeBootstrap(join(dataDir, 'bootstrap.json'), { customerId, managementKey, shown: false });
}

interface BootstrapFile { customerId: string; managementKey: string; shown?: boolean }

/** Owner-only, and replaced whole (a new file renamed over it): a file left by an earlier start
 *  keeps neither its mode nor half of its content. */
function writeBootstrap(file: string, content: BootstrapFile): void {
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, JSON.stringify(content, null, 2) + '\n', { mode: 0o600 });
  renameSync(tmp, file);
}

/** The key of a bootstrap.json no start has printed yet (files from before `shown` count as printed). */
function unshownKey(file: string): string | undefined {
  try {
    const b = JSON.parse(readFileSync(file, 'utf8')) as Partial<BootstrapFile>;
    return b.shown === false && typeof b.managementKey === 'string' ? b.managementKey : undefined;
  } catch {
    return undefined;
  }
}

/** Called once the key was printed: later starts stay quiet. */
export function markKeyShown(file: string): void {
  try {
    const b = JSON.parse(readFileSync(file, 'utf8')) as BootstrapFile;
    if (b.shown === false) writeBootstrap(file, { ...b, shown: true });
  } catch {
    // No file (or not ours to rewrite): nothing is pending.
  }
}

/**
 * After the management key `oldKeyId` was rotated: when bootstrap.json holds that key, it gets the
 * new one (marked shown: the rotation's response showed it), so tools that read the file (the
 * tagw CLI) keep working. A file holding another key, or none, is left alone.
 */
export function rewriteBootstrapKey(file: string, oldKeyId: string, newValue: string, log?: { warn(msg: string, f?: Record<string, unknown>): void }): boolean {
  let b: BootstrapFile;
  try {
    b = JSON.parse(readFileSync(file, 'utf8')) as BootstrapFile;
  } catch {
    return false;
  }
  if (typeof b.managementKey !== 'string' || parseKey(b.managementKey)?.id !== oldKeyId) return false;
  try {
    writeBootstrap(file, { ...b, managementKey: newValue, shown: true });
    return true;
  } catch (err) {
    log?.warn('could not rewrite bootstrap.json with the rotated management key', { file, err: (err as Error).message });
    return false;
  }
}
