// Every environment variable the configuration reads is in docs/configuration.md's table, in
// backticks: a setting added to src/config.ts without its line there fails here. The README's
// "Configuration" section names the few a first run needs and links the page.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { CONFIG_ENV, CONFIG_VARIABLES, configSchema, parseConfig } from '../../src/config.js';

const root = join(import.meta.dirname, '..', '..');
const section = readFileSync(join(root, 'docs', 'configuration.md'), 'utf8');
const readme = readFileSync(join(root, 'README.md'), 'utf8');
const readmeSection = readme.slice(readme.indexOf('\n## Configuration\n'), readme.indexOf('\n## ', readme.indexOf('\n## Configuration\n') + 5));
const missing = (names: readonly string[]) => names.filter((v) => !section.includes(`\`${v}\``));

it('every configuration variable is in docs/configuration.md, which the README links', () => {
  expect(readmeSection).toContain('(docs/configuration.md)');
  expect(section.length).toBeGreaterThan(1_000);
  expect(CONFIG_VARIABLES.length).toBeGreaterThan(40);
  expect(missing(CONFIG_VARIABLES)).toEqual([]);
  expect(missing(['NO_SUCH_SETTING', 'PORT'])).toEqual(['NO_SUCH_SETTING']); // the check can fail
});

/** How the page writes a default: a number or a string as it is, in backticks; `false` as "off"; `[]` as "none". */
function written(v: unknown): string | undefined {
  if (typeof v === 'number' || typeof v === 'string') return `\`${v}\``;
  if (v === false) return 'off';
  if (Array.isArray(v) && v.length === 0) return 'none';
  return undefined;
}

it('every setting of src/config.ts is on a line of docs/configuration.md that gives its true default', () => {
  const defaults = parseConfig({});
  const envOf = Object.fromEntries(Object.entries(CONFIG_ENV).map(([n, k]) => [k, n]));
  const lines = section.split('\n');
  // The machine's core count decides it: the page says how.
  const computed = new Set(['shards']);
  const wrong: string[] = [];
  for (const key of Object.keys(configSchema.shape)) {
    const names = [envOf[key], key].filter((n): n is string => n !== undefined).map((n) => `\`${n}\``);
    const own = lines.filter((l) => names.some((n) => l.includes(n)));
    if (own.length === 0) { wrong.push(`${key}: not on the page`); continue; }
    const d = (defaults as Record<string, unknown>)[key];
    if (d === undefined || computed.has(key)) continue;
    const w = written(d);
    if (w === undefined || !own.some((l) => l.includes(w))) wrong.push(`${key}: default ${JSON.stringify(d)} not on its line`);
  }
  expect(wrong).toEqual([]);
});
