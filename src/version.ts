// The package version, from package.json above the sources (src/) or the build (dist/src/).
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const PACKAGE_VERSION: string = (() => {
  for (const rel of ['../package.json', '../../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(fileURLToPath(new URL(rel, import.meta.url)), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'tagw' && pkg.version) return pkg.version;
    } catch {
      // not at this level
    }
  }
  return 'unknown';
})();
