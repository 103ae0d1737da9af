// The README's shell blocks, for the tests that run them as a newcomer would.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from './build.js';

/** The first ```sh block after the line `heading` in the README. */
export function readmeShellBlockAfter(heading: string): string {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const at = readme.indexOf(`\n${heading}\n`);
  if (at < 0) throw new Error(`README has no heading '${heading}'`);
  const m = /\n```sh\n([\s\S]*?)\n```/.exec(readme.slice(at));
  if (!m) throw new Error(`no sh block after '${heading}'`);
  return m[1]!;
}
