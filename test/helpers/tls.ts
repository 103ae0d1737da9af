// Certificates for the TLS tests, made at test time with openssl: a test CA, two server
// certificates it signed for localhost and 127.0.0.1 (a, b: a renewal), the key of a encrypted
// with a passphrase, and an unrelated self-signed CA and certificate (not trusted by anyone).
import { spawnSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';

export interface TestCerts {
  ca: string;
  a: { cert: string; key: string; encryptedKey: string };
  b: { cert: string; key: string };
  rogue: { ca: string; cert: string; key: string };
  passphrase: string;
}

function openssl(dir: string, args: string[]): void {
  const r = spawnSync('openssl', args, { cwd: dir, encoding: 'utf8' });
  if (r.error) throw new Error(`the TLS tests need openssl (apt-get install -y openssl): ${r.error.message}`);
  if (r.status !== 0) throw new Error(`openssl ${args.join(' ')}: ${r.stderr}`);
}

export function makeCerts(dir: string): TestCerts {
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  writeFileSync(join(dir, 'san.ext'), 'subjectAltName=DNS:localhost,IP:127.0.0.1\n');
  const ca = (name: string) => openssl(dir, ['req', '-x509', ...ec, '-keyout', `${name}.key`, '-out', `${name}.crt`, '-days', '2', '-subj', `/CN=${name}`]);
  const leaf = (name: string, caName: string) => {
    openssl(dir, ['req', ...ec, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', '/CN=localhost']);
    openssl(dir, ['x509', '-req', '-in', `${name}.csr`, '-CA', `${caName}.crt`, '-CAkey', `${caName}.key`, '-CAcreateserial', '-out', `${name}.crt`, '-days', '2', '-extfile', 'san.ext']);
  };
  ca('test-ca');
  leaf('a', 'test-ca');
  leaf('b', 'test-ca');
  ca('rogue-ca');
  leaf('rogue', 'rogue-ca');
  const passphrase = 'correct horse battery';
  openssl(dir, ['pkcs8', '-topk8', '-in', 'a.key', '-out', 'a-enc.key', '-v2', 'aes-256-cbc', '-passout', `pass:${passphrase}`]);
  const p = (f: string) => join(dir, f);
  return {
    ca: p('test-ca.crt'),
    a: { cert: p('a.crt'), key: p('a.key'), encryptedKey: p('a-enc.key') },
    b: { cert: p('b.crt'), key: p('b.key') },
    rogue: { ca: p('rogue-ca.crt'), cert: p('rogue.crt'), key: p('rogue.key') },
    passphrase,
  };
}

export interface HttpsAnswer {
  status: number;
  body: any;
  /** SHA-256 fingerprint of the certificate the server presented. */
  fingerprint: string;
}

/** One HTTPS request on a fresh connection (a new TLS handshake each time), trusting `ca`; SNI
 *  only with `servername` (Node sends none for an IP address). */
export function httpsJson(url: string, method: string, path: string, opts: { ca: Buffer; headers?: Record<string, string>; body?: unknown; servername?: string }): Promise<HttpsAnswer> {
  const u = new URL(url);
  const body = opts.body === undefined ? undefined : JSON.stringify(opts.body);
  return new Promise((resolve, reject) => {
    const req = request({
      host: u.hostname, port: u.port, path, method, ca: opts.ca, agent: false, ...(opts.servername ? { servername: opts.servername } : {}),
      headers: { ...opts.headers, ...(body ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } : {}) },
    }, (res) => {
      const fingerprint = (res.socket as TLSSocket).getPeerCertificate().fingerprint256;
      let text = '';
      res.on('data', (d: Buffer) => (text += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode!, body: text.startsWith('{') || text.startsWith('[') ? JSON.parse(text) : text, fingerprint }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** SHA-256 fingerprint of a PEM certificate file, as getPeerCertificate() spells it. */
export function fingerprintOf(pem: Buffer): string {
  return new X509Certificate(pem).fingerprint256;
}
