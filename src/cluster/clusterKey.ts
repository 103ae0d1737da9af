// The cluster's secret key, as PostgreSQL knows it: a fingerprint, HMAC-SHA256 under the key of a
// fixed label (migration 9, one row). Every node must seal and open broker passwords with the same
// key; a node compares its own fingerprint with the recorded one at start (startupChecks.ts
// checkClusterKey). The fingerprint tells nothing about the key: HMAC is a pseudo-random function, so
// without the key its output is indistinguishable from random bytes, and testing a guessed key
// against it needs the 256-bit key itself (TAGW_SECRET_KEY is 32 bytes, never a password).
// It is not the backup manifest's fingerprint (a hash, src/store/backup.ts): the two cannot be
// matched against each other.
import { createHmac } from 'node:crypto';
import type { Queryable } from './pgPool.js';

const LABEL = 'tagw cluster secret key check v1';

export function clusterKeyFingerprint(key: Buffer): string {
  return createHmac('sha256', key).update(LABEL).digest('hex');
}

/** The recorded fingerprint; undefined before any node wrote one (a new cluster, or one upgraded). */
export async function recordedKeyFingerprint(q: Queryable): Promise<string | undefined> {
  const r = await q.query<{ fingerprint: string }>('SELECT fingerprint FROM cluster_secret_key');
  return r.rows[0]?.fingerprint;
}

/**
 * Records `fingerprint` as the cluster's: only when none is (`replace`: over the one there, the
 * SECRET_KEY_RESET=1 case). Returns the fingerprint recorded afterwards: another node's, when it
 * wrote first.
 */
export async function recordKeyFingerprint(q: Queryable, fingerprint: string, nodeId: string, replace: boolean): Promise<string> {
  const onConflict = replace ? 'DO UPDATE SET fingerprint = EXCLUDED.fingerprint, node_id = EXCLUDED.node_id, set_at = now()' : 'DO NOTHING';
  await q.query(`INSERT INTO cluster_secret_key (one, fingerprint, node_id) VALUES (true, $1, $2) ON CONFLICT (one) ${onConflict}`, [fingerprint, nodeId]);
  return (await recordedKeyFingerprint(q))!;
}
