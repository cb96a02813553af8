import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import http from 'node:http';
import path from 'node:path';
import t from 'tap';
import { request, single } from '../helpers/captures.ts';
import { lmdbOpen } from '../helpers/lmdb.ts';
import { makeToken, startServer, tempDir } from '../helpers/server.ts';
import { waitFor } from '../helpers/wait.ts';

// A certificate made here with openssl (encrypted key, so the passphrase path is exercised),
// served by uWS's SSLApp and checked by Node's https client against that certificate. A real
// server: the process's start over TLS (its start line, the TLS settings checked before any
// worker listens, several API workers on one TLS port); the cipher list and HSTS are held in
// process by tls-hardening.test.ts.
const dir = tempDir('lv-tls-');
const cert = path.join(dir, 'cert.pem');
const key = path.join(dir, 'key.pem');
execFileSync('openssl', [
  'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-days', '2', '-subj', '/CN=127.0.0.1',
  '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', key, '-out', cert, '-passout', 'pass:correct horse',
], { stdio: 'ignore' });
const ca = fs.readFileSync(cert);

interface Answer { status: number; headers: http.IncomingHttpHeaders; body: string; authorized: boolean }

function call(port: number, method: string, p: string, headers: Record<string, string> = {}, body?: Uint8Array | string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = https.request({ host: '127.0.0.1', port, method, path: p, ca, headers, agent: false }, (res) => {
      let text = '';
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: text, authorized: (res.socket as import('node:tls').TLSSocket).authorized }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

t.test('TLS_CERT_FILE/TLS_KEY_FILE serve HTTPS; the session cookie is Secure by default', async (t) => {
  const s = await startServer({
    // VERIFY_SLOTS set apart from WORKERS (2): the start line must name it (issue 42, item 4;
    // test/http/verify-slots.test.ts holds its admission rules in process)
    env: { TLS_CERT_FILE: cert, TLS_KEY_FILE: key, TLS_KEY_PASSPHRASE: 'correct horse', TRUSTED_PROXIES: '127.0.0.0/8', ADMIN_USERNAME: 'root', ADMIN_PASSWORD: 'a-long-password', VERIFY_SLOTS: '3' },
  });
  t.teardown(() => s.stop());
  const listening = s.logLines().find((l) => l.msg === 'listening');
  t.equal(listening?.tls, true, 'the listening line says TLS');
  t.same([listening?.workers, listening?.verify_slots], [2, 3], 'and names the API workers and VERIFY_SLOTS, each as set');

  const live = await call(s.port, 'GET', '/health/live');
  t.equal(live.status, 200);
  t.ok(live.authorized, 'the client verified the certificate chain');

  const plain = await new Promise<string>((resolve) => {
    const req = http.get({ host: '127.0.0.1', port: s.port, path: '/health/live', agent: false }, (res) => resolve(`answered ${res.statusCode}`));
    req.on('error', () => resolve('refused'));
  });
  t.equal(plain, 'refused', 'plain HTTP gets no answer on the TLS port');

  const login = await call(s.port, 'POST', '/auth/login', { 'content-type': 'application/json' }, JSON.stringify({ username: 'root', password: 'a-long-password' }));
  t.equal(login.status, 200);
  const cookie = String(login.headers['set-cookie']);
  t.match(cookie, /lv_session=/);
  t.match(cookie, /; Secure/, 'Secure on by default under TLS');

  // a range of trusted proxies (the loopback /8) lets X-Forwarded-For name the client
  const { token } = await makeToken(s, ['rgb_liveness:5:day']);
  const body = request([single({ id: 'tls-1' })]);
  await waitFor(async () => (await call(s.port, 'GET', '/health/ready')).status === 200, { timeoutMs: 120_000, intervalMs: 200, what: '/health/ready over TLS' });
  const verify = await call(s.port, 'POST', '/v1/modules/rgb_liveness/verify', { authorization: `Bearer ${token}`, 'content-type': body.contentType, 'x-forwarded-for': '81.2.69.160' }, body.body);
  t.equal(verify.status, 200, 'a verify call over TLS');
  t.equal(JSON.parse(verify.body).charged_units, 1);
  const rid = verify.headers['x-request-id'] as string;
  const db = lmdbOpen(s.dataDir);
  t.teardown(() => db.close());
  const row = await waitFor(() => [...db.audit.getRange({})].map((e) => e.value as any).find((a) => a.request_id === rid), { timeoutMs: 10_000, what: 'the audit row of the call' });
  t.match(row, { client_ip: '81.2.69.160', country: 'GB' }, 'audit names the client behind a proxy in the trusted range');
});

t.test('COOKIE_SECURE=0 still turns Secure off explicitly under TLS', async (t) => {
  const { loadConfig } = await import('../../src/config/index.ts');
  t.equal(loadConfig({ TLS_CERT_FILE: cert, TLS_KEY_FILE: key }).COOKIE_SECURE, true);
  t.equal(loadConfig({ TLS_CERT_FILE: cert, TLS_KEY_FILE: key, COOKIE_SECURE: '0' }).COOKIE_SECURE, false);
  t.equal(loadConfig({}).COOKIE_SECURE, false);
  t.throws(() => loadConfig({ TLS_CERT_FILE: cert }), /TLS_CERT_FILE and TLS_KEY_FILE must be set together/);
});

// One refused start through the process (its exit code and message, the passphrase not echoed);
// the other refusals are the same check (checkTls, which src/main.ts runs before any thread
// starts) called in process: a refused start costs a process start-up (issue 43).
t.test('a wrong passphrase or unreadable file refuses to start with a message', async (t) => {
  const { runServiceToExit } = await import('../helpers/server.ts');
  const wrong = await runServiceToExit({ PORT: '0', TLS_CERT_FILE: cert, TLS_KEY_FILE: key, TLS_KEY_PASSPHRASE: 'wrong' });
  t.equal(wrong.code, 2);
  t.match(wrong.out, /certificate and key do not load together/);
  t.notMatch(wrong.out, /wrong/, 'the passphrase is not echoed');
  // the check's own module: the http surface's index loads the whole app
  const { checkTls } = await import('../../src/http/tls.ts');
  const refusal = (files: { TLS_CERT_FILE: string; TLS_KEY_FILE: string; TLS_KEY_PASSPHRASE?: string }) => {
    try {
      checkTls(files);
      return 'accepted';
    } catch (e) {
      return (e as Error).message;
    }
  };
  t.equal(refusal({ TLS_CERT_FILE: cert, TLS_KEY_FILE: key, TLS_KEY_PASSPHRASE: 'correct horse' }), 'accepted', 'the right passphrase loads');
  t.match(refusal({ TLS_CERT_FILE: path.join(dir, 'nope.pem'), TLS_KEY_FILE: key, TLS_KEY_PASSPHRASE: 'correct horse' }), /^TLS_CERT_FILE: cannot read .*nope\.pem \(ENOENT\)$/);
  t.match(refusal({ TLS_CERT_FILE: cert, TLS_KEY_FILE: path.join(dir, 'nope.pem'), TLS_KEY_PASSPHRASE: 'correct horse' }), /^TLS_KEY_FILE: cannot read .*nope\.pem \(ENOENT\)$/);
  t.match(refusal({ TLS_CERT_FILE: key, TLS_KEY_FILE: key, TLS_KEY_PASSPHRASE: 'correct horse' }), /certificate and key do not load together/, 'a key given as the certificate');
});
