// Child processes of the benches run as their parent does: from the build `npm run bench` makes
// (dist-bench/, plain node) or, when a bench is started from its .ts source, through tsx. So a
// bench measures the JavaScript tsc emits, which `npm start` runs, not tsx's transform of it.
import { fileURLToPath } from 'node:url';

/** The path of the module `rel` (written `./x.ts`) beside `base` (an import.meta.url), as `base`
 *  is: the .ts source from the sources, the compiled .js from the build. */
export function moduleBeside(rel: string, base: string): string {
  return fileURLToPath(new URL(base.endsWith('.ts') ? rel : rel.replace(/\.ts$/, '.js'), base));
}

/** Node's arguments to run `file`: the tsx loader only for a .ts source. */
export function loaderArgs(file: string): string[] {
  return file.endsWith('.ts') ? ['--import', 'tsx'] : [];
}
