// What the main thread measures of itself (event-loop lag, GC) and keeps of the shards' reports
// (their thread stats, each account's connection phase) and of the trade answers, and the gateway's
// /metrics series over these and over the edge, the shards and the storage. src/gateway.ts starts it.
import type { ClusterNode } from './cluster/clusterNode.js';
import { registerClusterMetrics } from './http/clusterStatus.js';
import { unanchoredUpgrades } from './http/corkAnchor.js';
import { Metrics } from './http/metrics.js';
import { TradeOutcomes } from './http/tradeOutcomes.js';
import { accountCreations } from './http/routes/classicBinding.js';
import type { Services } from './http/services.js';
import type { Clock } from './util/clock.js';
import { ConnectionLog } from './runtime/connectionLog.js';
import { OPERATOR_PHASES } from './runtime/hosts/accountCommands.js';
import type { Shards } from './runtime/shardSet.js';
import { startThreadStats, THREAD_STATS_MS, type ThreadStats } from './runtime/threadStats.js';
import type { StorageHealth } from './store/storageHealth.js';
import type { StreamHub } from './stream/hub.js';

export interface Watch {
  metrics: Metrics;
  /** Event-loop lag and GC per thread: main measures itself, shards post theirs (runtime/threadStats.ts). */
  threadStats: Map<string, ThreadStats>;
  /** Each bound account's connection phase and its recent changes, as its shard reported them (/metrics, dashboard). */
  connections: ConnectionLog;
  tradeOutcomes: TradeOutcomes;
  startedAt: number;
  stop(): void;
}

/** What the main thread measures of itself and keeps of the shards' reports, for /metrics and /v1/status. */
export function watchMainThread(clock: Clock): Watch {
  const metrics = new Metrics();
  const threadStats = new Map<string, ThreadStats>();
  const mainStats = startThreadStats();
  const snapMain = () => threadStats.set('main', mainStats.snapshot());
  const mainStatsTimer = setInterval(snapMain, THREAD_STATS_MS).unref();
  snapMain();
  const connections = new ConnectionLog(() => clock.now());
  const startedAt = clock.now();
  const tradeOutcomes = new TradeOutcomes();
  const stop = () => {
    clearInterval(mainStatsTimer);
    mainStats.stop();
  };
  return { metrics, threadStats, connections, tradeOutcomes, startedAt, stop };
}

/** The gateway's series in /metrics, in the order they are listed. */
export function registerMetrics(
  { metrics, threadStats, connections, tradeOutcomes }: Watch, { inflight, streamHub, storage, services }: { inflight: { count: number }; streamHub: StreamHub; storage: StorageHealth; services: Services },
  cluster: ClusterNode | undefined, shards: Shards,
): void {
  const pick = (f: (s: ThreadStats) => number) => Object.fromEntries([...threadStats].map(([t, s]) => [t, f(s)]));
  metrics.gauge('tagw_http_inflight_requests', () => inflight.count);
  streamHub.registerMetrics(metrics);
  metrics.counter('tagw_ws_upgrades_unanchored_total', unanchoredUpgrades);
  metrics.counter('tagw_shard_restarts_total', () => shards.restarts());
  if (cluster) registerClusterMetrics(metrics, cluster);
  metrics.gauge('tagw_storage_available', () => (storage.available() ? 1 : 0));
  metrics.gauge('tagw_storage_free_bytes', () => storage.status().freeBytes ?? -1);
  metrics.counter('tagw_storage_full_episodes_total', () => storage.episodes);
  metrics.gauge('tagw_storage_shards_waiting', () => storage.shardsWaiting);
  metrics.counter('tagw_storage_shard_waiting_episodes_total', () => storage.shardEpisodes);
  metrics.labeledGauge('tagw_broker_connections', 'phase', () => connections.counts(OPERATOR_PHASES));
  const creations = accountCreations(services);
  metrics.gauge('tagw_account_creations_running', () => creations.state.active, 'Broker logins of new or re-bound accounts running now on this node (at most ACCOUNT_CREATION_CONCURRENCY).');
  metrics.gauge('tagw_account_creations_queued', () => creations.state.queued, 'Broker logins of new or re-bound accounts waiting for a place on this node (each key at most ACCOUNT_CREATION_QUEUE).');
  metrics.counter('tagw_account_creations_refused_total', () => creations.refused, 'Account creations answered 429 ACCOUNT_CREATION_BUSY (their key had ACCOUNT_CREATION_QUEUE waiting already).');
  metrics.labeledCounter('tagw_broker_reconnects_total', [], () => [[[], connections.reconnects]], 'Broker connections lost and being re-established (entries into the reconnecting phase).');
  metrics.labeledGauge('tagw_shard_queue_depth', 'shard', () => Object.fromEntries(shards.queueDepths().map((n, i) => [String(i), n])), 'Commands sent to a shard and not answered yet.');
  metrics.labeledCounter('tagw_orders_total', ['op', 'outcome'], () => tradeOutcomes.series(), 'Trade requests by operation and outcome: sent (answered by the broker), rejected (broker refusal), replayed (same clientOrderId), conflicted (409/422: uncertain or reused id).');
  metrics.labeledGauge('tagw_thread_event_loop_lag_p99_seconds', 'thread', () => pick((s) => s.lagP99), 'Event-loop delay p99 per thread over the last 5 s (main and each shard).');
  metrics.labeledGauge('tagw_thread_event_loop_lag_max_seconds', 'thread', () => pick((s) => s.lagMax), 'Longest event-loop delay per thread over the last 5 s.');
  metrics.labeledCounter('tagw_thread_gc_pause_seconds_total', ['thread'], () => [...threadStats].map(([t, s]) => [[t], s.gcSeconds]), 'Time spent in garbage-collection pauses, per thread.');
  metrics.labeledCounter('tagw_thread_gc_total', ['thread'], () => [...threadStats].map(([t, s]) => [[t], s.gcCount]), 'Garbage collections, per thread.');
  metrics.labeledGauge('tagw_thread_heap_used_bytes', 'thread', () => pick((s) => s.heapUsedBytes), 'V8 heap in use per thread (main and each shard, each its own isolate), garbage not yet collected included, as of the last 5 s snapshot.');
  metrics.labeledGauge('tagw_thread_heap_total_bytes', 'thread', () => pick((s) => s.heapTotalBytes), 'V8 heap reserved per thread, as of the last 5 s snapshot.');
}
