// What route handlers may use. Built once in the composition root (src/gateway.ts).
import type { Authenticator } from '../auth/authenticator.js';
import type { Clock } from '../auth/throttle.js';
import type { ClusterNode } from '../cluster/clusterNode.js';
import type { Config } from '../config.js';
import type { SecretBox } from '../crypto/secretBox.js';
import type { Logger } from '../log.js';
import type { Shards } from '../runtime/shardSet.js';
import type { Db } from '../store/db.js';
import type { KeyRateLimiter } from '../auth/keyRateLimit.js';
import type { KeyUsage } from '../auth/keyUsage.js';
import type { AuditStore } from '../store/audit.js';
import type { StorageHealth } from '../store/storageHealth.js';
import type { TenancyStore } from '../store/tenancy.js';
import type { TenancyWrites } from '../store/tenancyWrites.js';
import type { TradeOutcomes } from './tradeOutcomes.js';

export interface Services {
  config: Config;
  db: Db;
  /** Reads (synchronous, this node's SQLite). */
  tenancy: TenancyStore;
  /** Writes: SQLite on one node, PostgreSQL first in cluster mode (store/tenancyWrites.ts). */
  tenancyWrites: TenancyWrites;
  auth: Authenticator;
  shards: Shards;
  log: Logger;
  clock: Clock;
  /** Seals broker passwords and session handles with the key checked at start. */
  secretBox: SecretBox;
  /** The customer created on first start: the operator, who may change server-wide settings such as simulator faults. */
  operatorCustomerId: string;
  /** Management actions, listed by GET /v1/audit. */
  audit: AuditStore;
  /** Last use of each key, not yet written to the store. */
  keyUsage: KeyUsage;
  /** Per-key requests/s and orders/s; forget() a key after changing its overrides. */
  rateLimits: KeyRateLimiter;
  /** Whether DATA_DIR can take writes: trading calls check it before anything is recorded or sent. */
  storage: StorageHealth;
  /** Where this start keeps its management key file (rewritten when that key is rotated). */
  bootstrapFile: string;
  /** Cluster mode: this node's cluster side (status); undefined on a single node. */
  cluster?: ClusterNode | undefined;
  /** Trade answers by outcome (/metrics); absent in tests that build Services by hand. */
  tradeOutcomes?: TradeOutcomes;
}
