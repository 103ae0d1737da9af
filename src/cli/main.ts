// The `tagw` command line (bin/tagw.js runs it): serve, status, keys, seats, accounts, mgmt-key,
// backup, restore, migrate --check, calendar. Built on commander: the best-kept Node CLI library
// (subcommands, generated --help, option parsing with typed actions, no dependencies). Online
// commands talk to the gateway the configuration (env, TAGW_CONFIG) points at, over its HTTP API
// with the management key; exit codes are in errors.ts and docs/cli.md.
import { Command, CommanderError } from 'commander';
import { PACKAGE_VERSION } from '../version.js';
import { accountsCommand, seatsCommand } from './commands/seats.js';
import { calendarCommand } from './commands/calendar.js';
import { dataCommands } from './commands/data.js';
import { keysCommand } from './commands/keys.js';
import { mgmtKeyCommand, statusCommand } from './commands/admin.js';
import type { Ctx, GlobalOptions } from './context.js';
import { CliError, EXIT } from './errors.js';

export function buildProgram(): Command {
  const program = new Command('tagw')
    .description('tagw: trading account gateway. Reads the same configuration as the gateway (environment, TAGW_CONFIG).')
    .version(PACKAGE_VERSION)
    .option('--json', 'print JSON (for scripts) instead of tables')
    .option('--url <url>', 'the gateway to talk to (default: from HOST and PORT, or TAGW_URL)')
    .option('--management-key-file <file>', 'read the management key from this file (default: GATEWAY_MANAGEMENT_KEY, then DATA_DIR/bootstrap.json)')
    .option('--management-key-stdin', 'read the management key from stdin')
    .showHelpAfterError('(tagw --help lists the commands)')
    .enablePositionalOptions(false)
    .exitOverride();
  // What a command needs (configuration, client, store, PostgreSQL) loads when it runs: --help and
  // the commands that need none of it start without (bots call tagw in scripts).
  const ctx = async (): Promise<Ctx> => new (await import('./context.js')).Ctx(program.opts<GlobalOptions>());
  program.command('serve').description('run the gateway (what npm start does)').action(async () => {
    await import('../main.js');
  });
  statusCommand(program, ctx);
  keysCommand(program, ctx);
  seatsCommand(program, ctx);
  accountsCommand(program, ctx);
  mgmtKeyCommand(program, ctx);
  dataCommands(program, ctx);
  calendarCommand(program);
  program.addHelpText('after', `
Exit codes: 0 ok, 1 refused or failed, 2 usage or configuration, 3 no gateway answers,
4 a gateway holds DATA_DIR, 5 database newer than this build, 6 no or refused management key,
7 (status) the gateway answers but is not ready.
Details: docs/cli.md`);
  // Every subcommand reports usage errors through the same override.
  for (const c of program.commands) {
    c.exitOverride();
    for (const sub of c.commands) sub.exitOverride();
  }
  return program;
}

/** A reader that went away (`tagw keys list | head`) ends the output, as it ends other commands'
 *  (Node ignores SIGPIPE: the write's EPIPE would otherwise crash the process with a stack trace). */
function endQuietlyWhenTheReaderGoes(): void {
  if (process.stdout.listenerCount('error') > 0) return;
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EPIPE') throw err;
    process.exit(0);
  });
}

/** Runs the command line; resolves to the exit code (serve: undefined, the gateway exits by itself). */
export async function run(argv: string[]): Promise<number | undefined> {
  // Not for serve: a gateway whose log reader went away is no command whose output was cut short.
  if (!argv.includes('serve')) endQuietlyWhenTheReaderGoes();
  const program = buildProgram();
  try {
    await program.parseAsync(argv, { from: 'user' });
    return program.args[0] === 'serve' ? undefined : EXIT.OK;
  } catch (e) {
    if (e instanceof CommanderError) {
      // Help asked for and the version are answers, not errors; help shown because a subcommand is
      // missing (`tagw keys`) is a usage error (commander's exitCode 1 there). Commander has
      // already printed what was wrong.
      const answered = e.code === 'commander.helpDisplayed' || e.code === 'commander.version' || (e.code === 'commander.help' && e.exitCode === 0);
      return answered ? EXIT.OK : EXIT.USAGE;
    }
    if (e instanceof CliError) {
      process.stderr.write(`tagw: ${e.message}\n`);
      return e.exitCode;
    }
    const sys = e as NodeJS.ErrnoException;
    if (sys instanceof Error && typeof sys.code === 'string' && typeof sys.syscall === 'string') {
      process.stderr.write(`tagw: cannot ${sys.syscall} ${sys.path ?? ''}: ${sys.code}\n`);
      return EXIT.FAILED;
    }
    throw e;
  }
}
