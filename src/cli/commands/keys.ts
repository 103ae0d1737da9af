// tagw keys list|create|revoke|replace|limits (docs/management.md, docs/rate-limits.md).
import type { Command } from 'commander';
import type { Ctx } from '../context.js';
import { CliError, EXIT } from '../errors.js';
import { table, when } from '../output.js';

interface KeyInfo {
  id: string; kind: string; label: string; readOnly: boolean; accountScoped: boolean; seatId: string | null;
  createdAt: string; lastUsedAt: string | null; revoked: boolean; replacedBy: string | null;
  requestsPerSec: number | null; ordersPerSec: number | null;
}

const scopeOf = (k: KeyInfo) => [k.readOnly ? 'read-only' : 'full', k.accountScoped ? `seat ${k.seatId}` : null].filter(Boolean).join(', ');
const stateOf = (k: KeyInfo) => (k.replacedBy ? `replaced by ${k.replacedBy}` : k.revoked ? 'revoked' : 'live');
const limitsOf = (k: KeyInfo) => (k.requestsPerSec === null && k.ordersPerSec === null ? 'default' : `${k.requestsPerSec ?? 'default'} req/s, ${k.ordersPerSec ?? 'default'} orders/s`);

/** A rate limit argument: a number (0: unlimited) or `default`. */
function limitArg(v: string): number | null {
  if (v === 'default') return null;
  const n = Number(v);
  if (v.trim() === '' || !Number.isFinite(n) || n < 0) throw new CliError(EXIT.USAGE, `'${v}' is not a limit: a number per second (0: unlimited) or 'default'`);
  return n;
}

export function keysCommand(program: Command, ctx: () => Promise<Ctx>): void {
  const keys = program.command('keys').description('API keys: list, create, revoke, replace, rate limits');

  keys.command('list').description("list the customer's keys (never their secrets)")
    .option('--seat <id>', 'only the keys scoped to this seat')
    .option('--kind <kind>', 'api, management or all', 'api')
    .option('--live', 'hide revoked keys')
    .action(async (o: { seat?: string; kind: string; live?: boolean }) => {
      const c = await ctx();
      const q = new URLSearchParams({ kind: o.kind, ...(o.seat ? { seatId: o.seat } : {}) });
      const r = await c.client().call<{ keys: KeyInfo[] }>('GET', `/v1/keys?${q}`);
      const rows = o.live ? r.keys.filter((k) => !k.revoked) : r.keys;
      c.out.print({ keys: rows }, (d) => table(d.keys, [
        { header: 'ID', value: (k) => k.id }, { header: 'KIND', value: (k) => k.kind }, { header: 'LABEL', value: (k) => k.label },
        { header: 'SCOPE', value: scopeOf }, { header: 'CREATED', value: (k) => when(k.createdAt) },
        { header: 'LAST USED', value: (k) => when(k.lastUsedAt) ?? 'never' }, { header: 'LIMITS', value: limitsOf },
        { header: 'STATE', value: stateOf },
      ]));
    });

  keys.command('create').description('create an API key; its secret is shown once')
    .requiredOption('--label <label>', 'a name for the key')
    .option('--seat <id>', 'create it under this seat (needed for --read-only or --account-scoped)')
    .option('--read-only', 'data and streaming only: trading calls answer 403')
    .option('--account-scoped', 'works only for the seat given with --seat')
    .action(async (o: { label: string; seat?: string; readOnly?: boolean; accountScoped?: boolean }) => {
      if (!o.seat && (o.readOnly || o.accountScoped)) throw new CliError(EXIT.USAGE, '--read-only and --account-scoped keys are created under a seat: add --seat <id>');
      const c = await ctx();
      const created = o.seat
        ? await c.client().call('POST', `/v1/seats/${encodeURIComponent(o.seat)}/keys`, { label: o.label, readOnly: o.readOnly === true, accountScoped: o.accountScoped === true })
        : await c.client().call('POST', '/v1/keys', { label: o.label });
      c.out.revealSecret(created, `Created API key ${created.id} (${o.label}):`);
    });

  keys.command('revoke <keyId>').description('revoke an API key: refused from its next request, its streams close')
    .action(async (id: string) => {
      const c = await ctx();
      const r = await c.client().call('DELETE', `/v1/keys/${encodeURIComponent(id)}`);
      c.out.print(r, () => `Revoked ${id}.\n`);
    });

  keys.command('replace <keyId>').description('a new key with the same scope and limits (shown once); the old one is revoked in the same step')
    .option('--label <label>', "the new key's label (default: the old one's)")
    .action(async (id: string, o: { label?: string }) => {
      const c = await ctx();
      const r = await c.client().call('POST', `/v1/keys/${encodeURIComponent(id)}/replace`, o.label ? { label: o.label } : {});
      c.out.revealSecret(r, `Replaced ${id} (revoked now) with ${r.id}:`);
    });

  keys.command('limits <keyId>').description("set a key's own rate limits (number per second, 0 unlimited, or 'default')")
    .option('--requests <perSec>', 'requests per second')
    .option('--orders <perSec>', 'orders (trading calls) per second')
    .action(async (id: string, o: { requests?: string; orders?: string }) => {
      if (o.requests === undefined && o.orders === undefined) throw new CliError(EXIT.USAGE, 'give --requests and/or --orders');
      const c = await ctx();
      const client = c.client();
      // The route sets both: an option not given keeps the key's current value. A key not among the
      // customer's API keys is sent as asked all the same: the gateway's answer (404 NOT_FOUND) is the
      // error, with its status and code as every other (ids are random, never reused: none appears meanwhile).
      const current = (await client.call<{ keys: KeyInfo[] }>('GET', '/v1/keys?kind=api')).keys.find((k) => k.id === id);
      const body = {
        requestsPerSec: o.requests !== undefined ? limitArg(o.requests) : current?.requestsPerSec ?? null,
        ordersPerSec: o.orders !== undefined ? limitArg(o.orders) : current?.ordersPerSec ?? null,
      };
      const r = await client.call<KeyInfo>('PUT', `/v1/keys/${encodeURIComponent(id)}/limits`, body);
      c.out.print(r, (k) => `${k.id}: ${limitsOf(k)}\n`);
    });
}
