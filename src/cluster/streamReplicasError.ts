// NATS_STREAM_REPLICAS the NATS servers cannot hold: the operator's to fix (one line, exit 2). Apart
// from jsHistory.ts, so main.ts maps it to its exit code without loading NATS on a single node
// (test/integration/start-imports.test.ts).
export class StreamReplicasError extends Error {
  constructor(replicas: number, stream: string, why: string) {
    super(`NATS_STREAM_REPLICAS=${replicas}: JetStream cannot keep the stream history (${stream}) in ${replicas} copies: ${why}; ` +
      'set it to at most the number of JetStream servers in the NATS cluster (1 on a single nats-server)');
  }
}
