// The NATS subjects of cluster mode (docs/cluster.md). Names that come from outside (account ids,
// broker server and symbol names, node ids) become one subject token each: a '.', '*', '>' or
// space in them would otherwise split the subject or turn it into a wildcard. Letters, digits, '_'
// and '-' stay as they are (so the usual ids are readable on the wire); every other UTF-8 byte is
// written '~' and two hex digits, and the empty name is '~' alone. The mapping is one-to-one.

const PLAIN = /^[A-Za-z0-9_-]+$/;

export function token(name: string): string {
  if (PLAIN.test(name)) return name;
  if (name === '') return '~';
  let out = '';
  for (const ch of name) {
    if (/[A-Za-z0-9_-]/.test(ch)) out += ch;
    else for (const b of Buffer.from(ch, 'utf8')) out += `~${b.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

/** The name a token stands for. */
export function untoken(t: string): string {
  if (t === '~') return '';
  if (!t.includes('~')) return t;
  const bytes: number[] = [];
  for (let i = 0; i < t.length; i++) {
    if (t[i] === '~') {
      bytes.push(parseInt(t.slice(i + 1, i + 3), 16));
      i += 2;
    } else bytes.push(t.charCodeAt(i));
  }
  return Buffer.from(bytes).toString('utf8');
}

export const SUBJECTS = {
  /** Requests for the accounts a node owns (src/cluster/router.ts). */
  nodeCall: (nodeId: string) => `tagw.node.${token(nodeId)}.call`,
  /** The parts of a reply too large for one message (src/cluster/replyParts.ts). */
  nodePart: (nodeId: string) => `tagw.node.${token(nodeId)}.part`,
  /** A node back after a lapse of its heartbeat asks an owner to release what its sockets held
   *  there before it opens them again (AccountRouter.rejoin). */
  nodeForget: (nodeId: string) => `tagw.node.${token(nodeId)}.forget`,
  /** An owner released what a node's sockets held there, judging it departed (OwnerStreams.forgetNode):
   *  told to the node (the owner's id), in case it lives on; it asks to be forgotten and reopens. */
  nodeReleased: (nodeId: string) => `tagw.node.${token(nodeId)}.released`,
  /** The owner's shard running some accounts died with a node's sockets holding their streams there
   *  (OwnerStreams.shardDied): told to the node ({ owner, accounts }), which opens them again on the
   *  new thread (AccountRouter.reopen). */
  nodeReopen: (nodeId: string) => `tagw.node.${token(nodeId)}.reopen`,
  /** Whether a node's process is alive and on NATS: it answers its incarnation (liveness.ts). */
  nodeAlive: (nodeId: string) => `tagw.node.${token(nodeId)}.alive`,
  /** A tenancy write landed in PostgreSQL: every node mirrors at once and answers (clusterTenancy.ts). */
  tenancy: 'tagw.tenancy',
  /** Which node knows a gateway session handle (its hash): the one whose SQLite has it answers the row. */
  sessionFind: 'tagw.session.find',
  /** Owner changes (src/cluster/owners.ts). */
  leases: 'tagw.leases',
  /** Market data of a broker server's symbol, once per server and symbol (src/cluster/streamRelay.ts). */
  market: (server: string, symbol: string, kind: string) => `tagw.md.${token(server)}.${token(symbol)}.${kind}`,
  marketAll: (server: string, symbol: string) => `tagw.md.${token(server)}.${token(symbol)}.>`,
  /** A node's quiet set: the (server, symbol) pairs whose ticks its near sources deliver in time,
   *  so owners withhold their relayed copies (nearSources.ts, quietNodes.ts). */
  nearQuiet: 'tagw.near.quiet',
  /** Events of one account (or one gateway session handle, for the /ws socket's kinds). */
  account: (key: string, kind: string) => `tagw.acct.${token(key)}.${kind}`,
  accountAll: (key: string) => `tagw.acct.${token(key)}.>`,
} as const;
