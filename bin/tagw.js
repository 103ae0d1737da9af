#!/usr/bin/env node
// The `tagw` command (package.json "bin"). Runs the CLI from the build (dist/) when a build finished
// (dist/BUILT, written last by `npm run build`, removed first) at least as new as the sources,
// otherwise from the TypeScript sources through tsx: `npx tagw` works in a fresh checkout with no
// build step, never runs a stale build, and never one being written (`npm start` builds first: a
// `tagw` started meanwhile loaded half-written modules). In this process (no child process, so no
// secret ever travels in a child's argv or environment).
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const built = join(root, 'dist', 'src', 'cli', 'main.js');
const finished = join(root, 'dist', 'BUILT');

/** The newest modification time of the .ts files under `dir` (0 when there is none). */
function newest(dir) {
  let t = 0;
  if (!existsSync(dir)) return t;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) t = Math.max(t, newest(p));
    else if (e.name.endsWith('.ts')) t = Math.max(t, statSync(p).mtimeMs);
  }
  return t;
}

let entry = built;
const sources = join(root, 'src', 'cli', 'main.ts');
if (existsSync(sources) && (!existsSync(finished) || statSync(finished).mtimeMs < Math.max(newest(join(root, 'src')), newest(join(root, 'actors'))))) {
  let register;
  try {
    ({ register } = await import('tsx/esm/api'));
  } catch {
    if (!existsSync(built)) {
      process.stderr.write('tagw: no build (dist/) and no tsx to run the sources: run `npm ci && npm run build`\n');
      process.exit(1);
    }
  }
  if (register) {
    register();
    entry = sources;
  }
}
const { run } = await import(pathToFileURL(entry).href);
const code = await run(process.argv.slice(2));
if (code !== undefined) process.exitCode = code;
