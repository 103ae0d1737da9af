// Which node should own which account: rendezvous (highest-random-weight) hashing over the live
// nodes. Every node computes the same answer from the same node list, accounts spread evenly, and
// when a node joins or leaves only the accounts that move to or from it change owner. Pure: the
// lease keeper (leaseKeeper.ts) turns a plan into lease statements.
import { mix32 } from '../sim/hash.js';

/** murmur3's per-character mixing and finaliser over UTF-16 code units, 32 bits. */
function hash32(s: string, seed: number): number {
  let h = seed >>> 0;
  for (let i = 0; i < s.length; i++) {
    let k = s.charCodeAt(i);
    k = Math.imul(k, 0xcc9e2d51);
    k = (k << 15) | (k >>> 17);
    k = Math.imul(k, 0x1b873593);
    h ^= k;
    h = (h << 13) | (h >>> 19);
    h = (Math.imul(h, 5) + 0xe6546b64) | 0;
  }
  return mix32(h ^ s.length);
}

/** The weight of `node` for `account`: the account hashed with a seed drawn from the node id. */
export function rendezvousScore(node: string, account: string): number {
  return hash32(account, hash32(node, 0x9747b28c));
}

/** Precomputes node seeds for picking owners of many accounts against one node list. */
export class Rendezvous {
  private readonly seeds: { node: string; seed: number }[];
  constructor(nodes: Iterable<string>) {
    // Sorted and deduplicated: the answer must not depend on the order a node listed them in.
    this.seeds = [...new Set(nodes)].sort().map((node) => ({ node, seed: hash32(node, 0x9747b28c) }));
  }

  get nodes(): string[] {
    return this.seeds.map((s) => s.node);
  }

  /** The account's target owner; undefined with no node. Ties (1 in 2^32) go to the larger node id. */
  ownerOf(account: string): string | undefined {
    let best: string | undefined;
    let bestScore = -1;
    for (const { node, seed } of this.seeds) {
      const score = hash32(account, seed);
      if (score >= bestScore) {
        best = node;
        bestScore = score;
      }
    }
    return best;
  }
}

export interface LeasePlan {
  /** Accounts this node should own and does not hold: try to acquire (succeeds once free or expired). */
  acquire: string[];
  /** Accounts this node holds that belong elsewhere (a live node is their target) or exist no more. */
  release: string[];
}

/**
 * What `me` should do given the live nodes, the accounts that exist and the ones it holds. `me` always
 * counts as live (it is the one asking). Release goes only to a live target, so a handover never
 * leaves an account to a node that is not there to take it.
 */
export function planLeases(me: string, liveNodes: Iterable<string>, accounts: Iterable<string>, held: ReadonlySet<string>): LeasePlan {
  const hrw = new Rendezvous([...liveNodes, me]);
  const acquire: string[] = [];
  const exists = new Set<string>();
  for (const account of accounts) {
    if (exists.has(account)) continue;
    exists.add(account);
    if (hrw.ownerOf(account) === me && !held.has(account)) acquire.push(account);
  }
  const release: string[] = [];
  for (const account of held) {
    if (!exists.has(account) || hrw.ownerOf(account) !== me) release.push(account);
  }
  return { acquire, release };
}
