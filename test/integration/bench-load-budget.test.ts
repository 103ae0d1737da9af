// bench/lib/httpLoadWorker.ts's budget: `maxSent` caps what is sent, warm-up included, and ends the
// run when all of it is answered, so the http bench's order accounts never get more orders than
// their margin holds however fast the gateway (it once sent past it during a fast warm-up).
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { runLoad } from '../../bench/lib/httpLoadWorker.js';

let close: (() => void) | undefined;
afterEach(() => close?.());

describe('bench load budget', () => {
  it('sends no more than maxSent requests, warm-up included, and stops once they are answered', async () => {
    let received = 0;
    const server = createServer((_req, res) => {
      received++;
      res.setHeader('content-length', '2');
      // Each connection's first answer comes after the warm-up: the rest of the budget is measured
      // however fast this machine would otherwise answer all 400 within the warm-up.
      if (received <= 4) setTimeout(() => res.end('ok'), 150);
      else res.end('ok');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    close = () => server.close();
    const t0 = performance.now();
    const r = await runLoad({ port: (server.address() as AddressInfo).port, path: '/x', connections: 4, warmupMs: 50, durationMs: 20_000, maxSent: 400 });
    expect(received).toBe(400);
    expect(r.sent).toBe(400);
    // The warm-up's answers are not measured; the measured ones are the rest of the budget.
    expect(r.requests).toBeGreaterThan(0);
    expect(r.requests).toBeLessThanOrEqual(400);
    expect(r.errors).toBe(0);
    expect(performance.now() - t0).toBeLessThan(10_000);
  });
});
