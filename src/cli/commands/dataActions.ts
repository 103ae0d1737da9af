// What tagw backup, restore and migrate --check do (data.ts declares them): loaded only when one of
// them runs, with the store (better-sqlite3) they need; PostgreSQL (pg) only for a cluster's database.
import { BackupError, backupDatabase, databasePresent, restoreDatabase, type RestoreReport } from '../../store/backup.js';
import { DataDirInUseError } from '../../store/dataDirLock.js';
import { dbPath } from '../../store/db.js';
import { checkMigrations, SchemaTooNewError, type MigrationPlan } from '../../store/migrations.js';
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

/** `exists: false`: no SQLite file there (a new DATA_DIR, or a mistyped one): said so, not "schema version 0". */
function planText(database: string, p: MigrationPlan & { exists?: boolean }): string {
  return fields([
    ['database', database], ['schema version', p.exists === false ? '(no database)' : p.current], ['this build', p.target],
    ['state', p.exists === false ? `no database in DATA_DIR: a start creates a new one (${p.pending.length} migrations); check DATA_DIR if you expected one`
      : p.tooNew ? 'NEWER than this build: it refuses to start on it' : p.pending.length ? `${p.pending.length} migration(s) would run` : 'up to date'],
  ]) + (p.pending.length ? `\n${table(p.pending, [{ header: 'VERSION', value: (m) => m.version }, { header: 'MIGRATION', value: (m) => m.name }])}` : '');
}

const keyLine = (k: { location: string; fingerprint: string | null }, none = 'no key yet') => `${k.location}${k.fingerprint ? ` (fingerprint ${k.fingerprint})` : ` (${none})`}`;

/** A restore's key lines: the key found now and whether it is the backup's, then the backup's own
 *  (one line naming the backup's key and saying it DIFFERS read as if that key were the one found). */
export function restoreKeyLines(k: RestoreReport['secretKey']): [string, string][] {
  const note = k.matches === false
    ? "DIFFERS from the backup's: broker passwords will not decrypt (restore the backup's key, or start with SECRET_KEY_RESET=1 and bind the accounts again)"
    : k.matches === true ? "the backup's" : "unknown whether it is the backup's (no fingerprint recorded, or no key found)";
  return [['secret key', `${keyLine(k.found)}: ${note}`], ["backup's secret key", keyLine(k, 'no fingerprint recorded')]];
}

/** A cluster node's SQLite only mirrors PostgreSQL (docs/cluster.md#backup-and-restore). */
const CLUSTER_MIRROR = "this node's SQLite, a mirror of the cluster database: NOT a backup of the cluster; back up PostgreSQL (DATABASE_URL) with pg_dump, docs/cluster.md#backup-and-restore";

export async function backup(c: Ctx, file: string): Promise<void> {
  const { dataDir, secretKey, databaseUrl } = c.config();
  const r = await backupDatabase({ dataDir, secretKey }, file).catch((e: unknown) => { throw asCliError(e); });
  c.out.print(databaseUrl === undefined ? r : { ...r, cluster: CLUSTER_MIRROR }, (d) => fields([
    ['backup', d.file], ['bytes', d.bytes], ['schema version', d.schemaVersion], ['taken at', d.takenAt],
    ['secret key', `${keyLine(d.secretKey)}: NOT in the backup; keep it too, or the broker passwords in it cannot be decrypted`],
    ...('cluster' in d ? [['cluster', d.cluster] as [string, unknown]] : []),
  ]));
}

export async function restore(c: Ctx, file: string): Promise<void> {
  const { dataDir, secretKey } = c.config();
  const r = await restoreDatabase({ dataDir, secretKey }, file).catch((e: unknown) => { throw asCliError(e); });
  c.out.print(r, (d) => fields([
    ['restored', d.file], ['into', d.dataDir], ['schema version', d.schemaVersion], ['taken at', d.takenAt],
    ['previous database', d.previous ?? '(none)'], ...restoreKeyLines(d.secretKey),
    ['migrations at next start', d.pendingMigrations.map((m) => `${m.version} ${m.name}`).join('; ') || 'none'],
  ]));
}

export async function migrateCheck(c: Ctx): Promise<void> {
  const { dataDir, databaseUrl } = c.config();
  const file = dbPath(dataDir);
  let plan: MigrationPlan & { exists: boolean };
  try {
    const exists = databasePresent(file);
    plan = { ...checkMigrations(file), exists };
  } catch (e) {
    throw asCliError(e);
  }
  // Cluster mode: PostgreSQL's schema too (a node refuses a newer one, exit 5, as for SQLite).
  const cluster = databaseUrl === undefined ? undefined
    : await import('../../cluster/pgMigrations.js').then((m) => m.checkPgMigrations(databaseUrl)).catch((e: unknown) => { throw new CliError(EXIT.FAILED, errorMessage(e)); });
  c.out.print({ database: file, ...plan, ...(cluster ? { cluster } : {}) }, (d) => [
    planText(d.database, d),
    ...(d.cluster ? [`\nCluster database (DATABASE_URL):\n${planText(d.cluster.database, d.cluster)}`] : []),
  ].join('\n'));
  if (plan.tooNew) throw new CliError(EXIT.SCHEMA_TOO_NEW, `${file}: schema version ${plan.current} is newer than this build's ${plan.target}`);
  if (cluster?.tooNew) throw new CliError(EXIT.SCHEMA_TOO_NEW, `${cluster.database}: cluster schema version ${cluster.current} is newer than this build's ${cluster.target}`);
}
