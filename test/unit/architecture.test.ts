// The import graph of src/ and actors/ keeps the shape docs/architecture.md describes: layers that
// import only downward, no import circle (between files, or between the folders of src/), the edge apart from broker internals, the simulator apart
// from the store, the runtime apart from the edge; and no source file over 500 lines. Read from the
// TypeScript sources themselves (every import, export ... from and import() with a relative path).
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** Bottom to top. A file may import its own layer and those below it, never one above. The first
 *  matching prefix places a file (so 'src/news/cli.ts' can stand apart from 'src/news/'). */
const LAYERS: { name: string; paths: string[] }[] = [
  { name: 'foundation', paths: ['src/market/', 'src/errors.ts', 'src/log.ts', 'src/util/', 'src/crypto/', 'src/version.ts'] },
  { name: 'domain', paths: ['actors/', 'src/sim/', 'src/news/'] },
  { name: 'store', paths: ['src/store/'] },
  { name: 'adapters', paths: ['src/broker/', 'src/auth/'] },
  { name: 'runtime', paths: ['src/runtime/'] },
  { name: 'cluster', paths: ['src/cluster/'] },
  { name: 'edge', paths: ['src/http/', 'src/stream/', 'src/dashboard/', 'src/config.ts', 'src/configUnset.ts', 'src/startupChecks.ts'] },
  { name: 'composition', paths: ['src/gateway.ts', 'src/gatewayMetrics.ts', 'src/clusterNotices.ts', 'src/main.ts', 'src/simServer.ts', 'src/client/', 'src/cli/'] },
];

/** Imports that are never allowed, whatever the layers say. */
const NEVER: { from: string; to: string; why: string }[] = [
  { from: 'src/http/', to: 'src/broker/', why: 'the HTTP edge speaks the trading vocabulary (src/market/), not broker internals' },
  { from: 'src/stream/', to: 'src/broker/', why: 'the stream edge speaks the trading vocabulary (src/market/), not broker internals' },
  { from: 'src/sim/', to: 'src/store/', why: 'the simulator owns its persistence port (src/sim/persistence.ts); the store implements it' },
  { from: 'src/runtime/', to: 'src/http/', why: 'the runtime (shards) knows no HTTP' },
  { from: 'src/runtime/', to: 'src/stream/', why: 'the runtime (shards) knows no sockets; the main<->shard contract is in src/runtime/' },
  { from: 'src/stream/', to: 'src/sim/', why: 'the stream edge does not reach into the simulator' },
  { from: 'src/market/', to: 'src/', why: 'the vocabulary at the bottom imports nothing but itself' },
  { from: 'actors/', to: 'src/', why: 'actors are pure machines: effects come in as provided actors and actions' },
];

const MAX_LINES = 500;

function sources(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(join(ROOT, dir))) {
    const path = `${dir}/${name}`;
    if (statSync(join(ROOT, path)).isDirectory()) out.push(...sources(path));
    else if (name.endsWith('.ts')) out.push(path);
  }
  return out;
}

// `import x from '...'`, `import type {...} from '...'`, `export ... from '...'`, `import '...'`, `import('...')`,
// at the start of a line (a template string's text is not an import).
const IMPORT = /^\s*(?:import|export)\s(?:[^'";]*?\sfrom\s*)?'([^']+)'|\bimport\(\s*'([^']+)'\s*\)/gm;

function importGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of [...sources('src'), ...sources('actors')]) {
    const text = readFileSync(join(ROOT, file), 'utf8');
    const deps = new Set<string>();
    for (const m of text.matchAll(IMPORT)) {
      const spec = m[1] ?? m[2]!;
      if (!spec.startsWith('.')) continue;
      deps.add(relative(ROOT, normalize(join(ROOT, dirname(file), spec))).replace(/\.js$/, '.ts').split('\\').join('/'));
    }
    graph.set(file, [...deps]);
  }
  return graph;
}

const under = (file: string, prefix: string) => (prefix.endsWith('/') ? file.startsWith(prefix) : file === prefix);
function layerOf(file: string): number {
  const i = LAYERS.findIndex((l) => l.paths.some((p) => under(file, p)));
  return i;
}

/** Every import circle (strongly connected component of more than one file, or a file importing itself). */
function circles(graph: Map<string, string[]>): string[][] {
  let n = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const on = new Set<string>();
  const out: string[][] = [];
  const visit = (v: string) => {
    index.set(v, n);
    low.set(v, n++);
    stack.push(v);
    on.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (on.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const scc: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        on.delete(w);
        scc.push(w);
      } while (w !== v);
      if (scc.length > 1 || (graph.get(v) ?? []).includes(v)) out.push(scc.sort());
    }
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return out;
}

/** The unit of a file of src/: the folder right under src/ that holds it, or the file itself at the top. */
const folderOf = (file: string) => file.replace(/^(src\/[^/]+\/).*$/, '$1');

/** The import graph between the folders of src/ (imports within a folder dropped). */
function folderGraph(graph: Map<string, string[]>): Map<string, string[]> {
  const out = new Map<string, Set<string>>();
  for (const [from, tos] of graph) {
    if (!from.startsWith('src/')) continue;
    const deps = out.get(folderOf(from)) ?? new Set<string>();
    out.set(folderOf(from), deps);
    for (const to of tos) if (to.startsWith('src/') && graph.has(to) && folderOf(to) !== folderOf(from)) deps.add(folderOf(to));
  }
  return new Map([...out].map(([k, v]) => [k, [...v]]));
}

describe('architecture (docs/architecture.md)', () => {
  const graph = importGraph();
  const edges = [...graph].flatMap(([from, tos]) => tos.map((to) => ({ from, to })));

  it('reads the graph: every relative import resolves to a source file', () => {
    expect(graph.size).toBeGreaterThan(100);
    const missing = edges.filter((e) => !graph.has(e.to) && !e.to.startsWith('..'));
    expect(missing.filter((e) => e.to.startsWith('src/') || e.to.startsWith('actors/'))).toEqual([]);
  });

  it('places every file of src/ and actors/ on a layer', () => {
    expect([...graph.keys()].filter((f) => layerOf(f) < 0)).toEqual([]);
  });

  it('has no import that runs up a layer', () => {
    const up = edges
      .filter((e) => graph.has(e.to) && layerOf(e.to) > layerOf(e.from))
      .map((e) => `${e.from} (${LAYERS[layerOf(e.from)]!.name}) -> ${e.to} (${LAYERS[layerOf(e.to)]!.name})`);
    expect(up).toEqual([]);
  });

  it('keeps the never rules', () => {
    const broken = NEVER.flatMap((r) =>
      edges.filter((e) => under(e.from, r.from) && under(e.to, r.to) && !under(e.to, r.from)).map((e) => `${e.from} -> ${e.to}: ${r.why}`));
    expect(broken).toEqual([]);
  });

  it('has no import circle', () => {
    expect(circles(graph)).toEqual([]);
  });

  // Within a layer too, the folders stand one above another: src/stream/ and src/dashboard/ on
  // src/http/, never the reverse; a file at the top of src/ (src/config.ts) is a unit of its own.
  // Each circle here is an import that runs back up (src/http/ once took the socket paths from
  // src/stream/ and the connection log from src/dashboard/; src/services.ts, which the routes read,
  // imported src/http/).
  it('has no import circle between the folders of src/', () => {
    expect(circles(folderGraph(graph))).toEqual([]);
  });

  it('finds a circle and an upward import when there is one (the checks can fail)', () => {
    const g = new Map([['src/market/a.ts', ['src/runtime/b.ts']], ['src/runtime/b.ts', ['src/market/a.ts']]]);
    expect(circles(g)).toEqual([['src/market/a.ts', 'src/runtime/b.ts']]);
    expect(layerOf('src/runtime/b.ts')).toBeGreaterThan(layerOf('src/market/a.ts'));
    const folders = folderGraph(new Map([['src/http/a.ts', ['src/stream/b.ts']], ['src/stream/b.ts', ['src/http/c.ts']], ['src/http/c.ts', []]]));
    expect(circles(folders)).toEqual([['src/http/', 'src/stream/']]);
  });

  it('keeps every test file in test/unit/ (no sockets) or test/integration/, and helpers in test/helpers/', () => {
    const loose = readdirSync(join(ROOT, 'test')).filter((f) => f.endsWith('.ts'));
    expect(loose).toEqual([]);
    const unitWithSockets = sources('test/unit').filter((f) =>
      /startTestGateway|startProcess|startSimServer|startBridgeSim|WebSocket|\bfetch\(|createServer|\.listen\(/.test(readFileSync(join(ROOT, f), 'utf8')));
    expect(unitWithSockets.filter((f) => !f.endsWith('architecture.test.ts'))).toEqual([]);
  });

  it(`has no source file over ${MAX_LINES} lines in src/ or actors/`, () => {
    const long = [...graph.keys()]
      .map((f) => ({ f, lines: readFileSync(join(ROOT, f), 'utf8').split('\n').length - 1 }))
      .filter((x) => x.lines > MAX_LINES)
      .map((x) => `${x.f}: ${x.lines} lines`);
    expect(long).toEqual([]);
  });
});
