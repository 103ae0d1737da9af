// Shard commands of cluster mode (docs/cluster.md): which accounts a shard may run is decided by the
// node's leases, not by the accounts in its SQLite. Types only, shared by the main thread and the shard.

declare module '../protocol.js' {
  interface CommandMap {
    /** The node acquired these accounts' leases: the shard starts them from their (mirrored) bindings. */
    'shard.adopt': { args: { accountIds: string[] }; result: { started: number } };
    /** The node handed these accounts over or lost them: the shard drops their actors and broker
     *  connections at once (before it runs another command). */
    'shard.release': { args: { accountIds: string[] }; result: { stopped: number } };
  }
}

export {};
