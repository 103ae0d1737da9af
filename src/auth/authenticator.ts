// Resolves the key a request carries into a Principal, following SPEC §5 on where each kind of
// key may appear. Key rows are cached (LRU) in front of SQLite; revocation evicts the entry.
import { createHash, timingSafeEqual } from 'node:crypto';
import { boundedCache } from '../util/boundedCache.js';
import { apiError } from '../errors.js';
import type { TenancyStore } from '../store/tenancy.js';
import { parseKey, secretMatches, type ParsedKey } from './keys.js';
import type { KeyUsage } from './keyUsage.js';

export interface Principal {
  kind: 'management' | 'api';
  keyId: string;
  customerId: string;
  readOnly: boolean;
  accountScoped: boolean;
  /** The seat an account-scoped key is bound to. */
  seatId: string | null;
}

/**
 * none: no key. management: provisioning (Bearer or x-management-key, management keys only).
 * connection: /ConnectEx, /v1/broker-accounts, /v1/connect (management key, or an API key as
 * x-api-key, or an unscoped API key as Bearer). api: trading and market data (x-api-key only).
 * news: any API key as x-api-key or Bearer.
 */
export type AuthMode = 'none' | 'management' | 'connection' | 'api' | 'news';

interface CachedKey { hash: string; principal: Principal; revoked: boolean }

function bearer(headers: Record<string, string>): string | undefined {
  const h = headers['authorization'];
  if (!h) return undefined;
  const m = /^Bearer\s+(.+)$/i.exec(h.trim());
  return m ? m[1]!.trim() : undefined;
}

export class Authenticator {
  private readonly cache = boundedCache<string, CachedKey>(50_000);
  /**
   * Key values already verified, so a bot's every request skips the hash: keyed by the full
   * value, which only a holder of the secret can present. Revocation evicts by key id.
   */
  private readonly verified = boundedCache<string, Principal>(50_000);
  private readonly envKeyHash: Buffer | undefined;

  constructor(
    private readonly store: TenancyStore,
    envManagementKey: { value: string; customerId: string } | undefined,
    /** Records each stored key's last use (coalesced writes); absent in tests that do not need it. */
    private readonly usage?: KeyUsage,
  ) {
    this.envKeyHash = envManagementKey ? sha256(envManagementKey.value) : undefined;
    this.envCustomerId = envManagementKey?.customerId;
  }
  private readonly envCustomerId: string | undefined;

  /** Looks a raw key value up; undefined when unknown, malformed or revoked. */
  resolve(value: string): Principal | undefined {
    const hit = this.verified.get(value);
    if (hit) {
      this.usage?.touch(hit.keyId);
      return hit;
    }
    const parsed = parseKey(value);
    // The configured management key may itself look like a generated one (copied from another
    // gateway's bootstrap.json, say) without being in this store: it is checked whenever the
    // store does not know the value, not only for values of another format.
    const stored = parsed ? this.fromStore(parsed, value) : undefined;
    if (stored) {
      this.usage?.touch(stored.keyId);
      return stored;
    }
    return this.envKey(value);
  }

  private envKey(value: string): Principal | undefined {
    if (!this.envKeyHash || !this.envCustomerId) return undefined;
    const h = sha256(value);
    if (h.length !== this.envKeyHash.length || !timingSafeEqual(h, this.envKeyHash)) return undefined;
    return { kind: 'management', keyId: 'env', customerId: this.envCustomerId, readOnly: false, accountScoped: false, seatId: null };
  }

  private fromStore(parsed: ParsedKey, value: string): Principal | undefined {
    let entry = this.cache.get(parsed.id);
    if (!entry) {
      const row = this.store.keyById(parsed.id);
      if (!row) return undefined;
      entry = {
        hash: row.hash,
        revoked: row.revoked_at !== null,
        principal: {
          kind: row.kind, keyId: row.id, customerId: row.customer_id,
          readOnly: row.read_only === 1, accountScoped: row.account_scoped === 1, seatId: row.seat_id,
        },
      };
      this.cache.set(parsed.id, entry);
    }
    if (entry.revoked || entry.principal.kind !== parsed.kind) return undefined;
    if (!secretMatches(parsed.secret, entry.hash)) return undefined;
    this.verified.set(value, entry.principal);
    return entry.principal;
  }

  /** Forgets a key's cached row and verified values: call after revoking it, so the next request
   *  reads the revocation from the store. */
  evict(keyId: string): void {
    this.cache.delete(keyId);
    for (const [value, p] of this.verified.entries()) if (p.keyId === keyId) this.verified.delete(value);
  }

  /** Throws an ApiError (401/403) unless the request carries a key acceptable for `mode`. */
  authenticate(mode: AuthMode, headers: Record<string, string>, v1: boolean): Principal | undefined {
    switch (mode) {
      case 'none':
        return undefined;
      case 'management': {
        const value = headers['x-management-key'] ?? bearer(headers);
        if (!value) throw apiError('MANAGEMENT_KEY_REQUIRED', 'management key required: send Authorization: Bearer <key> or x-management-key');
        const p = this.resolve(value);
        // The other kind, named only to the holder of its whole value: a bot's key pasted for the operator's.
        if (p?.kind === 'api') throw apiError('INVALID_API_KEY', 'this is an API key: this route takes the management key (Authorization: Bearer or x-management-key)');
        if (!p || p.kind !== 'management') throw apiError('INVALID_API_KEY', 'invalid or revoked management key');
        return p;
      }
      case 'connection': {
        const viaHeader = headers['x-management-key'] ?? headers['x-api-key'];
        const value = viaHeader ?? bearer(headers);
        if (!value) throw this.keyRequired(v1);
        const p = this.resolve(value);
        if (!p) throw apiError('INVALID_API_KEY', 'invalid or revoked API key');
        // x-api-key only: not as Bearer, nor in x-management-key (the management key's header, §5.8).
        if (p.kind === 'api' && p.accountScoped && headers['x-api-key'] !== value) {
          throw apiError('ACCOUNT_SCOPE', 'an account-scoped key must be sent as x-api-key on connection routes');
        }
        return p;
      }
      case 'api': {
        const value = headers['x-api-key'];
        if (!value) throw this.keyRequired(v1, headers);
        const p = this.resolve(value);
        // A management key is deliberately not valid here (SPEC §5.8); its holder is told so.
        if (p?.kind === 'management') throw apiError('INVALID_API_KEY', 'this is the management key: trading and market-data routes take an API key (tagw_k_...) in x-api-key');
        if (!p || p.kind !== 'api') throw apiError('INVALID_API_KEY', 'invalid or revoked API key');
        return p;
      }
      case 'news': {
        // A connection endpoint (SPEC §5.2): any API key, scoped ones included (the calendar is no
        // account's data), and the management key (§5.8), as on the other connection routes.
        const value = headers['x-management-key'] ?? headers['x-api-key'] ?? bearer(headers);
        if (!value) throw this.keyRequired(v1);
        const p = this.resolve(value);
        if (!p) throw apiError('INVALID_API_KEY', 'invalid or revoked API key');
        return p;
      }
    }
  }

  /** With `headers` (a route that takes x-api-key only): a key sent in another header is named, so
   *  its sender is not told "API key required" of the key it did send. Never its value. */
  private keyRequired(v1: boolean, headers?: Record<string, string>) {
    const said = v1 ? 'API key required' : 'missing x-api-key header';
    const elsewhere = headers?.authorization !== undefined ? 'Authorization' : headers?.['x-management-key'] !== undefined ? 'x-management-key' : undefined;
    return apiError('API_KEY_REQUIRED', elsewhere ? `${said}: this route takes the API key in x-api-key only, not in ${elsewhere}` : said);
  }
}

function sha256(s: string): Buffer {
  return createHash('sha256').update(s).digest();
}
