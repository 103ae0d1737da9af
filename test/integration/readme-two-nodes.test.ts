// The README's "More than one machine" block, run: NATS, a throwaway PostgreSQL, the simulator and two
// nodes on one box, a key made through one node, an account bound through the other, the same order
// through both (placed once, replayed once), `tagw status`, then the shutdown. The block is run as
// written, but for what a test machine needs: free ports for its fixed ones, a temp directory for
// its /tmp paths and data directories, no `apt-get` (nats-server is there or this fails naming it),
// and the test build (.test-dist, the same sources) for `npm run build` and dist/.
import { spawnSync } from 'node:child_process';
import { chmodSync } from 'node:fs';
import { afterEach, expect, it } from 'vitest';
import { readmeShellBlockAfter } from '../helpers/readme.js';
import { BUILD_DIR, ROOT } from '../helpers/build.js';
import { freePort } from '../helpers/engines.js';
import { cleanupProcesses, tempDir } from '../helpers/process.js';

afterEach(cleanupProcesses);


it("the README's two nodes on one box: the key works on both, the order is placed once and replayed through the other node, status shows both", async () => {
  for (const tool of ['nats-server', 'openssl', 'runuser']) {
    if (spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0) throw new Error(`${tool} is not installed: apt-get install -y ${tool === 'runuser' ? 'util-linux' : tool}`);
  }
  const dir = tempDir('tagw-readme-cluster-');
  chmodSync(dir, 0o1777); // as /tmp is: the postgres user makes initdb's data directory in it
  const ports = { 4222: await freePort(), 5433: await freePort(), 4510: await freePort(), 8080: await freePort(), 8081: await freePort() };
  let block = readmeShellBlockAfter('## More than one machine');
  expect(block).toMatch(/^apt-get install -y nats-server/m);
  block = block
    .replace(/^apt-get install .*$/m, ':')
    .replace(/^npm run build\b.*$/m, ':')
    .replaceAll('dist/src/', `${BUILD_DIR}/src/`)
    .replaceAll('/tmp/tagw-', `${dir}/tagw-`)
    .replace(/(?:\.\/)?\bdata-([ab])\b/g, `${dir}/data-$1`)
    .replace(/\b(4222|5433|4510|8080|8081)\b/g, (p) => String(ports[Number(p) as keyof typeof ports]));
  const script = [
    // Whatever happens, nothing the block started outlives it (pg_ctl's server is a daemon).
    `trap 'kill $(jobs -p) 2>/dev/null; [ -n "$PG" ] && runuser -u postgres -- "$PG/pg_ctl" -D ${dir}/tagw-pg stop -m immediate >/dev/null 2>&1' EXIT`,
    block,
  ].join('\n');
  const run = spawnSync('bash', ['-c', script], { cwd: ROOT, env: { PATH: process.env.PATH, HOME: process.env.HOME }, encoding: 'utf8', timeout: 150_000 });
  const out = `${run.stdout}\n${run.stderr}`;
  expect(run.error, out).toBeUndefined();

  // The same clientOrderId through each node: two 200s, one of them a replay; each answered by its node.
  const orders = out.split(/\r?\n/).filter((l) => /^(HTTP\/1\.1|x-tagw-node|idempotent-replay)/i.test(l));
  const answers = orders.filter((l) => l.startsWith('HTTP/1.1'));
  expect(answers.slice(-2), out).toEqual(['HTTP/1.1 200 OK', 'HTTP/1.1 200 OK']);
  expect(orders.filter((l) => /^idempotent-replay: true/i.test(l)), out).toHaveLength(1);
  // Each node answered its /healthz (the block waits for both) and one of the two orders.
  expect(orders.filter((l) => /^x-tagw-node: node-a\s*$/i.test(l)), out).toHaveLength(2);
  expect(orders.filter((l) => /^x-tagw-node: node-b\s*$/i.test(l)), out).toHaveLength(2);
  // tagw status, through node-a: both nodes live, the account owned by one of them, the order forwarded or served.
  expect(out).toMatch(/^cluster: +2 live nodes: node-a [01], node-b [01]; 0 accounts without owner$/m);
  expect(out).toMatch(/^calls: +(1 forwarded, 0 served|0 forwarded, 1 served) for other nodes/m);
  // The shutdown the block ends with: the nodes first (one hands its account over), then PostgreSQL.
  expect(out.match(/"msg":"gateway stopped"/g), out).toHaveLength(2);
  expect(out).toMatch(/server stopped/);
}, 180_000);
