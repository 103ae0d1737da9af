// A key's value pasted where it does not belong (a path, an id, a parameter, a socket message) is
// not shown back nor logged: its id stays (which key it was), its secret goes (src/util/redactKeys.ts).
import { describe, expect, it } from 'vitest';
import { generateKey } from '../../src/auth/keys.js';
import { apiError, toWire } from '../../src/errors.js';
import { createLogger } from '../../src/log.js';
import { errorData } from '../../src/stream/frames.js';
import { redactAlso } from '../../src/util/redactKeys.js';

const api = generateKey('api');
const mgmt = generateKey('management');

describe('a key value out of place', () => {
  it('is logged with its id and without its secret, wherever it stands in the line', () => {
    const lines: string[] = [];
    const log = createLogger('debug', {}, (l) => lines.push(l));
    log.debug('request', { method: 'DELETE', path: `/v1/keys/${api.value}`, status: 404 });
    log.warn(`no route for GET /${mgmt.value}`, { err: new Error(`bad ${api.value}`), nested: { list: [`x ${api.value}`] } });
    log.child({ path: `/${api.value}` }).info('child');
    for (const line of lines) {
      expect(line).not.toContain(api.secret);
      expect(line).not.toContain(mgmt.secret);
    }
    expect(lines[0]).toContain(`tagw_k_${api.id}_`);
  });

  it('is not in an error message shown to a client, nor in a socket ERROR frame', () => {
    const e = apiError('ROUTE_NOT_FOUND', `no route for GET /${api.value}`);
    expect(JSON.stringify(e.toBody())).not.toContain(api.secret);
    expect(JSON.stringify(toWire(e))).not.toContain(api.secret);
    expect(e.message).toContain(`tagw_k_${api.id}_`);
    const frame = errorData('BAD_REQUEST', `subscribe ${mgmt.value}: no such symbol`, { action: 'subscribe', symbol: mgmt.value, apiKey: api.value });
    expect(frame).not.toContain(api.secret);
    expect(frame).not.toContain(mgmt.secret);
  });

  it('a management key of the operator\'s choosing (no key shape), once named, likewise', () => {
    const chosen = 'operator-chosen-management-key-0123';
    redactAlso(chosen);
    const lines: string[] = [];
    createLogger('debug', {}, (l) => lines.push(l)).debug('request', { path: `/v1/keys/${chosen}/limits` });
    expect(lines[0]).not.toContain(chosen);
    expect(JSON.stringify(apiError('METHOD_NOT_ALLOWED', `/v1/seats/${chosen} answers GET`).toBody())).not.toContain(chosen);
  });
});
