// bin/tagw.js picks the build or the sources. `npm start` builds first (prestart), and a `tagw`
// started while tsc writes dist/ found dist/src/cli/main.js newer than the sources and loaded a
// build half written. It now runs the build only once `npm run build` finished (dist/BUILT, written
// last, removed first), and no older than the sources. A copy of the launcher in a temp root whose
// two entries say which ran.
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const repo = join(import.meta.dirname, '..', '..');
const root = mkdtempSync(join(tmpdir(), 'tagw-launcher-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

mkdirSync(join(root, 'bin'));
copyFileSync(join(repo, 'bin', 'tagw.js'), join(root, 'bin', 'tagw.js'));
symlinkSync(join(repo, 'node_modules'), join(root, 'node_modules'));
writeFileSync(join(root, 'package.json'), JSON.stringify({ type: 'module' }));
mkdirSync(join(root, 'src', 'cli'), { recursive: true });
writeFileSync(join(root, 'src', 'cli', 'main.ts'), "export async function run(): Promise<number> { console.log('sources'); return 0; }\n");
mkdirSync(join(root, 'dist', 'src', 'cli'), { recursive: true });
writeFileSync(join(root, 'dist', 'src', 'cli', 'main.js'), "export async function run() { console.log('build'); return 0; }\n");

const ran = () => execFileSync(process.execPath, [join(root, 'bin', 'tagw.js')], { encoding: 'utf8' }).trim();
const at = (file: string, s: number) => utimesSync(file, s, s);
const T = Math.floor(Date.now() / 1000);

describe('bin/tagw.js', () => {
  it('runs the build once a build finished after the last source change', () => {
    at(join(root, 'src', 'cli', 'main.ts'), T - 100);
    writeFileSync(join(root, 'dist', 'BUILT'), '');
    at(join(root, 'dist', 'BUILT'), T - 50);
    expect(ran()).toBe('build');
  });

  it('runs the sources while a build is being written (no dist/BUILT), its modules newer than the sources', () => {
    rmSync(join(root, 'dist', 'BUILT'), { force: true });
    at(join(root, 'src', 'cli', 'main.ts'), T - 100);
    at(join(root, 'dist', 'src', 'cli', 'main.js'), T - 10);
    expect(ran()).toBe('sources');
  });

  it('runs the sources when they changed after the last finished build', () => {
    writeFileSync(join(root, 'dist', 'BUILT'), '');
    at(join(root, 'dist', 'BUILT'), T - 100);
    at(join(root, 'src', 'cli', 'main.ts'), T - 10);
    expect(ran()).toBe('sources');
  });
});
