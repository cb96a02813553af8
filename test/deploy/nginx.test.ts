import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import net from 'node:net';
import tls from 'node:tls';
import path from 'node:path';
import t from 'tap';
import { request, single } from '../helpers/captures.ts';
import { lmdbOpen } from '../helpers/lmdb.ts';
import { startApi } from '../helpers/api.ts';
import { makeToken, ROOT, tempDir } from '../helpers/server.ts';
import { waitFor } from '../helpers/wait.ts';
import { missingTool } from '../helpers/required.ts';

// The nginx snippet of docs/operations.md (deploy/nginx-liveness.conf), run for real in front of the
// service: TLS at nginx, the client's address carried in X-Forwarded-For, a spoofed header
// dropped. Needs nginx (`apt-get install nginx`); skipped, saying so, without it.
const NGINX = '/usr/sbin/nginx';

async function freePort(): Promise<number> {
  const s = net.createServer().listen(0, '127.0.0.1');
  await new Promise((r) => s.once('listening', r));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}

t.test('nginx snippet: TLS at the proxy, client address through X-Forwarded-For', async (t) => {
  if (!fs.existsSync(NGINX)) return missingTool(t, 'nginx not installed');
  // the service's app (and engine) in process on its real store: test/helpers/api.ts (was one server start)
  const s = await startApi({ engine: 'real', ready: true, env: { TRUSTED_PROXIES: '127.0.0.1' } });
  t.teardown(() => s.stop());
  const dir = tempDir('lv-nginx-');
  const cert = path.join(dir, 'cert.pem');
  const key = path.join(dir, 'key.pem');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '2', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', key, '-out', cert], { stdio: 'ignore' });
  const port = await freePort();
  const site = fs
    .readFileSync(path.join(ROOT, 'deploy/nginx-liveness.conf'), 'utf8')
    .replace('server 127.0.0.1:8080;', `server 127.0.0.1:${s.port};`)
    .replace('listen 443 ssl http2;', `listen 127.0.0.1:${port} ssl http2;`)
    .replace('/etc/liveness/tls/fullchain.pem', cert)
    .replace('/etc/liveness/tls/privkey.pem', key);
  fs.writeFileSync(path.join(dir, 'site.conf'), site);
  // a throwaway main config around the site: no daemon, everything under the temp prefix
  fs.writeFileSync(
    path.join(dir, 'nginx.conf'),
    `user root; worker_processes 1; pid ${dir}/nginx.pid; error_log ${dir}/error.log; events {}\n` +
      `http { access_log off; client_body_temp_path ${dir}/body; proxy_temp_path ${dir}/proxy; include ${dir}/site.conf; }\n`,
  );
  const nginx = spawn(NGINX, ['-p', dir, '-c', path.join(dir, 'nginx.conf'), '-g', 'daemon off;'], { stdio: ['ignore', 'ignore', 'pipe'] });
  let nginxErr = '';
  nginx.stderr!.on('data', (d) => (nginxErr += d));
  const nginxExit = new Promise((r) => nginx.on('exit', r));
  t.teardown(async () => {
    nginx.kill('SIGQUIT');
    await nginxExit;
  });
  // wait for nginx to accept, bounded
  await waitFor(async () => {
    if (nginx.exitCode !== null) throw new Error(`nginx exited: ${nginxErr}`);
    return new Promise<boolean>((r) => net.connect(port, '127.0.0.1').once('connect', function (this: net.Socket) { this.destroy(); r(true); }).once('error', () => r(false)));
  }, { timeoutMs: 20_000, intervalMs: 100, what: `nginx to accept (${nginxErr})` });

  const { token } = await makeToken(s, ['rgb_liveness:5:day']);
  const body = request([single({ id: 'via-nginx' })]);
  // the client connects from 127.0.0.5 (any 127/8 address is loopback) and lies in its header
  const answer = await new Promise<{ status: number; rid: string; text: string }>((resolve, reject) => {
    const req = https.request(
      { host: '127.0.0.1', port, method: 'POST', path: '/v1/modules/rgb_liveness/verify', ca: fs.readFileSync(cert), localAddress: '127.0.0.5', agent: false,
        headers: { authorization: `Bearer ${token}`, 'content-type': body.contentType, 'x-forwarded-for': '81.2.69.160' } },
      (res) => {
        let text = '';
        res.on('data', (d) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode!, rid: res.headers['x-request-id'] as string, text }));
      },
    );
    req.on('error', reject);
    req.end(body.body);
  });
  t.equal(answer.status, 200, answer.text);
  const db = lmdbOpen(s.dataDir);
  t.teardown(() => db.close());
  const row = await waitFor(() => [...db.audit.getRange({})].map((e) => e.value as any).find((a) => a.request_id === answer.rid), { timeoutMs: 10_000, what: 'the audit row of the call' });
  t.equal(row?.client_ip, '127.0.0.5', 'the audit names the real client, not nginx and not the spoofed header');

  // Header names that uWebSockets.js answers with nothing (holding the connection 8-12 s) are
  // dropped by nginx: the request is answered.
  const odd = await new Promise<number>((resolve, reject) => {
    const req = https.request(
      { host: '127.0.0.1', port, method: 'GET', path: '/health/live', ca: fs.readFileSync(cert), localAddress: '127.0.0.5', agent: false,
        headers: { 'x_under': '1', 'a.b': '1', 'a!b': '1', 'a#b': '1', 'a$b': '1', 'a%b': '1', 'a&b': '1', "a'b": '1', 'a*b': '1', 'a+b': '1', 'a^b': '1' } },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode!));
      },
    );
    req.on('error', reject);
    req.end();
  });
  t.equal(odd, 200, "a request with header names uWS cannot parse (`_ . ! # $ % & ' * + ^`) is answered through nginx");

  // limit_conn: one address holding the shipped number of requests in progress (logins whose
  // declared body never comes: the service waits for it until uWS's timer, 12 s or more) gets
  // nginx's 503 server_busy, in the service's format, for more; another address is still served.
  const limit = Number(/limit_conn liveness_per_address (\d+);/.exec(site)?.[1]);
  t.ok(limit > 0, `the shipped config caps connections per address (${limit})`);
  const held: tls.TLSSocket[] = [];
  t.teardown(() => held.forEach((c) => c.destroy()));
  const refusals: string[] = [];
  const ca = fs.readFileSync(cert);
  await Promise.all(Array.from({ length: limit + 5 }, async () => {
    // from 127.0.0.6: the TCP socket is made first (tls.connect's typings lack localAddress)
    const c = tls.connect({ socket: net.connect({ host: '127.0.0.1', port, localAddress: '127.0.0.6' }), host: '127.0.0.1', ca });
    held.push(c);
    let buf = '';
    c.on('data', (d) => {
      buf += d.toString();
      if (buf.includes('\r\n\r\n') && buf.includes('}')) refusals.push(buf);
    });
    c.on('error', () => {});
    await new Promise((r) => c.once('secureConnect', r));
    c.write('POST /auth/login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n');
  }));
  await waitFor(() => refusals.length >= 5, { timeoutMs: 30_000, what: 'nginx to refuse the requests past its limit' });
  const first = refusals[0]!;
  t.match(first, /^HTTP\/1\.1 503 /, 'refused 503');
  t.match(first, /\r\nRetry-After: 1\r\n/i, 'with Retry-After');
  t.match(first, /"code":"server_busy"/, 'in the service\'s error format');
  t.match(first, /"request_id":"[0-9a-f]{32}"/, "nginx's own refusal (its request id), not the service's");
  const other = await new Promise<number>((resolve, reject) => {
    const req = https.request({ host: '127.0.0.1', port, method: 'GET', path: '/health/live', ca: fs.readFileSync(cert), localAddress: '127.0.0.5', agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode!));
    });
    req.on('error', reject);
    req.end();
  });
  t.equal(other, 200, 'another address is served meanwhile');
});
