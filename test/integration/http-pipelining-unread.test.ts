// A client that pipelines requests for a large answer and reads none: before, every answer of the
// read was buffered in the gateway (2000 x GET /openapi.json, ~70 KB sent, held ~830 MB until the
// client left; a 512 KB read of them, ~6 GB). Now a large answer the socket cannot take at once is
// streamed as the client reads, and a request pipelined behind it closes the connection (uWS), so
// one connection holds at most one large answer unread. A client that reads gets every byte.
import net from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

let t: TestGateway;
beforeAll(async () => { t = await startTestGateway({ shards: 1 }); });
afterAll(async () => { await t?.stop(); });

const port = () => Number(new URL(t.url).port);

const served = async (route: string): Promise<number> => {
  const text = await (await fetch(`${t.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith('tagw_http_route_duration_seconds_count{') && l.includes(`route="${route}"`));
  return line ? Number(line.split(' ').pop()) : 0;
};

it('500 pipelined GET /openapi.json never read: the gateway does not answer (and hold) them all', async () => {
  const before = await served('GET /openapi.json');
  const s = net.connect(port(), '127.0.0.1');
  s.pause(); // reads nothing
  s.on('error', () => {});
  await new Promise<void>((r) => s.once('connect', () => r()));
  s.write('GET /openapi.json HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(500));
  await new Promise((r) => setTimeout(r, 1000));
  const answered = (await served('GET /openapi.json')) - before;
  s.destroy();
  expect(answered).toBeLessThan(50); // what the kernel's socket buffers take (~10 here); before: all 500
}, 20_000);

it('3 pipelined GET /openapi.json read as they come: 3 whole answers', async () => {
  const s = net.connect(port(), '127.0.0.1');
  await new Promise<void>((r) => s.once('connect', () => r()));
  const chunks: Buffer[] = [];
  s.on('data', (d: Buffer) => chunks.push(d));
  s.write('GET /openapi.json HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(3));
  const statuses = await new Promise<number>((resolve) => {
    const timer = setTimeout(() => resolve(count()), 5000);
    const count = () => (Buffer.concat(chunks).toString('latin1').match(/HTTP\/1\.1 200 OK/g) ?? []).length;
    const len = () => Buffer.concat(chunks).length;
    s.on('data', () => { if (count() === 3 && len() > 3 * 400_000) { clearTimeout(timer); setTimeout(() => resolve(count()), 100); } });
    s.on('close', () => { clearTimeout(timer); resolve(count()); });
  });
  s.destroy();
  expect(statuses).toBe(3);
}, 20_000);

it('a client that reads slowly gets the whole large answer, and the connection stays usable', async () => {
  const s = net.connect(port(), '127.0.0.1');
  s.setNoDelay(true);
  await new Promise<void>((r) => s.once('connect', () => r()));
  const chunks: Buffer[] = [];
  s.on('data', (d: Buffer) => chunks.push(d));
  const text = () => Buffer.concat(chunks).toString('latin1');
  s.pause();
  s.write('GET /openapi.json HTTP/1.1\r\nHost: x\r\n\r\n');
  await new Promise((r) => setTimeout(r, 300));
  s.resume();
  const full = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`incomplete: ${text().length} bytes`)), 10_000);
    const check = () => {
      const all = text();
      const end = all.indexOf('\r\n\r\n');
      const m = /content-length: (\d+)/i.exec(all);
      if (end >= 0 && m && all.length - end - 4 >= Number(m[1])) { clearTimeout(timer); resolve(all); } else s.once('data', check);
    };
    check();
  });
  const body = full.slice(full.indexOf('\r\n\r\n') + 4);
  expect(JSON.parse(Buffer.from(body, 'latin1').toString('utf8')).openapi).toBe('3.0.3');
  chunks.length = 0;
  s.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
  await new Promise<void>((r) => { const c = () => (text().includes('\r\n\r\n') ? r() : s.once('data', c)); s.once('data', c); });
  expect(text()).toMatch(/^HTTP\/1\.1 200/);
  s.destroy();
}, 20_000);

it('500 pipelined GET /dashboard/vendor/uplot.js (~145 KB) never read: not all answered', async () => {
  const ops200 = async () => {
    const text = await (await fetch(`${t.url}/metrics`)).text();
    const line = text.split('\n').find((l) => l.startsWith('tagw_http_requests_total{family="ops",status="200"}'));
    return line ? Number(line.split(' ').pop()) : 0;
  };
  const before = await ops200();
  const s = net.connect(port(), '127.0.0.1');
  s.pause();
  s.on('error', () => {});
  await new Promise<void>((r) => s.once('connect', () => r()));
  s.write('GET /dashboard/vendor/uplot.js HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(500));
  await new Promise((r) => setTimeout(r, 1000));
  const answered = (await ops200()) - before;
  s.destroy();
  expect(answered).toBeLessThan(50); // before: all 500 (and the /metrics read of `before`)
}, 20_000);
