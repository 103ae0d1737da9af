// `npm run bench -- NAME` runs bench/NAME.ts; each bench prints one JSON line last.
import { existsSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { dirname, join } from 'node:path';

const name = process.argv[2];
const here = dirname(fileURLToPath(import.meta.url));
if (!name || !/^[a-z0-9-]+$/.test(name) || !existsSync(join(here, `${name}.ts`))) {
  console.error(`usage: npm run bench -- NAME   (bench/NAME.ts must exist)`);
  process.exit(2);
}
process.argv.splice(2, 1);
await import(pathToFileURL(join(here, `${name}.ts`)).href);
