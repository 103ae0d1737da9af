// The benches measure tsc's build (`npm run bench` runs dist-bench/): every process or thread a bench
// starts must run as its parent does, the compiled .js from the build, the .ts through tsx only
// from the sources (bench/lib/launch.ts), never tsx written into a launch.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loaderArgs, moduleBeside } from '../../bench/lib/launch.js';

const ROOT = join(import.meta.dirname, '..', '..');

function benchSources(dir = 'bench'): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? (e.name === 'tmp' ? [] : benchSources(`${dir}/${e.name}`)) : e.name.endsWith('.ts') ? [`${dir}/${e.name}`] : []);
}

describe('bench child processes', () => {
  it('start the module beside their parent in the parent\'s form: .js from the build, .ts from the sources', () => {
    expect(moduleBeside('./lib/w.ts', 'file:///r/dist-bench/bench/stream.js')).toBe('/r/dist-bench/bench/lib/w.js');
    expect(moduleBeside('./lib/w.ts', 'file:///r/bench/stream.ts')).toBe('/r/bench/lib/w.ts');
    expect(moduleBeside('../src/main.ts', 'file:///r/dist-bench/bench/scale.js')).toBe('/r/dist-bench/src/main.js');
  });

  it('load tsx only for a .ts file', () => {
    expect(loaderArgs('/r/dist-bench/bench/lib/w.js')).toEqual([]);
    expect(loaderArgs('/r/bench/lib/w.ts')).toEqual(['--import', 'tsx']);
  });

  it('are never started with tsx written out in a bench (it would measure tsx\'s transform, not the build)', () => {
    const files = benchSources();
    expect(files).toContain('bench/lib/launch.ts');
    const hardCoded = files.filter((f) => f !== 'bench/lib/launch.ts' && /['"]tsx['"]|tsx\/esm/.test(readFileSync(join(ROOT, f), 'utf8')));
    expect(hardCoded).toEqual([]);
  });
});
