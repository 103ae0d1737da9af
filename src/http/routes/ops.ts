// Liveness, readiness, metrics and the OpenAPI document: no key needed (bind to loopback or
// firewall them if the operator prefers them private).
import { z } from 'zod';
import type { Services } from '../services.js';
import type { Metrics } from '../metrics.js';
import { buildOpenApi } from '../openapi.js';
import { defineRoute, type AnyRoute } from '../route.js';

export const API_VERSION = '1.0.0';

export function opsRoutes(s: Services, metrics: Metrics, allRoutes: () => AnyRoute[]): AnyRoute[] {
  let openapi: string | undefined;
  return [
    defineRoute({
      method: 'get', path: '/healthz', family: 'ops', auth: 'none', summary: 'Liveness: the process serves HTTP',
      response: z.object({ status: z.literal('ok') }),
      handler: () => ({ body: { status: 'ok' } }),
    }),
    defineRoute({
      method: 'get', path: '/readyz', family: 'ops', auth: 'none', summary: "Readiness: store open, every shard up, DATA_DIR's disk not full and, in cluster mode, NATS and PostgreSQL reached (503 otherwise)",
      // Not ready is 503 with the same body, saying which part is not.
      otherSuccess: [503],
      response: z.object({
        ready: z.boolean(), store: z.boolean(), shards: z.number(), shardsUp: z.boolean(),
        storage: z.object({
          available: z.boolean().describe('False while DATA_DIR is full: trading calls answer 503 STORAGE_UNAVAILABLE'),
          freeBytes: z.number().nullable().describe('Free bytes of the file system holding DATA_DIR at the last check'),
          fullSince: z.number().optional().describe('When the disk was found full (epoch ms)'),
          reason: z.string().optional().describe('Why the disk counts as full: what found it so first in this episode (the free space below the reserve, a write that failed for lack of space, a shard whose background writes wait)'),
          shardsWaiting: z.array(z.object({
            shard: z.number(), since: z.number().describe('When its writes began to wait (epoch ms)'), what: z.string().describe('Its writers whose writes wait, comma-separated, in the order they met the full disk (e.g. `simulator journal, seat state`)'),
          })).optional().describe("Shards whose background writes (the simulator's, a seat's, idempotency outcomes) wait in memory for room; the disk counts as full until none does"),
          mainWaiting: z.object({ since: z.number(), what: z.string().describe('Its writers whose writes wait, comma-separated, as for shardsWaiting') }).optional().describe("The main thread's background writes (the /v1/stream history's batches, their frames unsent) waiting in memory for room; the disk counts as full until they are written"),
        }),
        cluster: z.object({
          nats: z.boolean().describe('Connected to NATS: false while the link is down (calls for accounts owned elsewhere answer 503)'),
          database: z.boolean().describe("PostgreSQL answered this node's last lease round within the lease time: false while it does not (no leases held, no fenced writes)"),
        }).optional().describe('Cluster mode only (docs/cluster.md): the engines this node needs to serve'),
      }),
      handler: () => {
        const store = s.db.open;
        const shardsUp = s.shards.allReady();
        const storage = s.storage.status();
        const cluster = s.cluster?.readiness();
        const ready = store && shardsUp && storage.available && (!cluster || (cluster.nats && cluster.database));
        return { status: ready ? 200 : 503, body: { ready, store, shards: s.shards.size, shardsUp, storage, ...(cluster ? { cluster } : {}) } };
      },
    }),
    defineRoute({
      method: 'get', path: '/metrics', family: 'ops', auth: 'none', summary: 'Prometheus metrics (text format)',
      handler: async () => ({ body: null, raw: await metrics.render(), contentType: metrics.contentType }),
    }),
    defineRoute({
      method: 'get', path: '/openapi.json', family: 'ops', auth: 'none', summary: 'This OpenAPI document',
      handler: () => {
        openapi ??= JSON.stringify(buildOpenApi(allRoutes(), API_VERSION));
        return { body: null, raw: openapi, contentType: 'application/json' };
      },
    }),
  ];
}
