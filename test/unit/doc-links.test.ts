// The README and docs/ link to each other's files and headings: a renamed or dropped heading
// (README's "Configuration" once) leaves links that land nowhere. Every relative link must name a
// file that exists and, with a #fragment into a Markdown file, a heading of it (GitHub's anchors).
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = resolve(import.meta.dirname, '../..');
const pages = ['README.md', ...readdirSync(join(root, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];

/** GitHub's heading anchor: lower case, punctuation dropped (but - and _), spaces to -, repeats numbered. */
function anchorsOf(markdown: string): Set<string> {
  const out = new Set<string>();
  const seen = new Map<string, number>();
  let fenced = false;
  for (const line of markdown.split('\n')) {
    if (line.startsWith('```')) fenced = !fenced;
    const m = fenced ? null : /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!m) continue;
    const base = m[1]!.toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-');
    const n = seen.get(base);
    seen.set(base, (n ?? -1) + 1);
    out.add(n === undefined ? base : `${base}-${n + 1}`);
  }
  return out;
}

function brokenLinks(page: string): string[] {
  const text = readFileSync(join(root, page), 'utf8');
  const broken: string[] = [];
  for (const [, link] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
    if (/^[a-z]+:/i.test(link!)) continue; // https:, mailto:
    const [path, fragment] = link!.split('#');
    const target = path ? resolve(root, dirname(page), path) : join(root, page);
    // The spec sits beside the repository, in the project workspace, not in a clone of it.
    if (path && !existsSync(target)) {
      if (!target.endsWith('/shared/SPEC.md')) broken.push(`${link}: no such file`);
      continue;
    }
    if (fragment && target.endsWith('.md') && !anchorsOf(readFileSync(target, 'utf8')).has(fragment)) {
      broken.push(`${link}: no such heading`);
    }
  }
  return broken;
}

describe('links in README.md and docs/', () => {
  it('anchors follow GitHub: punctuation dropped, repeats numbered, fenced lines ignored', () => {
    const md = '# Shutdown (SIGTERM, SIGINT)\n## The `tagw` command line\n```\n# not a heading\n```\n## Notes\n## Notes\n';
    expect([...anchorsOf(md)]).toEqual(['shutdown-sigterm-sigint', 'the-tagw-command-line', 'notes', 'notes-1']);
  });

  it.each(pages)('%s: every relative link reaches a file and heading that exist', (page) => {
    expect(brokenLinks(page)).toEqual([]);
  });
});
