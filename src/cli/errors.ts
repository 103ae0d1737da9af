// Exit codes of `tagw` (docs/cli.md). The gateway's own start-up codes keep their meaning here:
// 2 a configuration or usage mistake, 4 DATA_DIR held by a running gateway, 5 a database newer than this build.
export const EXIT = {
  OK: 0,
  /** The gateway (or the local operation) refused or failed: the message says why. */
  FAILED: 1,
  /** Bad arguments, or a configuration the gateway itself would refuse. */
  USAGE: 2,
  /** No gateway answers at the address the configuration gives. */
  UNREACHABLE: 3,
  /** A gateway holds DATA_DIR (restore needs it stopped). */
  DATA_DIR_IN_USE: 4,
  /** The database's schema is newer than this build. */
  SCHEMA_TOO_NEW: 5,
  /** No management key found, or the gateway refused it (401). */
  AUTH: 6,
  /** `status`: the gateway answers but is not ready (/readyz 503, or a cluster node that stepped down). */
  NOT_READY: 7,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** An expected failure: one line on stderr and its exit code, never a stack trace. */
export class CliError extends Error {
  constructor(readonly exitCode: ExitCode, message: string) {
    super(message);
  }
}
