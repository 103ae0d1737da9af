// Open sockets outlive a key revocation unless they re-check their key: both socket kinds
// (/v1/stream and /ws) do it on a timer with this.
import type { TenancyStore } from '../store/tenancy.js';

/** The items (open sockets) whose API key is revoked or gone; each distinct key is read once. */
export function withRevokedKeys<T>(items: Iterable<T>, keyOf: (item: T) => string, tenancy: Pick<TenancyStore, 'keyById'>): T[] {
  const live = new Map<string, boolean>();
  const out: T[] = [];
  for (const item of items) {
    const id = keyOf(item);
    let ok = live.get(id);
    if (ok === undefined) {
      const row = tenancy.keyById(id);
      live.set(id, (ok = row !== undefined && row.revoked_at === null));
    }
    if (!ok) out.push(item);
  }
  return out;
}
