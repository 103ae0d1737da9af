// The README's "A short tour with curl", run as a newcomer would: its shell block, as written, in bash,
// from a directory whose ./data is the gateway's DATA_DIR, against the gateway started as `npm start`
// starts it (the compiled build, its management key in data/bootstrap.json). Every curl of the block
// writes its response headers to a file of its own (a wrapper adds -D), so each answer's status is
// checked: a tour line that 4xxs (a renamed route, a field the API no longer takes) fails here
// rather than in a newcomer's shell.
import { spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { readmeShellBlockAfter } from '../helpers/readme.js';
import { cleanupProcesses, ROOT, startProcess, tempDir } from '../helpers/process.js';

afterEach(cleanupProcesses);

it("the README's curl tour runs as written: every request answered 2xx, the replay marked, each id made; then its WebSocket client streams", async () => {
  const block = readmeShellBlockAfter('## A short tour with curl');
  const streaming = readmeShellBlockAfter('## Streaming with a WebSocket client');
  if (spawnSync('curl', ['--version']).error) throw new Error('curl is not installed: apt-get install -y curl (the README tour runs it)');
  const home = tempDir('tagw-readme-');
  const headers = join(home, 'headers');
  mkdirSync(headers);
  // The tour runs "from the repository directory": its ./data is the gateway's, and `require('ws')`
  // finds the repository's packages.
  symlinkSync(join(ROOT, 'node_modules'), join(home, 'node_modules'));
  const gw = startProcess({}, join(home, 'data'));
  const port = new URL(await gw.listening).port;

  const script = [
    'set -e',
    // Each curl of the block, as written, plus a file for its response headers (statuses checked below).
    `curl() { command curl -D "$(mktemp -p '${headers}')" "$@"; }`,
    block,
    'echo "TOUR-IDS key=${#KEY} id=$ID handle=${#HANDLE} seat=$SEAT"',
    // The streaming block, in the same shell (it uses the tour's B, KEY and ID); it runs until
    // Ctrl-C, here 3 s.
    `${streaming} &`,
    'STREAM=$!; sleep 3; kill $STREAM',
  ].join('\n');
  const run = spawnSync('bash', ['-c', script], { cwd: home, env: { PATH: process.env.PATH, HOME: home, PORT: port }, encoding: 'utf8', timeout: 60_000 });
  const out = `${run.stdout}\n${run.stderr}`;
  expect(run.status, out).toBe(0);

  const statuses = readdirSync(headers).map((f) => {
    const text = readFileSync(join(headers, f), 'utf8');
    return { status: Number(/^HTTP\/[\d.]+ (\d{3})/.exec(text)?.[1]), head: text.split('\r\n')[0] };
  });
  const curls = block.split('\n').filter((l) => /(^|\$\()curl /.test(l.trim()) || /\$\(curl /.test(l)).length;
  expect(statuses.length, out).toBe(curls);
  expect(statuses.filter((s) => !(s.status >= 200 && s.status < 300)), out).toEqual([]);

  // The outputs the tour's comments promise.
  expect(out).toMatch(/idempotent-replay: true/i); // the second OrderSend, grepped by the tour
  const ids = /TOUR-IDS key=(\d+) id=(\S+) handle=(\d+) seat=(\S+)/.exec(out);
  expect(ids, out).not.toBeNull();
  expect(Number(ids![1])).toBeGreaterThan(20);
  expect(ids![2]).toMatch(/^[0-9a-f-]{36}$/);
  expect(Number(ids![3])).toBeGreaterThan(10);
  expect(ids![4]).toMatch(/^[0-9a-f-]{36}$/);
  expect(out).toMatch(/"ticket":\s*\d+/); // the order placed
  expect(out).toMatch(/^# HELP tagw_/m); // /metrics
  expect(out).toMatch(/"openapi"/); // /openapi.json
  // What the streaming section says comes: the P5 snapshot pair, SUBSCRIBED, then quotes.
  const frames = out.split('\n').filter((l) => l.startsWith('{"type":')).map((l) => (JSON.parse(l) as { type: string }).type);
  expect(frames.slice(0, 2), out).toEqual(['POSITIONS', 'ORDERS']);
  expect(frames, out).toContain('SUBSCRIBED');
  expect(frames, out).toContain('QUOTE');
}, 90_000);
