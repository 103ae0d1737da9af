// PostgreSQL or NATS could not be reached, or refused this node, at start: the operator's to fix.

/**
 * Shaped as a system error (code, syscall, path) so main reports it in one line, exit 1, naming the
 * server without the credentials its URL may carry.
 */
export class EngineUnavailableError extends Error {
  readonly syscall = 'connect';
  constructor(readonly path: string, readonly code: string) {
    super(`cannot connect ${path}: ${code}`);
  }
}

/** A socket error's code (ECONNREFUSED, ENOTFOUND; on the error or its cause), else the server's refusal. */
export function unavailableCode(err: unknown): string {
  const e = err as { code?: unknown; cause?: { code?: unknown }; message?: unknown } | undefined;
  const code = [e?.code, e?.cause?.code].find((c): c is string => typeof c === 'string' && /^E[A-Z]+$/.test(c));
  return code ?? String(e?.message ?? err);
}
