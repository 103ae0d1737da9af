// `tagw status` in cluster mode: the node line and the live peers with their accounts (a node whose
// heartbeat is old is not listed as live), this node's leases and calls, every node in a table with
// its NATS link, and a line when this node stepped down (cut off from NATS).
import { describe, expect, it } from 'vitest';
import { clusterFields, clusterNodesTable, notReady, quoteSessionsTable, readinessLine } from '../../src/cli/commands/admin.js';

describe('tagw status, cluster lines', () => {
  it('names this node, its accounts, the live nodes only, and the accounts without owner', () => {
    const lines = clusterFields({
      nodeId: 'node-a', ownedHere: 5, unowned: 2,
      nodes: [{ nodeId: 'node-a', live: true, accounts: 5 }, { nodeId: 'node-b', live: false, accounts: 0 }, { nodeId: 'node-c', live: true, accounts: 4 }],
    });
    expect(lines).toEqual([
      ['node', 'node-a (owns 5 accounts)'],
      ['cluster', '2 live nodes: node-a 5, node-c 4; 2 accounts without owner'],
    ]);
  });

  it('says one node and one account in the singular (the others gone, one account moved over)', () => {
    expect(clusterFields({ nodeId: 'node-a', ownedHere: 1, unowned: 1, nodes: [{ nodeId: 'node-a', live: true, accounts: 1 }] })).toEqual([
      ['node', 'node-a (owns 1 account)'],
      ['cluster', '1 live node: node-a 1; 1 account without owner'],
    ]);
  });

  it('says no live node without an empty list after it (every heartbeat lapsed: PostgreSQL just back after an outage past the lease)', () => {
    expect(clusterFields({ nodeId: 'node-a', ownedHere: 0, unowned: 10, nodes: [{ nodeId: 'node-a', live: false, accounts: 0 }] })[1])
      .toEqual(['cluster', '0 live nodes; 10 accounts without owner']);
  });

  it("adds this node's lease changes, takeovers and calls between nodes when the gateway reports them", () => {
    const lines = clusterFields({
      nodeId: 'node-a', ownedHere: 3, unowned: 0, nodes: [{ nodeId: 'node-a', live: true, accounts: 3 }],
      leases: { acquired: 4, handedOver: 1, lost: 0, takeovers: 1 }, calls: { forwarded: 12, served: 7, unavailable: 2, ownerWaits: 1 },
    });
    expect(lines.slice(2)).toEqual([
      ['leases', '4 acquired, 1 handed over, 0 lost; 1 takeover'],
      ['calls', '12 forwarded, 7 served for other nodes, 2 unavailable, 1 owner wait'],
    ]);
  });

  it("splits this node's takeovers by how the lease before ended (ran out: a node died; handed over: a rolling restart), when the gateway says", () => {
    const fields = (leases: Parameters<typeof clusterFields>[0]['leases']) => clusterFields({ nodeId: 'node-a', ownedHere: 3, unowned: 0, nodes: [{ nodeId: 'node-a', live: true, accounts: 3 }], leases })[2];
    expect(fields({ acquired: 6, handedOver: 2, lost: 0, takeovers: 5, takeoversExpired: 1, takeoversHandover: 4 }))
      .toEqual(['leases', '6 acquired, 2 handed over, 0 lost; 5 takeovers (1 expired, 4 handed over)']);
    expect(fields({ acquired: 6, handedOver: 2, lost: 0, takeovers: 0, takeoversExpired: 0, takeoversHandover: 0 })).toEqual(['leases', '6 acquired, 2 handed over, 0 lost; 0 takeovers']);
  });

  it('tables every node, down ones too, with its heartbeat age, the NATS link a live one reported and the counters each wrote, and marks this node', () => {
    expect(clusterNodesTable({
      nodeId: 'node-b', ownedHere: 0, unowned: 0,
      nodes: [
        // A down node's last word on NATS is stale; one that did not say (null) or an older gateway (absent): '-'.
        // A down node's counters are what it did up to its last heartbeat: shown. One that did not
        // say (null, or an older gateway: absent): '-'; node-a's build did not split its takeovers (EXPIRED '-').
        { nodeId: 'node-a', live: false, accounts: 0, heartbeatAgeMs: 125_000, natsUp: true, leases: { lost: 4, takeovers: 0 }, calls: { forwarded: 3, served: 0, unavailable: 1 } },
        { nodeId: 'node-b', live: true, accounts: 0, heartbeatAgeMs: 420, natsUp: false, leases: { lost: 0, takeovers: 2, takeoversExpired: 0 }, calls: { forwarded: 1_250, served: 7, unavailable: 0 } },
        { nodeId: 'node-c', live: true, accounts: 4, heartbeatAgeMs: 1_300, natsUp: true, leases: { lost: 0, takeovers: 4, takeoversExpired: 3 }, calls: { forwarded: 0, served: 1_243, unavailable: 0 } },
        { nodeId: 'node-d', live: true, accounts: 2, heartbeatAgeMs: 900, natsUp: null, leases: null, calls: null },
        { nodeId: 'node-e', live: true, accounts: 1, heartbeatAgeMs: 100 },
      ],
    })).toBe([
      'Nodes:',
      'NODE                STATE  NATS  ACCOUNTS  HEARTBEAT  TAKEOVERS  EXPIRED  LOST  FORWARDED  SERVED  UNAVAILABLE',
      'node-a              down   -     0         2m 5s ago  0          -        4     3          0       1',
      'node-b (this node)  live   down  0         0.4s ago   2          0        0     1250       7       0',
      'node-c              live   up    4         1.3s ago   4          3        0     0          1243    0',
      'node-d              live   -     2         0.9s ago   -          -        -     -          -       -',
      'node-e              live   -     1         0.1s ago   -          -        -     -          -       -',
      '',
    ].join('\n'));
  });

  it('says under the node line that this node stepped down, and only then', () => {
    const c = { nodeId: 'node-b', ownedHere: 0, unowned: 0, nodes: [{ nodeId: 'node-b', live: true, accounts: 0, natsUp: false }, { nodeId: 'node-c', live: true, accounts: 4, natsUp: true }] };
    expect(clusterFields({ ...c, steppedDown: true }).slice(0, 3)).toEqual([
      ['node', 'node-b (owns 0 accounts)'],
      ['stepped down', 'cut off from NATS, its accounts handed over until its link is back'],
      ['cluster', '2 live nodes: node-b 0, node-c 4; 0 accounts without owner'],
    ]);
    expect(clusterFields({ ...c, steppedDown: false }).map(([k]) => k)).toEqual(['node', 'cluster']);
    expect(clusterFields(c).map(([k]) => k)).toEqual(['node', 'cluster']);
  });
});

describe('tagw status, quote sessions (QUOTE_LOGINS_FILE)', () => {
  const q = (server: string, login: string, state: 'connecting' | 'up' | 'down' | 'refused', symbols: string[], quotes: number, quotesFrom: 'session' | 'relay') =>
    ({ server, login, state, since: '2026-11-28T06:01:02.345Z', symbols, quotes, quotesFrom });
  it("tables this node's sessions as it reads them now and the other live nodes' as their heartbeat said: server, login, state and since, symbols, quotes, where the quotes come from", () => {
    expect(quoteSessionsTable({
      nodeId: 'node-b', ownedHere: 0, unowned: 0,
      nodes: [
        // A down node's sessions are stale: not listed. A node that did not say (null, absent): nothing.
        { nodeId: 'node-a', live: false, accounts: 0, quoteSessions: [q('Old-Server', '90', 'up', ['EURUSD'], 5, 'session')] },
        // This node's row in the heartbeat lags: its sessions now (the top level) are shown instead.
        { nodeId: 'node-b', live: true, accounts: 0, quoteSessions: [q('Sim-P5-Demo', '7001', 'connecting', [], 0, 'relay')] },
        { nodeId: 'node-c', live: true, accounts: 2, quoteSessions: [q('Sim-P4-Live', '7002', 'refused', ['EURUSD', 'GBPUSD', 'USDJPY', 'XAUUSD'], 0, 'relay')] },
        { nodeId: 'node-d', live: true, accounts: 1, quoteSessions: null },
        { nodeId: 'node-e', live: true, accounts: 1 },
      ],
      quoteSessions: [q('Sim-P5-Demo', '7001', 'up', ['BTCUSD'], 1_250, 'session'), q('Sim-P4-Live', '7002', 'down', ['EURUSD', 'GBPUSD'], 17, 'relay')],
    })).toBe([
      'Quote sessions:',
      'NODE                SERVER       LOGIN  STATE    SINCE                 SYMBOLS                                 QUOTES  FROM',
      'node-b (this node)  Sim-P5-Demo  7001   up       2026-11-28 06:01:02Z  1 (BTCUSD)                              1250    session',
      'node-b (this node)  Sim-P4-Live  7002   down     2026-11-28 06:01:02Z  2 (EURUSD, GBPUSD)                      17      relay',
      'node-c              Sim-P4-Live  7002   refused  2026-11-28 06:01:02Z  4 (EURUSD, GBPUSD, USDJPY, and 1 more)  0       relay',
      '',
    ].join('\n'));
  });

  it('is nothing without a quote session on any node (a node without QUOTE_LOGINS_FILE, an older gateway)', () => {
    const nodes = [{ nodeId: 'node-a', live: true, accounts: 1, quoteSessions: [] }, { nodeId: 'node-b', live: true, accounts: 0 }];
    expect(quoteSessionsTable({ nodeId: 'node-a', ownedHere: 1, unowned: 0, nodes, quoteSessions: [] })).toBe('');
    expect(quoteSessionsTable({ nodeId: 'node-a', ownedHere: 1, unowned: 0, nodes })).toBe('');
  });
});

describe('tagw status, the ready line', () => {
  it('names the parts /readyz reports down, the cluster engines among them', () => {
    const up = { ready: true, store: true, shardsUp: true, storage: { available: true } };
    expect(readinessLine({ ...up, cluster: { nats: true, database: true } })).toBe('yes');
    expect(readinessLine({ ...up, ready: false, cluster: { nats: false, database: true } })).toBe('no (NATS unreachable)');
    expect(readinessLine({ ...up, ready: false, cluster: { nats: false, database: false } })).toBe('no (NATS unreachable, PostgreSQL unreachable)');
    expect(readinessLine({ ...up, ready: false, shardsUp: false, storage: { available: false } })).toBe('no (a shard down, disk full)');
    expect(readinessLine(undefined)).toBe('no (no answer)');
  });
});

describe('tagw status, what keeps it from being ready (its exit 7 and one line on stderr)', () => {
  const up = { ready: true, store: true, shardsUp: true, storage: { available: true } };
  const shards = [{ index: 0, ready: true, restarts: 0, accounts: 2 }, { index: 1, ready: false, restarts: 1, accounts: 0 }];
  it('is nothing when /readyz says ready and the node did not step down', () => {
    expect(notReady(up, { shards: shards.slice(0, 1), cluster: null })).toEqual([]);
  });
  it('names the shards not up (starting or restarting) by their index', () => {
    expect(notReady({ ...up, ready: false, shardsUp: false }, { shards })).toEqual(['shard 1 not up (starting or restarting)']);
    expect(notReady({ ...up, ready: false, shardsUp: false }, { shards: shards.map((s) => ({ ...s, ready: false })) })).toEqual(['shards 0, 1 not up (starting or restarting)']);
  });
  it('counts a node that stepped down, though its /readyz is ready again (its link back before its next lease round)', () => {
    const cluster = { nodeId: 'node-b', ownedHere: 0, unowned: 0, nodes: [], steppedDown: true };
    expect(notReady({ ...up, cluster: { nats: true, database: true } }, { shards, cluster })).toEqual(['stepped down (its accounts handed over to other nodes)']);
    expect(readinessLine({ ...up, cluster: { nats: true, database: true } }, { shards, cluster })).toBe('no (stepped down (its accounts handed over to other nodes))');
  });
  it('says so when /readyz did not answer, or said not ready without naming a part', () => {
    expect(notReady(undefined)).toEqual(['/readyz did not answer']);
    expect(notReady({ ready: false })).toEqual(['/readyz answered not ready']);
  });
});
