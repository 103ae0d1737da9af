// Every environment variable the configuration reads is in docs/configuration.md's table, in
// backticks: a setting added to src/config.ts without its line there fails here. The README's
// "Configuration" section names the few a first run needs and links the page.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { CONFIG_VARIABLES } from '../../src/config.js';

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
