// `tagw status` in cluster mode: the node line and the live peers with their accounts (a node whose
// heartbeat is old is not listed as live).
import { describe, expect, it } from 'vitest';
import { clusterFields } from '../../src/cli/commands/admin.js';

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
});
