import http from 'node:http';
import t from 'tap';
import { duplicateKeys } from '../helpers/json-keys.ts';
import { startServer, type ServerHandle } from '../helpers/server.ts';
import { waitFor } from '../helpers/wait.ts';

// What an operator reads while an API worker is replaced, through the real server
// (TEST_WORKER_FAULTS=1: an X-Test-Fault header ends the worker that serves it).
// - /metrics: a counter never goes back (docs/observability.md). The replacement counts from 0
//   under the dead worker's labels (thread="api-<n>" too); the sum went back by what the dead
//   worker had counted (lv_http_requests_total 40 -> 22 in the review), which Prometheus reads
//   as a reset. What it counted after its last snapshot is lost on a crash (`exit`), and kept
//   on a retirement (`uncaught`), whose worker sends its last figures as it ends.
// - the log: no line names a key twice (JSON.parse keeps the last silently: the recovery line
//   said thread "main", the logger's own, and the dead worker's thread id under one key).

t.setTimeout(300_000);

interface Answer { status: number; headers: http.IncomingHttpHeaders; body: string }

function call(s: ServerHandle, agent: http.Agent | false, path: string, headers: Record<string, string> = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: s.port, method: 'GET', path, headers, agent }, (res) => {
      let body = '';
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** The API worker that serves `agent`'s one keep-alive connection, from its request log line. */
async function workerOf(s: ServerHandle, agent: http.Agent): Promise<number> {
  const r = await call(s, agent, '/health/live');
  const id = String(r.headers['x-request-id']);
  const line = await waitFor(() => s.logLines().find((l) => l.msg === 'request' && l.request_id === id), { what: `log line of ${id}` });
  return line.worker as number;
}

/** A keep-alive connection served by API worker `want` (the kernel spreads new connections). */
async function connectionTo(s: ServerHandle, want: number): Promise<http.Agent> {
  for (let i = 0; i < 64; i++) {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    if ((await workerOf(s, agent)) === want) return agent;
    agent.destroy();
  }
  throw new Error(`no connection landed on worker ${want}`);
}

/** Every counter and histogram sample of a /metrics answer, by series (labels sorted). */
async function counters(s: ServerHandle): Promise<Map<string, number>> {
  const r = await call(s, false, '/metrics');
  if (r.status !== 200) throw new Error(`/metrics answered ${r.status}`);
  const types = new Map<string, string>();
  const out = new Map<string, number>();
  for (const line of r.body.split('\n')) {
    const type = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (type) types.set(type[1]!, type[2]!);
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) continue;
    const name = m[1]!;
    const family = types.get(name) ?? types.get(name.replace(/_(bucket|sum|count)$/, ''));
    if (family !== 'counter' && family !== 'histogram') continue;
    const labels = [...(m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((l) => `${l[1]}=${l[2]}`).sort();
    out.set(`${name}{${labels.join(',')}}`, Number(m[3]));
  }
  return out;
}

/** The series that went back from `before` to `after` (or went missing). */
function wentBack(before: Map<string, number>, after: Map<string, number>): string[] {
  return [...before].filter(([k, v]) => !((after.get(k) ?? -Infinity) >= v)).map(([k, v]) => `${k}: ${v} -> ${after.get(k)}`);
}

const LIVE = 'lv_http_requests_total{method=GET,route=/health/live,status=200}';
const REPLACED = 'API worker replaced';

const s = await startServer({ ready: true, env: { WORKERS: '2', TEST_WORKER_FAULTS: '1' } });
t.teardown(() => s.stop());
const replaced = () => s.logLines().filter((l) => l.msg === REPLACED).length;

t.test('a worker that crashes: no counter or histogram goes back, and its replacement counts on top', async (t) => {
  const dying = new http.Agent({ keepAlive: true, maxSockets: 1 });
  t.teardown(() => dying.destroy());
  const index = await workerOf(s, dying);
  for (let i = 0; i < 5; i++) t.equal((await call(s, dying, '/health/live')).status, 200);
  const before = await counters(s);
  t.ok((before.get(LIVE) ?? 0) >= 6, `the worker's calls are counted (${before.get(LIVE)})`);

  const was = replaced();
  t.equal((await call(s, dying, '/health/live', { 'x-test-fault': 'exit' })).status, 200, 'answered, then the worker exits');
  await waitFor(() => replaced() > was, { timeoutMs: 120_000, what: 'the replacement' });
  const after = await counters(s);
  t.same(wentBack(before, after), [], 'every counter and histogram series at least where it was');

  const fresh = await connectionTo(s, index);
  t.teardown(() => fresh.destroy());
  for (let i = 0; i < 7; i++) t.equal((await call(s, fresh, '/health/live')).status, 200);
  const later = await counters(s);
  // connectionTo's own calls may have landed on either worker: at least the 7, on top of all before
  t.ok(later.get(LIVE)! >= before.get(LIVE)! + 7, `the replacement's calls add to the dead worker's (${before.get(LIVE)} -> ${later.get(LIVE)})`);
  t.same(wentBack(after, later), []);
});

t.test('a worker that retires (an uncaught exception): what it counted after the last scrape is kept too', async (t) => {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  t.teardown(() => agent.destroy());
  await workerOf(s, agent);
  const before = await counters(s);
  for (let i = 0; i < 6; i++) t.equal((await call(s, agent, '/health/live')).status, 200);
  const was = replaced();
  t.equal((await call(s, agent, '/health/live', { 'x-test-fault': 'uncaught' })).status, 200, 'answered; the worker then retires');
  await waitFor(() => replaced() > was, { timeoutMs: 120_000, what: 'the replacement' });
  const after = await counters(s);
  t.same(wentBack(before, after), [], 'every counter and histogram series at least where it was');
  t.ok(after.get(LIVE)! >= before.get(LIVE)! + 7, `the 7 calls it served since the last scrape are counted (${before.get(LIVE)} -> ${after.get(LIVE)})`);
});

t.test('no log line of the replacements names a key twice', async (t) => {
  await waitFor(() => s.logLines().filter((l) => l.msg === 'worker recovery finished').length >= 2, { timeoutMs: 60_000, what: 'both recoveries' });
  const lines = s.logs.flatMap((chunk) => chunk.split('\n')).filter((l) => l.startsWith('{'));
  const twice = lines.flatMap((line) => duplicateKeys(line).map((k) => `${k} in ${line.slice(0, 200)}`));
  t.same(twice, [], `${lines.length} lines read`);
  const recovery = s.logLines().find((l) => l.msg === 'worker recovery finished');
  t.equal(recovery.thread, 'main', 'the line is the main thread\'s');
  t.type(recovery.holder_thread, 'number', 'the dead worker\'s thread id has a key of its own');
  t.ok(s.logLines().some((l) => l.msg === 'API worker exited unexpectedly; starting a replacement'), 'the replacement lines were read');
});
