// The order test files start in (vitest.config.ts sequence.sequencer): the longest first, so the run
// does not end on one long file alone while the other workers are idle. Vitest's own order does
// this only from its cache (node_modules/.vite), which a clean clone (CI) does not have: there it
// sorts by file size, and a short cluster file holding a 20 s setup started last. The durations come
// from test/durations.json (seconds a file took in a whole run on the 2-vCPU machine; refresh it with
// `node test/helpers/durations.mjs <vitest JSON report>`), else from vitest's cache, else a file
// counts as quick (unit files, new files).
import { readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

const ROOT = join(import.meta.dirname, '..', '..');

function recorded(): Record<string, number> {
  try {
    return JSON.parse(readFileSync(join(ROOT, 'test', 'durations.json'), 'utf8')) as Record<string, number>;
  } catch {
    return {};
  }
}

export class LongestFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const known = recorded();
    const seconds = (spec: TestSpecification): number => {
      const path = relative(ROOT, spec.moduleId);
      const cached = this.ctx.cache.getFileTestResults(`${spec.project.name}:${path}`);
      return known[path] ?? (cached ? cached.duration / 1000 : 0);
    };
    const est = new Map(files.map((f) => [f, seconds(f)]));
    return [...files].sort((a, b) => est.get(b)! - est.get(a)!);
  }
}
