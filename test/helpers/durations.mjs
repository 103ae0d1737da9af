// Writes test/durations.json (the order sequencer.ts starts files in) from vitest JSON reports of
// whole runs: `npx vitest run --reporter=json --outputFile=/tmp/suite.json`, then
// `node test/helpers/durations.mjs /tmp/suite.json [more reports]` (a file's mean over them). Files
// under half a second are left out (quick).
import { readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';

const root = join(import.meta.dirname, '..', '..');
const seen = new Map();
for (const path of process.argv.slice(2)) {
  for (const f of JSON.parse(readFileSync(path, 'utf8')).testResults) {
    const name = relative(root, f.name).replace(/^.*?(?=test\/)/, '');
    seen.set(name, [...(seen.get(name) ?? []), (f.endTime - f.startTime) / 1000]);
  }
}
const rows = [...seen]
  .map(([p, s]) => [p, Math.round((s.reduce((a, b) => a + b, 0) / s.length) * 10) / 10])
  .filter(([, s]) => s >= 0.5)
  .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
writeFileSync(join(root, 'test', 'durations.json'), `{\n${rows.map(([p, s]) => `  ${JSON.stringify(p)}: ${s}`).join(',\n')}\n}\n`);
