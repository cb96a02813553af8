// npm run image:test (issue 30): the image that npm run image:build made, run by podman
// through deploy/compose.yaml: two nodes on Node 24 sharing one PostgreSQL (the image of
// deploy/container/postgres.Containerfile). Not part of npm test: it needs podman,
// podman-compose and the images, and takes a few minutes; .ci/run runs it after npm test.
//
// What it shows: the HTTP build that serves in the image is 20.57 on Node 24; the image's
// HEALTHCHECK passes; a verify call through the client package is answered and metered;
// usage and idempotency are shared by the nodes; a SIGTERM while verify calls are in flight
// drains them (each answered 200 and settled) and the process exits 0, with no reservation
// left pending and the ledger consistent.

import { spawn, spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { createVerifyClient } from '../../src/client/index.ts';
import { request, single } from '../helpers/captures.ts';
import { ROOT } from '../helpers/server.ts';
import { waitFor } from '../helpers/wait.ts';

const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string };
// the tags scripts/image-build.mjs gives, and the ones deploy/compose.yaml names
const IMAGE_TAG = `localhost/liveness-service:${pkg.version}`;
const POSTGRES_TAG = 'localhost/liveness-postgres:17';
const PROJECT = `lvimg${process.pid}`;
const COMPOSE = path.join(ROOT, 'deploy/compose.yaml');
const METRICS_TOKEN = `metrics-${randomUUID()}`;
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'lv-image-'));

// Podman's default RLIMIT_NOFILE (1048576) is above the hard limit of many hosts (CI's
// included), and runc may not raise a limit: the containers get the host's own limits.
const hardNofile = Number(spawnSync('sh', ['-c', 'ulimit -Hn'], { encoding: 'utf8' }).stdout.trim()) || 65536;
// runc where installed: crun fails on hosts with hybrid cgroups (this project's CI).
const runc = spawnSync('sh', ['-c', 'command -v runc'], { stdio: 'ignore' }).status === 0;
fs.writeFileSync(path.join(work, 'containers.conf'), `[containers]\ndefault_ulimits = ["nofile=${hardNofile}:${hardNofile}", "nproc=4096:4096"]\n${runc ? '[engine]\nruntime = "runc"\n' : ''}`);

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });
}

const ports = { node1: await freePort(), node2: await freePort() };
const env = {
  ...process.env,
  CONTAINERS_CONF: path.join(work, 'containers.conf'),
  POSTGRES_PASSWORD: randomUUID(),
  METRICS_TOKEN,
  NODE1_PORT: String(ports.node1),
  NODE2_PORT: String(ports.node2),
  // two nodes and PostgreSQL share the test host's cores: the fewest threads that still give
  // the drain test its 3 concurrent calls (2 slots per API worker)
  WORKERS: '2',
  INFERENCE_THREADS: '1',
};
const url = (node: 'node1' | 'node2') => `http://127.0.0.1:${ports[node]}`;
const container = (service: string) => `${PROJECT}_${service}_1`;

function sh(cmd: string, args: string[], input?: string): { code: number; stdout: string; stderr: string } {
  const r = spawnSync(cmd, args, { env, encoding: 'utf8', input, maxBuffer: 64 << 20 });
  return { code: r.status ?? -1, stdout: r.stdout ?? '', stderr: r.stderr ?? '' };
}

function compose(...args: string[]) {
  return sh('podman-compose', ['-p', PROJECT, '-f', COMPOSE, ...args]);
}

function logs(service: string): string {
  const r = sh('podman', ['logs', container(service)]);
  return r.stdout + r.stderr;
}

async function cli(service: string, args: string[]): Promise<{ code: number; json: any; stderr: string }> {
  // the CLI opens its own connection, with the store's 5 s connect timeout; on a loaded CI host
  // that can lapse, which says nothing about what the command checks: only that is retried
  const r = await waitFor(() => {
    const r = sh('podman', ['exec', '-i', container(service), '/usr/local/bin/node', 'dist/src/cli/main.js', ...args]);
    return /cannot open the PostgreSQL store/.test(r.stderr) ? null : r;
  }, { timeoutMs: 60_000, intervalMs: 1000, what: `${args.join(' ')} reaches the database` });
  let json: unknown;
  try {
    json = JSON.parse(r.stdout);
  } catch {
    json = undefined;
  }
  return { code: r.code, json, stderr: r.stderr };
}

function psql(sql: string): string {
  const r = sh('podman', ['exec', container('db'), '/usr/lib/postgresql/17/bin/psql', '-h', '/tmp', '-U', 'lv', '-d', 'lv', '-At', '-c', sql]);
  if (r.code !== 0) throw new Error(`psql: ${r.stderr}`);
  return r.stdout.trim();
}

async function ready(node: 'node1' | 'node2'): Promise<any> {
  return waitFor(async () => {
    const r = await fetch(`${url(node)}/health/ready`);
    return r.status === 200 ? r.json() : null;
  }, { timeoutMs: 240_000, intervalMs: 500, what: `${node} /health/ready 200` });
}

for (const tag of [IMAGE_TAG, POSTGRES_TAG]) {
  if (sh('podman', ['image', 'exists', tag]).code !== 0) throw new Error(`no image ${tag}: run npm run image:build -- --postgres first (npm run image:test does)`);
}

t.teardown(() => {
  // what CI shows when something failed: the last lines of each container's log
  if (!t.passing()) for (const s of ['db', 'node1', 'node2']) process.stderr.write(`--- ${s}\n${logs(s).split('\n').slice(-25).join('\n')}\n`);
  compose('down', '-v');
  // podman-compose 1.0 leaves containers that never started; remove what this test named
  for (const s of ['db', 'node1', 'node2']) sh('podman', ['rm', '-f', '-t', '0', container(s)]);
  for (const v of ['db-data', 'node1-data', 'node2-data']) sh('podman', ['volume', 'rm', '-f', `${PROJECT}_${v}`]);
  fs.rmSync(work, { recursive: true, force: true });
});

const up = compose('up', '-d');
if (up.code !== 0) throw new Error(`podman-compose up: ${up.stdout}\n${up.stderr}`);

t.test('two nodes serve on Node 24 with uWebSockets.js 20.57, and the image HEALTHCHECK passes', async (t) => {
  const [one, two] = await Promise.all([ready('node1'), ready('node2')]);
  for (const body of [one, two]) {
    t.match(body.server.node, /^v24\./, 'Node 24');
    t.match(body.server.uws, /^@btc-vision\/uwebsockets\.js@20\.57\.0 \(uws_linux_(x64|arm64)_137\.node\)$/, '20.57, the Node 24 binding');
    t.equal(body.store, 'ok');
  }
  const listening = logs('node1').split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l)).find((l) => l.msg === 'listening');
  t.match(listening, { uws: one.server.uws, node: one.server.node }, 'the listening line names the build');
  t.notOk(listening.uws_skipped, 'no newer build was passed over');
  const metrics = await (await fetch(`${url('node1')}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text();
  t.match(metrics, /lv_build_info\{version="[^"]+",node="24\.[^"]+",uws="@btc-vision\/uwebsockets\.js@20\.57\.0/);
  const health = sh('podman', ['healthcheck', 'run', container('node1')]);
  t.equal(health.code, 0, `podman healthcheck run: ${health.stdout}${health.stderr}`);
  // the root filesystem is read-only: the service writes only DATA_DIR and /tmp
  const write = sh('podman', ['exec', container('node1'), '/usr/local/bin/node', '-e', "require('fs').writeFileSync('/opt/liveness/x','x')"]);
  t.match(write.stderr, /EROFS/, 'the root filesystem refuses writes');
  t.equal(sh('podman', ['exec', container('node1'), 'id', '-u']).stdout.trim(), '10001', 'not root');
});

let token = '';

t.test('a verify call through the client package; usage and idempotency shared by the nodes', async (t) => {
  const made = await cli('node1', ['token', 'create', '--name', 'image-test', '--grant', 'rgb_liveness:100:day']);
  t.equal(made.code, 0, made.stderr);
  token = made.json.token;
  const { metadata, files } = request([single({ id: 'image-1' })]);
  const key = randomUUID();
  const out = await createVerifyClient({ baseUrl: url('node1'), token }).verify('rgb_liveness', metadata, files, { idempotencyKey: key });
  if (out.kind !== 'completed') throw new Error(`verify failed: ${JSON.stringify(out)}`);
  t.equal(out.verdicts.length, 1);
  t.equal(out.verdicts[0]!.capture_id, 'image-1');
  t.equal(out.replayed, false);
  const client2 = createVerifyClient({ baseUrl: url('node2'), token });
  const again = await client2.verify('rgb_liveness', metadata, files, { idempotencyKey: key });
  if (again.kind !== 'completed') throw new Error(`replay failed: ${JSON.stringify(again)}`);
  t.equal(again.replayed, true, 'the other node replays the saved answer');
  t.same(again.response, out.response);
  const me = await client2.me();
  if (me.kind !== 'ok') throw new Error(`me: ${JSON.stringify(me)}`);
  t.equal(me.value.usage.find((u) => u.module_id === 'rgb_liveness')!.used, 1, 'node 2 sees the unit node 1 charged, once');
});

/** A verify call whose body stops one byte short, so it holds its slot until `finish`. */
function heldCall(base: string, id: string, seed: number): { sent: Promise<void>; finish: () => Promise<{ status: number; body: string }> } {
  const { body, contentType } = request([single({ id, seed })]);
  const u = new URL(base);
  const socket = net.connect(Number(u.port), u.hostname);
  const head = `POST /v1/modules/rgb_liveness/verify HTTP/1.1\r\nHost: ${u.host}\r\nAuthorization: Bearer ${token}\r\n`
    + `Idempotency-Key: ${randomUUID()}\r\nContent-Type: ${contentType}\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`;
  let answer = '';
  socket.on('data', (d) => (answer += d));
  const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
  const sent = new Promise<void>((resolve, reject) => {
    socket.once('error', reject);
    socket.write(head);
    socket.write(body.subarray(0, body.length - 1), () => resolve());
  });
  return {
    sent,
    finish: async () => {
      socket.write(body.subarray(body.length - 1));
      await closed;
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1] ?? 0);
      return { status, body: answer.slice(answer.indexOf('\r\n\r\n') + 4) };
    },
  };
}

t.test('SIGTERM drains the calls in flight: each answered and charged, none left pending', async (t) => {
  const slotsInUse = async () => {
    const text = await (await fetch(`${url('node1')}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text();
    return Number(/^lv_verify_slots_in_use (\d+)/m.exec(text)?.[1] ?? -1);
  };
  const calls = ['drain-a', 'drain-b', 'drain-c'].map((id, i) => heldCall(url('node1'), id, 20 + i));
  await Promise.all(calls.map((c) => c.sent));
  await waitFor(async () => (await slotsInUse()) === calls.length, { timeoutMs: 30_000, what: `${calls.length} verify slots held on node 1` });

  // what compose and orchestrators do: the image's STOPSIGNAL (SIGTERM), a KILL only after
  // the grace period; a stop (unlike a bare kill) is not undone by the restart policy
  const stopped = new Promise<number>((resolve) => {
    spawn('podman', ['stop', '-t', '45', container('node1')], { env, stdio: 'ignore' }).on('close', (code) => resolve(code ?? -1));
  });
  await waitFor(() => logs('node1').includes('"msg":"draining"'), { timeoutMs: 30_000, what: 'node 1 logs draining' });
  const answers = await Promise.all(calls.map((c) => c.finish()));
  answers.forEach((a, i) => {
    t.equal(a.status, 200, `answered after SIGTERM: ${a.body.slice(0, 200)}`);
    t.match(JSON.parse(a.body), { charged_units: 1, results: [{ capture_id: ['drain-a', 'drain-b', 'drain-c'][i] }] });
  });
  t.equal(await stopped, 0, 'podman stop returned');
  const exit = sh('podman', ['inspect', container('node1'), '--format', '{{.State.Status}} {{.State.ExitCode}}']).stdout.trim();
  t.equal(exit, 'exited 0', 'a clean drain exits 0, before any KILL');
  t.match(logs('node1'), /"code":0,"msg":"stopped"/, 'the service logged its own stop');

  t.equal(psql("SELECT count(*) FROM reservations WHERE state <> 'charged'"), '0', 'no reservation pending, refunded or failed');
  t.equal(psql('SELECT count(*) FROM reservations'), '4', 'the first call and the three drained ones');
  const ledger = await cli('node2', ['ledger', 'verify']);
  t.equal(ledger.code, 0, `ledger verify on node 2: ${ledger.stderr}`);
  // node 2 kept serving throughout; on a loaded host its answer may take a few polls
  const me = await waitFor(async () => {
    const r = await createVerifyClient({ baseUrl: url('node2'), token }).me();
    return r.kind === 'ok' ? r : null;
  }, { timeoutMs: 30_000, intervalMs: 500, what: 'GET /v1/me on node 2' });
  t.equal(me.value.usage.find((u) => u.module_id === 'rgb_liveness')!.used, 4, 'node 2 counts every unit node 1 charged while draining');
});
