// tagw backup FILE, tagw restore FILE, tagw migrate --check: local operations on DATA_DIR's
// database (src/store/backup.ts, src/store/migrations.ts; migrate --check also reads the cluster's
// PostgreSQL when DATABASE_URL is set), no HTTP. Backup runs beside a serving gateway; restore
// needs it stopped. What they do is in dataActions.ts, loaded when one runs: better-sqlite3 and pg
// are no part of every other tagw call.
import type { Command } from 'commander';
import type { Ctx } from '../context.js';
import { CliError, EXIT } from '../errors.js';

const actions = () => import('./dataActions.js');

export function dataCommands(program: Command, ctx: () => Promise<Ctx>): void {
  program.command('backup <file>').description('a consistent copy of the database, taken while the gateway serves (never overwrites)')
    .action(async (file: string) => (await actions()).backup(await ctx(), file));

  program.command('restore <file>').description('replace the database with a backup (the gateway must be stopped; integrity and schema checked first)')
    .action(async (file: string) => (await actions()).restore(await ctx(), file));

  program.command('migrate').description('schema migrations (the gateway runs them at start)')
    .option('--check', 'show what would run on DATA_DIR\'s database (and the cluster database when DATABASE_URL is set), change nothing')
    .action(async (o: { check?: boolean }) => {
      if (!o.check) throw new CliError(EXIT.USAGE, 'the gateway migrates its database when it starts; `tagw migrate --check` shows what that would run');
      await (await actions()).migrateCheck(await ctx());
    });
}
