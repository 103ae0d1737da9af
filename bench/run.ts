// `npm run bench -- NAME` compiles bench/, src/ and actors/ into dist-bench/ (tsconfig.bench.json)
// and runs NAME's compiled module, so the benches measure what `npm start` runs: tsc's JavaScript
// in the gateway, its worker threads and every process a bench starts (bench/lib/launch.ts).
// `npm run bench:source -- NAME` runs bench/NAME.ts through tsx instead. Each bench prints one JSON line last.
import { existsSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { dirname, join } from 'node:path';

const name = process.argv[2];
const here = dirname(fileURLToPath(import.meta.url));
const ext = import.meta.url.endsWith('.ts') ? 'ts' : 'js';
// The source decides which benches exist (a build may still hold the output of a removed one).
const source = join(here, ext === 'ts' ? '.' : '../../bench', `${name}.ts`);
if (!name || !/^[a-z0-9-]+$/.test(name) || !existsSync(source)) {
  console.error(`usage: npm run bench -- NAME   (bench/NAME.ts must exist)`);
  process.exit(2);
}
process.argv.splice(2, 1);
await import(pathToFileURL(join(here, `${name}.${ext}`)).href);
