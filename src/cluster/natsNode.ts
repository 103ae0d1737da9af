// A cluster node's NATS side, assembled: the connection, the owner cache (fed by lease
// announcements, filled from the lease store on a miss), the AccountRouter answering forwarded
// calls with the node's shards, and the StreamRelay. The gateway starts it in cluster mode beside
// startPgNode: lease events -> owners.announce; routes and the stream hub -> router.call; every
// shard event -> relay.publish as well as the local receivers; relay.onEvent -> those receivers.
import type { Logger } from '../log.js';
import { systemClock, type Clock } from '../util/clock.js';
import type { ShardEvent } from '../runtime/protocol.js';
import { Liveness } from './liveness.js';
import { NatsLink } from './natsLink.js';
import { OwnerCache, type OwnerInfo } from './owners.js';
import { AccountRouter, type LocalShards, type RouterStats } from './router.js';
import { QuietNodes } from './quietNodes.js';
import { listenQuiet } from './quietNotices.js';
import { StreamRelay, type RelayStats } from './streamRelay.js';

export interface NatsNodeOptions {
  /** NATS_URL. */
  url: string;
  nodeId: string;
  /** This process's start (PgNode.incarnation): the owners tell it from the node's earlier processes. */
  incarnation?: number;
  /** The node's own shards (ShardSet). */
  shards: LocalShards;
  /** The lease store's owner of an account (PgNode.lookupOwner). */
  lookupOwner: (accountId: string) => Promise<OwnerInfo>;
  /** CLUSTER_OWNER_WAIT_MS. */
  ownerWaitMs: number;
  /** Where events relayed from other nodes go: the gateway's shard-event receivers. */
  onEvent: (ev: ShardEvent) => void;
  /** Publish market data only while another node's sockets want its symbol (a gateway: its stream
   *  commands pass the router's ledger). Default: all of it. */
  marketOnInterest?: boolean;
  /** Whether this node holds the account's lease (the relay then drops that account's events from
   *  other nodes' shards: StreamRelayOptions.holds). */
  holds?: (accountId: string) => boolean;
  log: Logger;
  /** Time for the quiet notices' ttl (default: the system clock). */
  clock?: Clock;
  reconnectWaitMs?: number;
  /** CLUSTER_ALIVE_ASK_MS: how long a liveness question waits for its answer (default 250). */
  aliveAskMs?: number;
  /** Answer for this node (forwarded calls, liveness questions) from the start (default); a gateway
   *  starts answering itself, once its start under its NODE_ID was allowed (ClusterNode.start): a
   *  start refused beside a live process of the id must not answer that process's calls meanwhile. */
  answerAlive?: boolean;
}

export interface NatsNode {
  link: NatsLink;
  owners: OwnerCache;
  router: AccountRouter;
  relay: StreamRelay;
  /** Asks whether a node's process is alive on NATS; answers for this one once told to (liveness.ts). */
  liveness: Liveness;
  /** Counters for /metrics and status. */
  stats(): { natsUp: boolean; router: RouterStats; relay: RelayStats };
  /** After the node handed its accounts over: stop answering, stop relaying, drain the connection. */
  close(): Promise<void>;
}

/** Connects (rejects if no NATS server answers now) and starts answering forwarded calls. */
export async function startNatsNode(o: NatsNodeOptions): Promise<NatsNode> {
  const log = o.log.child({ component: 'cluster-nats' });
  const link = await NatsLink.connect({ url: o.url, name: o.nodeId, log, ...(o.reconnectWaitMs === undefined ? {} : { reconnectWaitMs: o.reconnectWaitMs }) });
  const owners = new OwnerCache({ link, lookup: o.lookupOwner, log });
  const liveness = new Liveness(link, o.aliveAskMs ?? 250);
  const router = new AccountRouter({ nodeId: o.nodeId, link, shards: o.shards, owners, log, ownerWaitMs: o.ownerWaitMs, liveness, ...(o.incarnation === undefined ? {} : { incarnation: o.incarnation }) });
  if (o.answerAlive !== false) router.serve();
  // A gateway's relay: market data goes out only while another node's sockets want the symbol of an
  // account owned here (the router's ledger). Tests and benches of the relay alone publish all of it.
  const wanted = o.marketOnInterest ? (_server: string, symbol: string) => router.interest.wantedElsewhere(symbol) : undefined;
  // Ticks are withheld while every node wanting them said its near source keeps up (quietNodes.ts).
  const quiet = new QuietNodes();
  const clock = o.clock ?? systemClock;
  const quietFor = (server: string, symbol: string) => {
    if (quiet.empty) return false;
    const now = clock.now();
    return router.interest.everyElsewhere(symbol, (node) => quiet.has(node, server, symbol, now));
  };
  const quietSub = o.marketOnInterest ? listenQuiet(link, o.nodeId, quiet, clock, log) : undefined;
  const relay = new StreamRelay({
    link, nodeId: o.nodeId, log, onEvent: o.onEvent, ...(wanted ? { wanted, quietFor } : {}), ...(o.holds ? { holds: o.holds } : {}),
  });
  if (o.answerAlive !== false) await liveness.answer(o.nodeId, o.incarnation ?? 0);
  // The subscriptions are at the server before anyone is told this node is up.
  await link.nc.flush();
  return {
    link, owners, router, relay, liveness,
    stats: () => ({ natsUp: link.up, router: router.stats, relay: relay.stats }),
    async close() {
      quietSub?.unsubscribe();
      relay.close();
      router.close();
      liveness.close();
      owners.close();
      await link.close();
    },
  };
}
