// /v1/status's `cluster` part (src/http/clusterStatus.ts) from this node's figures and PostgreSQL's
// node rows: whether this node stepped down (cut off from NATS while others reach it), each node's
// NATS link and counters as its last heartbeat said, as the route's schema (the OpenAPI document) has them.
import { describe, expect, it, vi } from 'vitest';
import type { ClusterStatus } from '../../src/cluster/clusterNode.js';
import { countersOf, nodeCounters } from '../../src/cluster/nodeCounters.js';
import { ClusterStatusBody, clusterStatusOf, quoteSessionsNow } from '../../src/http/clusterStatus.js';

const LEASE_MS = 6_000;

function status(over: Partial<ClusterStatus> = {}): ClusterStatus {
  return {
    nodeId: 'node-b', natsUp: true, ownedHere: 3, steppedDown: false,
    leases: { acquired: 5, takeovers: 1, takeoversExpired: 1, takeoversHandover: 0, released: 2, lost: 0, failedRounds: 0 },
    routing: { forwarded: 7, served: 4, ownerWaits: 1, unavailable: 2, streamReplays: 0 },
    relay: { published: 0, duplicates: 0, unwanted: 0, dropped: 0, received: 0, stale: 0, withheld: 0, pulses: 0, pulsesIn: 0 },
    ...over,
  };
}

const A_COUNTERS = { leases: { acquired: 9, handedOver: 1, lost: 2, takeovers: 3 }, calls: { forwarded: 40, served: 12, unavailable: 1, ownerWaits: 5 } };
const rows = [
  { nodeId: 'node-a', url: 'http://a', heartbeatAgeMs: 900, accounts: 4, natsUp: true, incarnation: 11, counters: A_COUNTERS },
  { nodeId: 'node-b', url: 'http://b', heartbeatAgeMs: 300, accounts: 0, natsUp: false, counters: null },
  { nodeId: 'node-c', url: 'http://c', heartbeatAgeMs: 60_000, accounts: 0, natsUp: null, counters: null },
];

describe("/v1/status's cluster part", () => {
  it("says this node stepped down and each node's NATS link from its heartbeat row; live by the lease", () => {
    const body = clusterStatusOf(status({ natsUp: false, ownedHere: 0, steppedDown: true }), { nodes: rows, unowned: 1 }, LEASE_MS);
    expect(body).toEqual({
      nodeId: 'node-b', natsUp: false, steppedDown: true, ownedHere: 0, unowned: 1,
      nodes: [
        { nodeId: 'node-a', url: 'http://a', live: true, heartbeatAgeMs: 900, accounts: 4, natsUp: true, ...A_COUNTERS, quoteSessions: null },
        { nodeId: 'node-b', url: 'http://b', live: true, heartbeatAgeMs: 300, accounts: 0, natsUp: false, leases: null, calls: null, quoteSessions: null },
        { nodeId: 'node-c', url: 'http://c', live: false, heartbeatAgeMs: 60_000, accounts: 0, natsUp: null, leases: null, calls: null, quoteSessions: null },
      ],
      leases: { acquired: 5, handedOver: 2, lost: 0, takeovers: 1, takeoversExpired: 1, takeoversHandover: 0 },
      calls: { forwarded: 7, served: 4, unavailable: 2, ownerWaits: 1 },
      quoteSessions: [],
    });
    expect(clusterStatusOf(status(), { nodes: rows, unowned: 0 }, LEASE_MS).steppedDown).toBe(false);
  });

  it("shows this node's quote sessions as given (read now) and each node's as its heartbeat wrote them (null: it did not say)", () => {
    const up = { server: 'Sim-P5-Demo', login: '7001', state: 'up' as const, since: '2026-11-28T06:01:02.345Z', symbols: ['BTCUSD'], quotes: 12, quotesFrom: 'session' as const };
    const refused = { ...up, login: '7002', state: 'refused' as const, quotes: 0, quotesFrom: 'relay' as const };
    const withSessions = [{ ...rows[0]!, counters: { ...A_COUNTERS, quoteSessions: [refused] } }, { ...rows[1]!, counters: { ...A_COUNTERS, quoteSessions: [] } }, rows[2]!];
    const body = clusterStatusOf(status(), { nodes: withSessions, unowned: 0 }, LEASE_MS, [up]);
    expect(body.quoteSessions).toEqual([up]);
    expect(body.nodes.map((n) => n.quoteSessions)).toEqual([[refused], [], null]);
    expect(ClusterStatusBody.safeParse(body).success).toBe(true);
    expect(ClusterStatusBody.safeParse({ ...body, quoteSessions: [{ ...up, state: 'sleeping' }] }).success).toBe(false);
  });

  it('reads the quote sessions from the shards now, or takes the last read when they do not answer within the bound (a shard stuck)', async () => {
    const seen = [{ server: 'Sim-P5-Demo', login: '7001', state: 'up' as const, since: '2026-11-28T06:01:02.345Z', symbols: ['BTCUSD'], quotes: 12, quotesFrom: 'session' as const }];
    const now = [{ ...seen[0]!, quotes: 13 }];
    expect(await quoteSessionsNow({ quoteSessions: async () => now, quoteSessionsSeen: () => seen })).toEqual(now);
    vi.useFakeTimers();
    try {
      const stuck = quoteSessionsNow({ quoteSessions: () => new Promise(() => undefined), quoteSessionsSeen: () => seen }, 1_000);
      await vi.advanceTimersByTimeAsync(1_000);
      expect(await stuck).toEqual(seen);
    } finally {
      vi.useRealTimers();
    }
  });

  it('matches the route schema, which requires steppedDown and a boolean or null natsUp per node', () => {
    const body = clusterStatusOf(status({ steppedDown: true }), { nodes: rows, unowned: 0 }, LEASE_MS);
    expect(ClusterStatusBody.safeParse(body).success).toBe(true);
    const { steppedDown: _, ...withoutSteppedDown } = body;
    expect(ClusterStatusBody.safeParse(withoutSteppedDown).success).toBe(false);
    expect(ClusterStatusBody.safeParse({ ...body, nodes: [{ ...body.nodes[0]!, natsUp: 'up' }] }).success).toBe(false);
    const { natsUp: __, ...rowWithoutNats } = body.nodes[0]!;
    expect(ClusterStatusBody.safeParse({ ...body, nodes: [rowWithoutNats] }).success).toBe(false);
    // Every node's counters, or null when it did not say; never a partial object.
    expect(ClusterStatusBody.safeParse({ ...body, nodes: [{ ...body.nodes[0]!, calls: { forwarded: 1 } }] }).success).toBe(false);
    const { leases: ___, ...rowWithoutLeases } = body.nodes[0]!;
    expect(ClusterStatusBody.safeParse({ ...body, nodes: [rowWithoutLeases] }).success).toBe(false);
  });
});

describe("a node's counters in its heartbeat row (cluster_nodes.counters)", () => {
  it('are the lease keeper\'s and the router\'s figures under the status\'s names', () => {
    const c = nodeCounters({ acquired: 5, released: 2, lost: 1, takeovers: 3, takeoversExpired: 1, takeoversHandover: 2 }, { forwarded: 7, served: 4, unavailable: 2, ownerWaits: 1 });
    expect(c).toEqual({ leases: { acquired: 5, handedOver: 2, lost: 1, takeovers: 3, takeoversExpired: 1, takeoversHandover: 2 }, calls: { forwarded: 7, served: 4, unavailable: 2, ownerWaits: 1 } });
    expect(countersOf(JSON.parse(JSON.stringify(c)))).toEqual(c);
    // An older build's, without the takeovers split by reason, is still read (the split unknown).
    expect(countersOf(A_COUNTERS)).toEqual(A_COUNTERS);
  });

  it('read back as null when a node did not write them or wrote another shape (another build): never an error', () => {
    expect(countersOf(null)).toBeNull();
    expect(countersOf({})).toBeNull();
    expect(countersOf({ leases: A_COUNTERS.leases })).toBeNull();
    expect(countersOf({ ...A_COUNTERS, calls: { ...A_COUNTERS.calls, served: -1 } })).toBeNull();
    expect(countersOf({ ...A_COUNTERS, calls: { ...A_COUNTERS.calls, served: '12' } })).toBeNull();
    // Quote sessions round trip; another shape of them (a newer build's state) is read as absent, the rest kept.
    const q = { server: 'Sim-P5-Demo', login: '7001', state: 'down', since: '2026-11-28T06:01:02.345Z', symbols: ['BTCUSD'], quotes: 3, quotesFrom: 'relay' };
    expect(countersOf(JSON.parse(JSON.stringify(nodeCounters({ acquired: 0, released: 0, lost: 0, takeovers: 0, takeoversExpired: 0, takeoversHandover: 0 }, A_COUNTERS.calls, [q as never]))))?.quoteSessions).toEqual([q]);
    expect(countersOf({ ...A_COUNTERS, quoteSessions: [{ ...q, state: 'sleeping' }] })).toEqual(A_COUNTERS);
    // A newer build's extra figures are dropped, the known ones kept.
    expect(countersOf({ ...A_COUNTERS, calls: { ...A_COUNTERS.calls, retried: 3 }, shards: 2 })).toEqual(A_COUNTERS);
  });
});
