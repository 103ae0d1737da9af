// A JetStream cluster of real nats-servers on loopback (docs/cluster.md "NATS"): each server its own
// client port, cluster port and store dir, routed to the others. Started once per test file, as
// startNats() is; a server can be SIGKILLed (the cluster's loss of one machine) and restarted.
import { jetstreamManager, StorageType } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { freePort, startNats, type NatsEngine } from './engines.js';
import { until } from './until.js';

export interface NatsClusterServer extends NatsEngine {
  /** The server's name (-n), as JetStream names a stream's leader and replicas. */
  name: string;
}

export interface NatsCluster {
  servers: NatsClusterServer[];
  /** Every server's client URL, comma-separated (NATS_URL). */
  url: string;
  /** The server by its name (a stream's leader, say). */
  server(name: string): NatsClusterServer;
  stop(): Promise<void>;
}

/** `size` servers in one JetStream cluster; resolves once JetStream can place a stream on all of them. */
export async function startNatsCluster(size = 3): Promise<NatsCluster> {
  const ports = await Promise.all(Array.from({ length: size }, async () => ({ client: await freePort(), route: await freePort() })));
  const routes = ports.map((p) => `nats://127.0.0.1:${p.route}`).join(',');
  const servers = await Promise.all(ports.map(async (p, i) => {
    const name = `n${i + 1}`;
    const engine = await startNats({
      port: p.client,
      args: ['-n', name, '--cluster_name', 'tagw-test', '--cluster', `nats://127.0.0.1:${p.route}`, '--routes', routes],
    });
    return { ...engine, name };
  }));
  const url = servers.map((s) => s.url).join(',');
  await jetStreamReady(url, size);
  return {
    servers, url,
    server(name) {
      const s = servers.find((x) => x.name === name);
      if (!s) throw new Error(`no server ${name} in the cluster (${servers.map((x) => x.name).join(', ')})`);
      return s;
    },
    stop: async () => void await Promise.all(servers.map((s) => s.stop())),
  };
}

/** Until the cluster places a stream on all `size` servers: a meta leader is elected and knows every
 *  peer (a second or two after the routes connect). */
async function jetStreamReady(url: string, size: number): Promise<void> {
  const nc = await connect({ servers: url.split(',') });
  const probe = { name: 'TAGW_READY_PROBE', subjects: ['tagw.ready-probe'], storage: StorageType.Memory, num_replicas: size };
  try {
    await until(async () => {
      // jetstreamManager asks the account's JetStream info: refused (503) until there is a meta leader.
      const jsm = await jetstreamManager(nc, { timeout: 1_000 }).catch(() => undefined);
      const placed = await jsm?.streams.add(probe).then(() => true, () => false);
      if (placed) await jsm!.streams.delete(probe.name);
      return placed === true;
    }, `the NATS cluster's JetStream to place a stream on ${size} servers`, 20_000);
  } finally {
    await nc.close();
  }
}
