// A nats-server configuration with two users for the cluster tests of where a node's quotes come
// from: `node` may do anything, `nomd` may not subscribe the market subjects (`tagw.md.>`), so
// whatever an owner relays of a symbol never reaches a node logged in as `nomd`. Both: password `pw`.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export type NatsUser = 'node' | 'nomd';

/** The configuration file's path (give nats-server `-c <path>`). */
export function natsUsersConf(): string {
  const conf = join(mkdtempSync(join(tmpdir(), 'tagw-nats-conf-')), 'nats.conf');
  writeFileSync(conf, `authorization {
  users = [
    { user: "node", password: "pw" }
    { user: "nomd", password: "pw", permissions: { subscribe: { deny: ["tagw.md.>"] } } }
  ]
}
`);
  return conf;
}

/** A node's NATS_URL as `user`. */
export const natsUserUrl = (port: number, user: NatsUser) => `nats://${user}:pw@127.0.0.1:${port}`;
