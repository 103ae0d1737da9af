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
import { build } from 'esbuild';
import { copyFile, readFile, rename, rm } from 'node:fs/promises';
import { dirname, join, relative, sep } from 'node:path';

const ENTRIES = ['src/main.js', 'src/simServer.js', 'src/cli/main.js', 'src/runtime/shardWorker.js', 'src/store/checkpointWorker.js'];

const unbundled = (entry) => entry.replace(/\.js$/, '.unbundled.js');

const dir = process.argv[2];
if (!dir) throw new Error('usage: node test/helpers/bundle.mjs <build dir>');
const out = join(dir, '.bundled');

/** import.meta.url as the module's own file in the build, not the bundle's: its place relative to
 *  the entry's, which the bundle takes (the build is made in a side directory, then moved). */
const ownUrl = (entry) => ({
  name: 'own-import-meta-url',
  setup(b) {
    b.onLoad({ filter: /\.js$/ }, async (args) => {
      if (!args.path.startsWith(dir)) return undefined;
      const text = await readFile(args.path, 'utf8');
      if (!text.includes('import.meta.url')) return { contents: text, loader: 'js' };
      const rel = `./${relative(dirname(join(dir, entry)), args.path).split(sep).join('/')}`;
      return { contents: text.replaceAll('import.meta.url', `new URL(${JSON.stringify(rel)}, import.meta.url).href`), loader: 'js' };
    });
  },
});

// From tsc's output, written aside: an entry may import another one (cli/main.js loads main.js).
await Promise.all(ENTRIES.map((entry) => build({
  entryPoints: [join(dir, entry)], outfile: join(out, entry), bundle: true, platform: 'node', format: 'esm', target: 'node20',
  external: ['better-sqlite3', 'uWebSockets.js', 'piscina', 'pg-native', 'tsx', 'tsx/*'],
  // CommonJS packages inside an ES module bundle call require().
  banner: { js: "import { createRequire as __bundleRequire } from 'node:module'; const require = __bundleRequire(import.meta.url);" },
  plugins: [ownUrl(entry)], logLevel: 'error',
})));
// Each entry as tsc wrote it stays beside its bundle (main.js -> main.unbundled.js, importing the
// build's modules): what a process imports can only be seen there (start-imports.test.ts).
for (const entry of ENTRIES) {
  await copyFile(join(dir, entry), join(dir, unbundled(entry)));
  await rename(join(out, entry), join(dir, entry));
}
await rm(out, { recursive: true, force: true });
