// Engine addresses as operators write them, shown (GET /v1/status, `tagw status`, logs) without any
// part of a password or token: src/util/urlCredentials.ts, src/cluster/natsLink.ts.
import { describe, expect, it } from 'vitest';
import { natsConnectOptions, natsServersForLog } from '../../src/cluster/natsLink.js';
import { redactUrlCredentials } from '../../src/util/urlCredentials.js';

describe('engine addresses without their credentials', () => {
  it('redacts the whole password, whatever it holds, and secret query parameters', () => {
    expect(redactUrlCredentials('postgres://tagw:pw@db:5432/tagw')).toBe('postgres://[redacted]@db:5432/tagw');
    // An @ or / the operator did not percent-encode: node-postgres reads the password to the last @.
    expect(redactUrlCredentials('postgres://tagw:p@ssW0rd@db:5432/tagw')).toBe('postgres://[redacted]@db:5432/tagw');
    expect(redactUrlCredentials('postgres://tagw:pa/ssW0rd@db:5432/tagw')).toBe('postgres://[redacted]@db:5432/tagw');
    expect(redactUrlCredentials('postgres://db:5432/tagw?user=tagw&password=ssW0rd&sslmode=disable')).toBe('postgres://db:5432/tagw?user=tagw&password=[redacted]&sslmode=disable');
    expect(redactUrlCredentials('postgres://db/tagw?sslpassword=ssW0rd')).toBe('postgres://db/tagw?sslpassword=[redacted]');
    expect(redactUrlCredentials('nats://u:p@ss@a:4222, nats://tok@b:4222,nats://c:4222')).toBe('nats://[redacted]@a:4222, nats://[redacted]@b:4222,nats://c:4222');
    expect(redactUrlCredentials('http://127.0.0.1:8080')).toBe('http://127.0.0.1:8080');
  });

  it('NATS: servers for the log and the connection without credentials; the credentials as nats.js takes them', () => {
    expect(natsServersForLog('nats://u:p@ss@a:4222,tls://tok@b:4222, c:4222')).toBe('a:4222,b:4222,c:4222');
    expect(natsConnectOptions('nats://tagw:p%40ss@a:4222, nats://tagw:p%40ss@b:4222')).toEqual({ servers: ['nats://a:4222', 'nats://b:4222'], user: 'tagw', pass: 'p@ss' });
    expect(natsConnectOptions('nats://s3cretToken@a:4222')).toEqual({ servers: ['nats://a:4222'], token: 's3cretToken' });
    expect(natsConnectOptions('nats://a:4222,nats://b:4222')).toEqual({ servers: ['nats://a:4222', 'nats://b:4222'] });
  });
});
