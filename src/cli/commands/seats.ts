// tagw seats list|create|show|delete and tagw accounts list|show|reconnect.
import type { Command } from 'commander';
import type { Ctx } from '../context.js';
import { CliError, EXIT } from '../errors.js';
import { fields, table, when } from '../output.js';

interface Seat {
  id: string; status: string; privateHosting: boolean; region: string | null; monthlyPrice: number; currency: string;
  createdAt: string; readyAt: string;
}
interface Connection {
  id: string; platform: string | null; server: string | null; phase: string | null; synced: boolean; since: string | null;
  lastError: { at: string; phase: string; reason?: string } | null; history: Array<{ at: string; phase: string }>;
  /** Cluster mode: the node running it (null: none now, a takeover under way); absent on a single node. */
  owner?: string | null;
}

/** The phase this node knows; an account another cluster node runs has its phase there. */
const phaseOf = (a: Connection) => a.phase
  ?? (a.owner ? `on ${a.owner}` : a.owner === null && a.server ? 'no owner (takeover under way)' : a.server ? 'unknown' : 'no login bound');

const hosting = (s: Seat) => (s.privateHosting ? `private${s.region ? ` (${s.region})` : ''}` : 'shared');
const seg = (v: string) => encodeURIComponent(v);

export function seatsCommand(program: Command, ctx: () => Promise<Ctx>): void {
  const seats = program.command('seats').description('seats (accounts): list, create, show, delete');

  seats.command('list').description("the customer's seats").action(async () => {
    const c = await ctx();
    const r = await c.client().call<{ seats: Seat[] }>('GET', '/v1/seats');
    c.out.print(r, (d) => table(d.seats, [
      { header: 'ID', value: (s) => s.id }, { header: 'STATUS', value: (s) => s.status }, { header: 'HOSTING', value: hosting },
      { header: 'PRICE', value: (s) => `${s.monthlyPrice} ${s.currency}/month` }, { header: 'CREATED', value: (s) => when(s.createdAt) },
    ]));
  });

  seats.command('create').description('create a seat (shared unless --private)')
    .option('--private', 'privately hosted: a dedicated IP and device id (BUILDING_SERVER first)')
    .option('--region <region>', 'region of a private seat, e.g. us-east')
    .action(async (o: { private?: boolean; region?: string }) => {
      const c = await ctx();
      const s = await c.client().call<Seat>('POST', '/v1/seats', { privateHosting: o.private === true, ...(o.region ? { region: o.region } : {}) });
      c.out.print(s, (d) => `Created seat ${d.id} (${d.status}, ${hosting(d)}).\n`);
    });

  seats.command('show <seatId>').description('a seat, its keys and its broker connection').action(async (id: string) => {
    const c = await ctx();
    const client = c.client();
    const [seat, keys] = await Promise.all([
      client.call<Seat>('GET', `/v1/seats/${seg(id)}`),
      client.call<{ keys: Array<{ id: string; label: string; readOnly: boolean; revoked: boolean; lastUsedAt: string | null }> }>('GET', `/v1/seats/${seg(id)}/keys`),
    ]);
    c.out.print({ ...seat, keys: keys.keys }, (d) => fields([
      ['id', d.id], ['status', d.status], ['hosting', hosting(d)], ['price', `${d.monthlyPrice} ${d.currency}/month`],
      ['created', when(d.createdAt)], ['ready', when(d.readyAt)],
    ]) + `\nKeys scoped to this seat:\n${table(d.keys, [
      { header: 'ID', value: (k) => k.id }, { header: 'LABEL', value: (k) => k.label }, { header: 'ACCESS', value: (k) => (k.readOnly ? 'read-only' : 'full') },
      { header: 'LAST USED', value: (k) => when(k.lastUsedAt) ?? 'never' }, { header: 'STATE', value: (k) => (k.revoked ? 'revoked' : 'live') },
    ])}`);
  });

  seats.command('delete <seatId>').description('remove a seat: its connection, sessions, streams and scoped keys end; orders and audit rows stay')
    .option('--yes', 'confirm (required: this cannot be undone)')
    .action(async (id: string, o: { yes?: boolean }) => {
      if (!o.yes) throw new CliError(EXIT.USAGE, `removing seat ${id} cannot be undone: add --yes`);
      const c = await ctx();
      const r = await c.client().call<{ id: string; revokedKeys: string[] }>('DELETE', `/v1/seats/${seg(id)}`);
      c.out.print(r, (d) => `Removed seat ${d.id}${d.revokedKeys.length ? `; revoked its keys ${d.revokedKeys.join(', ')}` : ''}.\n`);
    });
}

/** The last drop, refusal or failed login: its phase, when, and why when the gateway says. */
const lastErrorText = (e: Connection['lastError']) => (e ? `${e.phase} at ${when(e.at)}${e.reason ? `: ${e.reason}` : ''}` : null);

export function accountsCommand(program: Command, ctx: () => Promise<Ctx>): void {
  const accounts = program.command('accounts').description("accounts' broker connections: list, show, reconnect");
  const connections = async (c: Ctx) => (await c.client().call<{ accounts: Connection[] }>('GET', '/v1/accounts/connections')).accounts;

  accounts.command('list').description('every account with its connection phase').action(async () => {
    const c = await ctx();
    const rows = await connections(c);
    c.out.print({ accounts: rows }, (d) => table(d.accounts, [
      { header: 'ID', value: (a) => a.id }, { header: 'PLATFORM', value: (a) => a.platform }, { header: 'SERVER', value: (a) => a.server },
      { header: 'PHASE', value: phaseOf }, { header: 'SINCE', value: (a) => when(a.since) },
      { header: 'LAST ERROR', value: (a) => lastErrorText(a.lastError) },
    ]));
  });

  accounts.command('show <accountId>').description("an account's connection and its recent phase changes").action(async (id: string) => {
    const c = await ctx();
    const a = (await connections(c)).find((x) => x.id === id);
    if (!a) throw new CliError(EXIT.FAILED, `no account ${id}`);
    c.out.print(a, (d) => fields([
      ['id', d.id], ['platform', d.platform], ['server', d.server], ['phase', phaseOf(d)], ...(d.owner !== undefined ? [['node', d.owner ?? 'none (takeover under way)'] as [string, unknown]] : []),
      // Another node runs it: this node knows no phase of it, so no 'no' that reads as a broken account.
      ['synced', d.phase === null && d.owner ? `ask ${d.owner}` : d.synced ? 'yes' : 'no'],
      ['since', when(d.since)], ['last error', lastErrorText(d.lastError)],
    ]) + `\nHistory:\n${table(d.history, [{ header: 'AT', value: (h) => when(h.at) }, { header: 'PHASE', value: (h) => h.phase }])}`);
  });

  accounts.command('reconnect <accountId>').description("replace the account's broker connection (requests in flight finish on the old one)")
    .action(async (id: string) => {
      const c = await ctx();
      const r = await c.client().call<{ id: string; connection: string; generation: number }>('POST', `/v1/accounts/${seg(id)}/upgrade`, {});
      c.out.print(r, reconnectedLine);
    });
}

/** `generation` counts the replacements since the account's host started (0: its first connection),
 *  so the first reconnect is replacement #1; it read "connection #1", which was the second. */
export function reconnectedLine(d: { id: string; connection: string; generation: number }): string {
  return `Reconnected ${d.id}: ${d.connection} (replacement #${d.generation} of its broker connection).\n`;
}
