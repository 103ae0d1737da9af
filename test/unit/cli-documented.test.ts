// Every `tagw` command (each leaf of the commander program) has its row in docs/cli.md's Commands
// table, in backticks at the row's start or after a comma: a command added without its line fails here.
// And the example `tagw status` shows this build's schema version (a newcomer compares it with theirs).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Command } from 'commander';
import { expect, it } from 'vitest';
import { buildProgram } from '../../src/cli/main.js';
import { SCHEMA_VERSION } from '../../src/store/migrations.js';

const doc = readFileSync(join(import.meta.dirname, '..', '..', 'docs', 'cli.md'), 'utf8');
const table = doc.slice(doc.indexOf('\n## Commands\n'));

function leaves(c: Command, prefix = ''): string[] {
  return c.commands.flatMap((s) => {
    const path = `${prefix}${s.name()}`;
    return s.commands.length ? leaves(s, `${path} `) : [path];
  });
}

const missing = (paths: string[]) => paths.filter((p) => !new RegExp(`(^\\| |, )\`${p.replace(/[-]/g, '\\-')}( |\`)`, 'm').test(table));

it("every tagw command has its row in docs/cli.md's Commands table", () => {
  const paths = leaves(buildProgram());
  expect(paths.length).toBeGreaterThan(20);
  expect(missing(paths)).toEqual([]);
  expect(missing(['keys list', 'keys frobnicate'])).toEqual(['keys frobnicate']); // the check can fail
});

it("docs/cli.md's example `tagw status` shows this build's schema version", () => {
  const example = doc.slice(doc.indexOf('\n$ npx tagw status\n'));
  expect(/^schema version: +(\d+)$/m.exec(example)?.[1]).toBe(String(SCHEMA_VERSION));
});
