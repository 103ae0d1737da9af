// Every environment variable the configuration reads is in the README's "Configuration" section, in
// backticks (its table): a setting added to src/config.ts without its line there fails here.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { CONFIG_VARIABLES } from '../../src/config.js';

const readme = readFileSync(join(import.meta.dirname, '..', '..', 'README.md'), 'utf8');
const section = readme.slice(readme.indexOf('\n## Configuration\n'), readme.indexOf('\n## ', readme.indexOf('\n## Configuration\n') + 5));
const missing = (names: readonly string[]) => names.filter((v) => !section.includes(`\`${v}\``));

it("every configuration variable is in the README's Configuration section", () => {
  expect(section.length).toBeGreaterThan(1_000);
  expect(CONFIG_VARIABLES.length).toBeGreaterThan(40);
  expect(missing(CONFIG_VARIABLES)).toEqual([]);
  expect(missing(['NO_SUCH_SETTING', 'PORT'])).toEqual(['NO_SUCH_SETTING']); // the check can fail
});
