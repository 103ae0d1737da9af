// Makes the pinned uWS build's fault with upgrades from async code (src/http/corkAnchor.ts) happen
// every time instead of rarely: while a socket's `open` handler runs, small chunks of this thread's
// C heap are taken and filled with 0x10, the bit pattern that uWS's cork() reads as "Connection:
// close, no response pending" should it read memory the upgrade freed. Buffer.alloc(n) takes its
// bytes from malloc, so the chunk the upgrade's realloc just freed is among those filled.

/** Wraps `target[method]` (a socket open handler); returns what undoes it. */
export function poisonHeapDuringOpen(target: object, method: string): () => void {
  const obj = target as Record<string, (...args: unknown[]) => unknown>;
  const own = Object.prototype.hasOwnProperty.call(obj, method);
  const original = obj[method]!;
  const kept: Buffer[][] = [];
  obj[method] = function (this: unknown, ...args: unknown[]) {
    const chunks: Buffer[] = [];
    for (let n = 8; n <= 1024; n += 8) for (let k = 0; k < 8; k++) chunks.push(Buffer.alloc(n, 0x10));
    kept.push(chunks); // held, so the chunks stay taken until the upgrade returned
    return original.apply(this, args);
  };
  return () => {
    if (own) obj[method] = original;
    else delete obj[method];
    kept.length = 0;
  };
}
