// `node test/helpers/bundle.mjs <build dir>`: after tsc wrote the test build (build.ts), each entry a
// process or thread starts from is replaced by one file holding it and what it imports (esbuild),
// so a gateway process, shard worker or checkpointer thread loads one module instead of some
// hundreds. Loading them was most of what starting one cost: the suite starts some hundred gateway
// processes and several hundred worker threads, and that loading was a fifth of its CPU. Every
// module keeps its own import.meta.url (its place in the build), so what it finds beside itself
// (config/, package.json, the worker files, the dashboard's files) it finds as unbundled. Native and
// worker-pool packages stay imports. The shipped build (dist/, `npm start`) is not bundled; process.test
// runs it. A bundle holds the packages it imports: a test of what a process loads runs the entry as
// tsc wrote it, kept beside the bundle (build.ts builtEntry(path, { unbundled: true })).
//
// Compiled once, not at each start: V8 parsed and compiled a 1-2.7 MB bundle every time a process
// or thread loaded it, a third of a gateway process's start. Node 20 keeps no compile cache for ES
// modules (module.enableCompileCache is Node 22) and caches a vm.Script's code only, so each bundle
// is written as a CommonJS function body (`main.bundle.cjs`, strict mode, as the ES module bundle
// ran) with V8's code cache beside it (`.cache`, made here), and the entry (`main.js`) is a small ES
// module that runs that body through vm.Script with the cache and exports what the entry exported.
// A cache V8 refuses (another node binary or other V8 flags) only means compiling as before.
import { execFileSync } from 'node:child_process';
import { build } from 'esbuild';
import { copyFile, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { basename, dirname, join, relative, sep } from 'node:path';

const ENTRIES = ['src/main.js', 'src/simServer.js', 'src/cli/main.js', 'src/runtime/shardWorker.js', 'src/store/checkpointWorker.js'];
/** Entries whose top level only defines things (main.js starts a gateway, checkpointWorker.js its
 *  loop): their cache is made after running it, so it holds what loading compiles too. */
const RUN_FOR_CACHE = new Set(['src/simServer.js', 'src/cli/main.js', 'src/runtime/shardWorker.js']);

const unbundled = (entry) => entry.replace(/\.js$/, '.unbundled.js');
const body = (entry) => entry.replace(/\.js$/, '.bundle.cjs');

const dir = process.argv[2];
if (!dir) throw new Error('usage: node test/helpers/bundle.mjs <build dir>');
const out = join(dir, '.bundled');

/** The function the bundle's text becomes: the same string here (for the cache) and in the entry. */
const WRAP_HEAD = '(function (exports, require, module, __filename, __dirname) {';
const WRAP_TAIL = '\n})';

/** import.meta.url as the module's own file in the build, not the bundle's: its place relative to
 *  the entry's (the body lies beside the entry), since the build is made in a side directory, then moved. */
const ownUrl = (entry) => ({
  name: 'own-import-meta-url',
  setup(b) {
    b.onLoad({ filter: /\.js$/ }, async (args) => {
      if (!args.path.startsWith(dir)) return undefined;
      const text = await readFile(args.path, 'utf8');
      if (!text.includes('import.meta.url')) return { contents: text, loader: 'js' };
      const rel = `./${relative(dirname(join(dir, entry)), args.path).split(sep).join('/')}`;
      return { contents: text.replaceAll('import.meta.url', `new URL(${JSON.stringify(rel)}, __bundleUrl).href`), loader: 'js' };
    });
  },
});

/** Writes `<body>.cache`: V8's code for the body, compiled (and run, with `run`) in a fresh node. */
function writeCache(file, run) {
  const code = `const vm = require('node:vm'), fs = require('node:fs'), path = require('node:path');
    const [file, run] = process.argv.slice(1);
    const script = new vm.Script(${JSON.stringify(WRAP_HEAD)} + fs.readFileSync(file, 'utf8') + ${JSON.stringify(WRAP_TAIL)}, { filename: file, importModuleDynamically: vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER });
    if (run === 'run') { const module = { exports: {} }; script.runInThisContext().call(undefined, module.exports, require('node:module').createRequire(file), module, file, path.dirname(file)); }
    fs.writeFileSync(file + '.cache', script.createCachedData());
    process.exit(0);`;
  execFileSync(process.execPath, ['-e', code, file, run ? 'run' : 'compile'], { stdio: ['ignore', 'ignore', 'inherit'], env: { PATH: process.env.PATH, HOME: process.env.HOME } });
}

/** What the entry exports, from tsc's output of it (an entry declares its exports itself). */
async function exportsOf(entry) {
  const text = await readFile(join(dir, entry), 'utf8');
  const names = [...text.matchAll(/^export (?:async )?(?:function\*?|const|let|var|class) ([\w$]+)/gm)].map((m) => m[1]);
  if (/^export (?:\{|\*)/m.test(text)) throw new Error(`bundle.mjs: ${entry} re-exports; list its names here`);
  return { names, hasDefault: /^export default /m.test(text) };
}

/** The entry: runs the body with its code cache and exports what the entry exported. */
function launcher(entry, { names, hasDefault }) {
  const file = basename(body(entry));
  return `// Test build: runs ${file} (this entry bundled, test/helpers/bundle.mjs) with V8's code cache.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import vm from 'node:vm';
const file = fileURLToPath(new URL(${JSON.stringify(`./${file}`)}, import.meta.url));
let cachedData;
try { cachedData = readFileSync(\`\${file}.cache\`); } catch {}
const script = new vm.Script(${JSON.stringify(WRAP_HEAD)} + readFileSync(file, 'utf8') + ${JSON.stringify(WRAP_TAIL)}, {
  filename: file, cachedData, importModuleDynamically: vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
});
if (process.env.TAGW_BUNDLE_CACHE_CHECK && (cachedData === undefined || script.cachedDataRejected)) process.emitWarning(\`\${file}: code cache \${cachedData === undefined ? 'missing' : 'refused'}\`);
const module = { exports: {} };
script.runInThisContext().call(undefined, module.exports, createRequire(file), module, file, dirname(file));
${hasDefault ? 'export default module.exports.default;\n' : ''}${names.length ? `export const { ${names.join(', ')} } = module.exports;\n` : ''}`;
}

// From tsc's output, written aside: an entry may import another one (cli/main.js loads main.js).
await Promise.all(ENTRIES.map((entry) => build({
  entryPoints: [join(dir, entry)], outfile: join(out, body(entry)), bundle: true, platform: 'node', format: 'cjs', target: 'node20',
  external: ['better-sqlite3', 'uWebSockets.js', 'piscina', 'pg-native', 'tsx', 'tsx/*'],
  // Strict, as the ES modules it is made of; the body's own URL for the modules' import.meta.url.
  banner: { js: '"use strict"; const __bundleUrl = require("node:url").pathToFileURL(__filename).href;' },
  plugins: [ownUrl(entry)], logLevel: 'error',
})));
// Each entry as tsc wrote it stays beside its bundle (main.js -> main.unbundled.js, importing the
// build's modules): what a process imports can only be seen there (start-imports.test.ts).
for (const entry of ENTRIES) {
  const exported = await exportsOf(entry);
  await copyFile(join(dir, entry), join(dir, unbundled(entry)));
  await rename(join(out, body(entry)), join(dir, body(entry)));
  // import.meta left as esbuild's empty object (a path not under `dir`): its URLs would be wrong.
  if ((await readFile(join(dir, body(entry)), 'utf8')).includes('import_meta')) throw new Error(`bundle.mjs: import.meta left in ${body(entry)}`);
  writeCache(join(dir, body(entry)), RUN_FOR_CACHE.has(entry));
  await writeFile(join(dir, entry), launcher(entry, exported));
}
await rm(out, { recursive: true, force: true });
