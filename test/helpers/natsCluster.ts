// A JetStream cluster of real nats-servers on loopback (docs/cluster.md "NATS"): each server its own
// client port, cluster port and store dir, routed to the others. Started once per test file, as
// startNats() is; a server can be SIGKILLed (the cluster's loss of one machine) and restarted.
import { jetstreamManager } from '@nats-io/jetstream';
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
  /** Until JetStream answers its API again (after a server's loss: once a meta leader is elected). */
  ready(): Promise<void>;
  stop(): Promise<void>;
}

/** `size` servers in one JetStream cluster; resolves once JetStream has its meta leader (streams can be made). */
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
  await jetStreamReady(url);
  return {
    servers, url,
    server(name) {
      const s = servers.find((x) => x.name === name);
      if (!s) throw new Error(`no server ${name} in the cluster (${servers.map((x) => x.name).join(', ')})`);
      return s;
    },
    ready: () => jetStreamReady(url),
    stop: async () => void await Promise.all(servers.map((s) => s.stop())),
  };
}

/** Until the cluster answers JetStream's API: a meta leader is elected (a second or two after the
 *  routes connect; 4 to 9 s after the meta leader's loss, nats-server 2.9's election timeout). */
async function jetStreamReady(url: string): Promise<void> {
  const nc = await connect({ servers: url.split(',') });
  try {
    // jetstreamManager asks the account's JetStream info: refused (503) until there is a meta leader.
    await until(() => jetstreamManager(nc, { timeout: 1_000 }).then(() => true, () => false), 'the NATS cluster\'s JetStream meta leader', 20_000);
  } finally {
    await nc.close();
  }
}
