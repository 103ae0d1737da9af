export function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.message;
  // An error thrown in another thread (a shard's, passed on by Piscina) may arrive as a plain object.
  const message = typeof err === 'object' && err !== null ? (err as { message?: unknown }).message : undefined;
  return typeof message === 'string' ? message : String(err);
}
