// tagw/client runs in browsers as it is: its files import (at run time) only each other. Types may
// come from the server's schema modules (erased by the compiler, never bundled).
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const dir = join(import.meta.dirname, '../../src/client');

describe('src/client imports', () => {
  it('imports nothing at run time but its own files (no node:, no server module, no package)', () => {
    const bad: string[] = [];
    for (const f of readdirSync(dir).filter((n) => n.endsWith('.ts'))) {
      const src = readFileSync(join(dir, f), 'utf8');
      for (const m of src.matchAll(/^(import|export)\s+(type\s+)?[^;]*?from\s+'([^']+)'/gms)) {
        if (m[2]) continue; // `import type` / `export type`: erased
        const target = m[3]!;
        if (!/^\.\/[\w-]+\.js$/.test(target)) bad.push(`${f}: ${m[0].replace(/\s+/g, ' ')}`);
      }
      if (/['"]node:/.test(src)) bad.push(`${f}: mentions a node: module`);
    }
    expect(bad).toEqual([]);
  });
});
