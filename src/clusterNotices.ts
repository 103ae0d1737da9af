// Cluster mode: what the cluster tells this node, applied to its local caches (gateway.ts wires it).
import type { ClusterNode } from './cluster/clusterNode.js';

export interface LocalCaches {
  auth: { evict(keyId: string): void };
  rateLimits: { forget(keyId: string): void };
  closeSockets: { ofKey(keyId: string): void; ofAccount(accountId: string): void };
  tenancy: { seatRemoved(accountId: string): void };
  connections: { forget(accountId: string): void };
}

/** A key revoked or a seat removed through any node stops working here too, at once, and a key's
 *  new limits hold here from its next request; an account that left this node forgets its
 *  connection phases here. The same drops follow what a mirror pass finds changed (a notice this
 *  node missed: TenancyMirror.changed), so they hold within a second without one. */
export function applyClusterNotices(cluster: ClusterNode, { auth, rateLimits, closeSockets, tenancy, connections }: LocalCaches): void {
  // An account that left this node runs on another: its phases here would be stale (`connected`
  // forever in tagw status, the dashboard and tagw_broker_connections).
  cluster.onReleased = (ids) => { for (const id of ids) connections.forget(id); };
  cluster.onTenancyNotice = (n) => {
    for (const k of n.keys ?? []) {
      auth.evict(k);
      rateLimits.forget(k);
      closeSockets.ofKey(k);
    }
    // A key's own limits set through another node: read again here at its next request.
    for (const k of n.limits ?? []) rateLimits.forget(k);
    for (const a of n.accounts ?? []) {
      tenancy.seatRemoved(a);
      closeSockets.ofAccount(a);
    }
  };
}
