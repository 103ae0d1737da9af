// tagw backup FILE, tagw restore FILE, tagw migrate --check: local operations on DATA_DIR's
// database (src/store/backup.ts, src/store/migrations.ts; migrate --check also reads the cluster's
// PostgreSQL when DATABASE_URL is set), no HTTP. Backup runs beside a serving gateway; restore
// needs it stopped.
import type { Command } from 'commander';
import { BackupError, backupDatabase, restoreDatabase } from '../../store/backup.js';
import { DataDirInUseError } from '../../store/dataDirLock.js';
import { dbPath } from '../../store/db.js';
import { checkMigrations, SchemaTooNewError, type MigrationPlan } from '../../store/migrations.js';
import { checkPgMigrations } from '../../cluster/pgMigrations.js';
import { errorMessage } from '../../util/errorMessage.js';
import type { Ctx } from '../context.js';
import { CliError, EXIT } from '../errors.js';
import { fields, table } from '../output.js';

/** The store's own errors as CLI errors: one line, an exit code an operator's script can test. */
function asCliError(e: unknown): unknown {
  if (e instanceof DataDirInUseError) return new CliError(EXIT.DATA_DIR_IN_USE, e.message);
  if (e instanceof SchemaTooNewError) return new CliError(EXIT.SCHEMA_TOO_NEW, e.message);
  if (e instanceof BackupError) return new CliError(EXIT.FAILED, e.message);
  return e;
}

function planText(database: string, p: MigrationPlan): string {
  return fields([
    ['database', database], ['schema version', p.current], ['this build', p.target],
    ['state', p.tooNew ? 'NEWER than this build: it refuses to start on it' : p.pending.length ? `${p.pending.length} migration(s) would run` : 'up to date'],
  ]) + (p.pending.length ? `\n${table(p.pending, [{ header: 'VERSION', value: (m) => m.version }, { header: 'MIGRATION', value: (m) => m.name }])}` : '');
}

const keyLine = (k: { location: string; fingerprint: string | null }) => `${k.location}${k.fingerprint ? ` (fingerprint ${k.fingerprint})` : ' (no key yet)'}`;

export function dataCommands(program: Command, ctx: () => Ctx): void {
  program.command('backup <file>').description('a consistent copy of the database, taken while the gateway serves (never overwrites)')
    .action(async (file: string) => {
      const c = ctx();
      const { dataDir, secretKey } = c.config();
      const r = await backupDatabase({ dataDir, secretKey }, file).catch((e: unknown) => { throw asCliError(e); });
      c.out.print(r, (d) => fields([
        ['backup', d.file], ['bytes', d.bytes], ['schema version', d.schemaVersion], ['taken at', d.takenAt],
        ['secret key', `${keyLine(d.secretKey)}: NOT in the backup; keep it too, or the broker passwords in it cannot be decrypted`],
      ]));
    });

  program.command('restore <file>').description('replace the database with a backup (the gateway must be stopped; integrity and schema checked first)')
    .action(async (file: string) => {
      const c = ctx();
      const { dataDir, secretKey } = c.config();
      const r = await restoreDatabase({ dataDir, secretKey }, file).catch((e: unknown) => { throw asCliError(e); });
      const keyNote = r.secretKey.matches === false
        ? 'DIFFERS from the key the backup was taken with: broker passwords will not decrypt (restore that key, or start with SECRET_KEY_RESET=1 and bind the accounts again)'
        : r.secretKey.matches === true ? 'the same key the backup was taken with' : 'unknown (no fingerprint recorded, or no key found)';
      c.out.print(r, (d) => fields([
        ['restored', d.file], ['into', d.dataDir], ['schema version', d.schemaVersion], ['taken at', d.takenAt],
        ['previous database', d.previous ?? '(none)'], ['secret key', `${keyLine(d.secretKey)}: ${keyNote}`],
        ['migrations at next start', d.pendingMigrations.map((m) => `${m.version} ${m.name}`).join('; ') || 'none'],
      ]));
    });

  program.command('migrate').description('schema migrations (the gateway runs them at start)')
    .option('--check', 'show what would run on DATA_DIR\'s database (and the cluster database when DATABASE_URL is set), change nothing')
    .action(async (o: { check?: boolean }) => {
      if (!o.check) throw new CliError(EXIT.USAGE, 'the gateway migrates its database when it starts; `tagw migrate --check` shows what that would run');
      const c = ctx();
      const { dataDir, databaseUrl } = c.config();
      const file = dbPath(dataDir);
      const plan = checkMigrations(file);
      // Cluster mode: PostgreSQL's schema too (a node refuses a newer one, exit 5, as for SQLite).
      const cluster = databaseUrl === undefined ? undefined
        : await checkPgMigrations(databaseUrl).catch((e: unknown) => { throw new CliError(EXIT.FAILED, errorMessage(e)); });
      c.out.print({ database: file, ...plan, ...(cluster ? { cluster } : {}) }, (d) => [
        planText(d.database, d),
        ...(d.cluster ? [`\nCluster database (DATABASE_URL):\n${planText(d.cluster.database, d.cluster)}`] : []),
      ].join('\n'));
      if (plan.tooNew) throw new CliError(EXIT.SCHEMA_TOO_NEW, `${file}: schema version ${plan.current} is newer than this build's ${plan.target}`);
      if (cluster?.tooNew) throw new CliError(EXIT.SCHEMA_TOO_NEW, `${cluster.database}: cluster schema version ${cluster.current} is newer than this build's ${cluster.target}`);
    });
}
