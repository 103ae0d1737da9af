// Which node should own which account: bounded-load rendezvous over the live nodes. Each account
// ranks the nodes by a rendezvous (highest-random-weight) score; every node may hold the floor or
// the ceiling of accounts/nodes, no more, so a stable cluster is spread evenly (most and fewest
// differ by one at most). The plan starts from who holds what now (the lease table), so a node that
// joins takes only its share (each other node sheds its surplus, the accounts it scores lowest) and
// one that leaves gives away only its own. Every node computes the same answer from the same table;
// one that reads it in the middle of others' moves still agrees (see targetOwners). Pure: the lease
// keeper (leaseKeeper.ts) turns a plan into lease statements.
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
  private readonly seedOf = new Map<string, number>();
  constructor(nodes: Iterable<string>) {
    // Sorted and deduplicated: the answer must not depend on the order a node listed them in.
    this.seeds = [...new Set(nodes)].sort().map((node) => ({ node, seed: hash32(node, 0x9747b28c) }));
    for (const { node, seed } of this.seeds) this.seedOf.set(node, seed);
  }

  get nodes(): string[] {
    return this.seeds.map((s) => s.node);
  }

  /** The node's weight for the account (rendezvousScore), for a node of this list. */
  score(node: string, account: string): number {
    return hash32(account, this.seedOf.get(node)!);
  }

  /** The account's highest-scored node among those `eligible` accepts (all by default); undefined
   *  with none. Ties (1 in 2^32) go to the larger node id. */
  ownerOf(account: string, eligible?: (node: string) => boolean): string | undefined {
    let best: string | undefined;
    let bestScore = -1;
    for (const { node, seed } of this.seeds) {
      if (eligible && !eligible(node)) continue;
      const score = hash32(account, seed);
      if (score >= bestScore) {
        best = node;
        bestScore = score;
      }
    }
    return best;
  }
}

/** Seeds of the two orders that belong to no node: the one free accounts are placed in, and the
 *  rank that gives nodes the larger share when the accounts do not divide evenly. */
const PLACE_SEED = 0x5bd1e995;
const SHARE_SEED = 0x27d4eb2f;

/** A node's place in the fixed rank that gives nodes the larger share (higher first; targetOwners). */
export const shareRankOf = (node: string): number => hash32(node, SHARE_SEED);

const byId = (x: string, y: string) => (x < y ? -1 : x > y ? 1 : 0);

/**
 * Every account's target owner among the live nodes, given who holds what (`holders`: account ->
 * the node holding its live lease; holders that are not live count as none):
 * 1. an account stays with its live holder;
 * 2. each node may hold `floor(N / nodes)` accounts, and `N mod nodes` of them one more, by a fixed
 *    rank of node ids (a rank that depends on nothing else keeps the caps of a rebalance the same
 *    whatever part of it is done);
 * 3. a node over its share sheds the accounts it scores lowest;
 * 4. the free and shed accounts, in a fixed order, go each to its highest-scored node with room.
 * From nothing held this is bounded-load rendezvous. Whatever part of its answer the nodes have
 * carried out (holders a subset of the answer plus the rest as before), it gives the same answer
 * again: nodes that read the table at different moments of a rebalance agree, and an answer
 * carried out in full is kept (the spread does not flap).
 */
export function targetOwners(liveNodes: Iterable<string>, accounts: Iterable<string>, holders: ReadonlyMap<string, string>): Map<string, string> {
  const hrw = new Rendezvous(liveNodes);
  const nodes = hrw.nodes;
  const owners = new Map<string, string>();
  if (nodes.length === 0) return owners;
  const kept = new Map(nodes.map((n) => [n, [] as string[]]));
  const free: string[] = [];
  const ids = new Set(accounts);
  for (const a of ids) {
    const holder = holders.get(a);
    const list = holder === undefined ? undefined : kept.get(holder);
    if (list) list.push(a);
    else free.push(a);
  }
  const floor = Math.floor(ids.size / nodes.length);
  const shareRank = new Map(nodes.map((n) => [n, shareRankOf(n)]));
  const byShare = [...nodes].sort((x, y) => shareRank.get(y)! - shareRank.get(x)! || byId(x, y));
  const larger = ids.size % nodes.length;
  const cap = new Map(byShare.map((n, i) => [n, floor + (i < larger ? 1 : 0)]));
  const load = new Map<string, number>();
  for (const [n, list] of kept) {
    const excess = list.length - cap.get(n)!;
    if (excess > 0) {
      list.sort((x, y) => hrw.score(n, x) - hrw.score(n, y) || byId(x, y));
      free.push(...list.splice(0, excess));
    }
    for (const a of list) owners.set(a, n);
    load.set(n, list.length);
  }
  const place = new Map(free.map((a) => [a, hash32(a, PLACE_SEED)]));
  free.sort((x, y) => place.get(x)! - place.get(y)! || byId(x, y));
  const hasRoom = (n: string) => load.get(n)! < cap.get(n)!;
  for (const a of free) {
    const n = hrw.ownerOf(a, hasRoom)!; // the caps add up to N: a node has room
    owners.set(a, n);
    load.set(n, load.get(n)! + 1);
  }
  return owners;
}

export interface LeasePlan {
  /** Accounts this node should own and does not hold: try to acquire (succeeds once free or expired). */
  acquire: string[];
  /** Accounts this node holds that belong elsewhere (a live node is their target) or exist no more. */
  release: string[];
}

/**
 * What `me` should do given the live nodes, the accounts that exist, the ones it holds and who holds
 * the others (the live leases: targetOwners). `me` always counts as live (it is the one asking).
 * Release goes only to a live target, so a handover never leaves an account to a node that is not
 * there to take it.
 */
export function planLeases(me: string, liveNodes: Iterable<string>, accounts: Iterable<string>, held: ReadonlySet<string>, holders: ReadonlyMap<string, string>): LeasePlan {
  const target = targetOwners([...liveNodes, me], accounts, holders);
  const acquire: string[] = [];
  for (const [account, owner] of target) if (owner === me && !held.has(account)) acquire.push(account);
  const release: string[] = [];
  for (const account of held) if (target.get(account) !== me) release.push(account);
  return { acquire, release };
}
