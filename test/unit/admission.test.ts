// admit() reads the client's address (a copy out of uWS per read) only while some address is
// blocked by the failed-auth throttle, and noteRefusal() only for a 401: the hot path of every
// request pays for neither, and a blocked address is still refused.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Authenticator } from '../../src/auth/authenticator.js';
import { AuthThrottle } from '../../src/auth/throttle.js';
import { ApiError, apiError } from '../../src/errors.js';
import { admit, noteRefusal } from '../../src/http/admission.js';
import { openDb } from '../../src/store/db.js';
import { TenancyStore } from '../../src/store/tenancy.js';

const dir = mkdtempSync(join(tmpdir(), 'tagw-admission-'));
const db = openDb(dir);
afterAll(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

const KEY = 'admission-test-management-key-0123';
const auth = new Authenticator(new TenancyStore(db), { value: KEY, customerId: 'c1' });
const headers = { 'x-management-key': KEY };

/** A client whose address counts its reads. */
function client(ip: string) {
  return { reads: 0, get ip() { this.reads++; return ip; } };
}

describe('admission reads the client address only when it matters', () => {
  it('admits without reading the address while no address is blocked, and refuses a blocked one after reading it', () => {
    let now = 1_000_000;
    const throttle = new AuthThrottle({ limit: 2, windowMs: 60_000, blockMs: 30_000, clock: { now: () => now } });
    const deps = { auth, throttle, inflight: { draining: false } };
    const a = client('10.0.0.1');
    expect(admit(deps, a, 'management', headers, true)?.kind).toBe('management');
    expect(a.reads).toBe(0);

    // Two 401s block 10.0.0.1; a 400 is not a failed authentication and reads nothing.
    const bad = client('10.0.0.1');
    noteRefusal(deps, bad, apiError('BAD_REQUEST', 'x'));
    expect(bad.reads).toBe(0);
    noteRefusal(deps, bad, apiError('INVALID_API_KEY', 'x'));
    noteRefusal(deps, bad, apiError('INVALID_API_KEY', 'x'));
    expect(bad.reads).toBe(2);

    const blocked = client('10.0.0.1');
    let refused: unknown;
    try {
      admit(deps, blocked, 'management', headers, true);
    } catch (e) {
      refused = e;
    }
    expect(refused).toBeInstanceOf(ApiError);
    expect((refused as ApiError).code).toBe('AUTH_THROTTLED');
    expect(blocked.reads).toBe(1);

    const other = client('10.0.0.2');
    expect(admit(deps, other, 'management', headers, true)?.kind).toBe('management');
    expect(other.reads).toBe(1);

    // Once the block lifted, nothing is read again.
    now += 31_000;
    const later = client('10.0.0.1');
    expect(admit(deps, later, 'management', headers, true)?.kind).toBe('management');
    expect(later.reads).toBe(0);
  });
});
