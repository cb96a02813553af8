import http from 'node:http';
import t from 'tap';
import { createAdmissionTable, HostAdmission, releaseWorkerSlots } from '../../src/http/capacity.ts';
import { request, single } from '../helpers/captures.ts';
import { makeToken, startServer, type ServerHandle } from '../helpers/server.ts';
import { waitFor } from '../helpers/wait.ts';

// Security issue 29: one bad request must never end the process. Faults are injected through
// the test-only switch TEST_WORKER_FAULTS=1 (src/http/test-faults.ts) with an X-Test-Fault
// header; each kind is one way an API worker can fail.

t.setTimeout(300_000);

interface Answer { status: number; headers: http.IncomingHttpHeaders; body: string }

/** One keep-alive connection per agent, so that a test knows which API worker serves it. */
function connection(): http.Agent {
  return new http.Agent({ keepAlive: true, maxSockets: 1 });
}

function call(s: ServerHandle, agent: http.Agent | false, method: string, path: string, headers: Record<string, string> = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: s.port, method, path, headers, agent }, (res) => {
      let body = '';
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** The API worker that answered a request, from its request log line. */
async function workerOf(s: ServerHandle, requestId: string): Promise<number> {
  const line = await waitFor(() => s.logLines().find((l) => l.msg === 'request' && l.request_id === requestId), { what: `log line of ${requestId}` });
  return line.worker as number;
}

async function workerOfConnection(s: ServerHandle, agent: http.Agent): Promise<number> {
  const r = await call(s, agent, 'GET', '/health/live');
  return workerOf(s, String(r.headers['x-request-id']));
}

/** A connection served by another worker than `not` (the kernel spreads new connections). */
async function connectionAvoiding(s: ServerHandle, not: number): Promise<http.Agent> {
  for (let i = 0; i < 64; i++) {
    const agent = connection();
    if ((await workerOfConnection(s, agent)) !== not) return agent;
    agent.destroy();
  }
  throw new Error(`every connection landed on worker ${not}`);
}

t.test('releaseWorkerSlots frees a dead worker\'s slots and nobody else\'s', async (t) => {
  const buffer = createAdmissionTable(4);
  const limits = { slots: 4, perAddress: 4, perToken: 4 };
  const w0 = new HostAdmission(buffer, 0, limits);
  const w1 = new HostAdmission(buffer, 1, limits);
  t.type(w0.tryAcquire('a', 't'), 'function');
  t.type(w0.tryAcquire('a', 't'), 'function');
  const keep = w1.tryAcquire('b', 'u');
  t.type(keep, 'function');
  t.equal(w1.inUse(), 3);
  t.equal(releaseWorkerSlots(buffer, 0), 2, 'the dead worker\'s two slots');
  t.equal(w1.inUse(), 1, 'worker 1 keeps its slot');
  t.equal(releaseWorkerSlots(buffer, 0), 0, 'nothing left to free');
  // the freed slots serve again, up to the host's four
  for (let i = 0; i < 3; i++) t.type(w1.tryAcquire('b', 'u'), 'function');
  // a full host: this caller holds every slot, so it is the one refused (fair shares)
  t.equal(typeof w1.tryAcquire('b', 'u'), 'string', 'a fifth is refused');
  t.equal(w1.inUse(), 4);
  (keep as () => void)();
  t.equal(w1.inUse(), 3);
});

t.test('faults in one API worker never end the process', async (t) => {
  const s = await startServer({
    ready: true,
    env: {
      WORKERS: '2',
      TEST_WORKER_FAULTS: '1',
      // the test paces an upload by hand across a worker's replacement
      UPLOAD_MIN_BYTES_PER_SECOND: '1',
      UPLOAD_RATE_WINDOW_SECONDS: '3600',
      UPLOAD_DEADLINE_SECONDS: '3600',
    },
  });
  t.teardown(() => s.stop());
  let exitedEarly = false;
  void s.exited.then(() => (exitedEarly = true));
  const agent = connection();
  t.teardown(() => agent.destroy());

  await t.test('a handler that rejects or throws unexpectedly: a logged 500 for that request', async (t) => {
    for (const fault of ['rejection', 'throw']) {
      const r = await call(s, agent, 'GET', '/health/live', { 'x-test-fault': fault });
      t.equal(r.status, 500, fault);
      t.equal(JSON.parse(r.body).error.code, 'internal_error');
      const id = String(r.headers['x-request-id']);
      const logged = await waitFor(() => s.logLines().find((l) => l.msg === 'handler failed' && l.request_id === id), { what: `${fault} logged` });
      t.match(logged.err.message, /injected handler/, `${fault}: the cause is in the log`);
    }
  });

  await t.test('a burst of forgotten rejections: every request answered, each logged, the worker serves on', async (t) => {
    const before = s.logLines().filter((l) => l.msg?.startsWith('unhandled rejection')).length;
    const answers = await Promise.all(Array.from({ length: 30 }, () => call(s, false, 'GET', '/health/live', { 'x-test-fault': 'forgotten-rejection' })));
    t.same([...new Set(answers.map((a) => a.status))], [200]);
    await waitFor(() => s.logLines().filter((l) => l.msg?.startsWith('unhandled rejection')).length >= before + 30, { what: '30 unhandled rejections logged' });
    t.equal((await call(s, agent, 'GET', '/health/live')).status, 200);
    t.notOk(s.logLines().some((l) => /API worker exited/.test(l.msg ?? '')), 'no worker was lost');
  });

  // A verify call in flight on one worker while the other fails: its upload is held half sent
  // by the test until the failed worker has been replaced, then completed.
  const { token } = await makeToken(s, ['rgb_liveness:100:day']);
  const body = request([single()]);
  async function inFlightVerify(): Promise<{ worker: number; finish: () => Promise<Answer> }> {
    const a = connection();
    const worker = await workerOfConnection(s, a);
    let answer!: Promise<Answer>;
    const req = http.request({
      host: '127.0.0.1', port: s.port, method: 'POST', path: '/v1/modules/rgb_liveness/verify', agent: a,
      headers: { authorization: `Bearer ${token}`, 'content-type': body.contentType, 'content-length': String(body.body.length) },
    });
    answer = new Promise((resolve, reject) => {
      req.on('response', (res) => {
        let text = '';
        res.on('data', (d) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: text }));
      });
      req.on('error', reject);
    });
    const half = Math.floor(body.body.length / 2);
    req.write(body.body.subarray(0, half));
    // the call holds a slot once its upload has started (the admission gauge counts it)
    await waitFor(async () => /lv_verify_slots_in_use\S* [1-9]/.test((await call(s, false, 'GET', '/metrics')).body), { what: 'the verify call to hold a slot' });
    return {
      worker,
      finish: () => {
        req.end(body.body.subarray(half));
        return answer.finally(() => a.destroy());
      },
    };
  }

  for (const fault of ['uncaught', 'exit']) {
    await t.test(`${fault}: the worker is replaced while the other one serves and its in-flight call completes`, async (t) => {
      const LOST = 'API worker exited unexpectedly; starting a replacement';
      const lostBefore = s.logLines().filter((l) => l.msg === LOST).length;
      const replacedBefore = s.logLines().filter((l) => l.msg === 'API worker replaced').length;
      const busy = await inFlightVerify();
      const victim = await connectionAvoiding(s, busy.worker);
      const r = await call(s, victim, 'GET', '/health/live', { 'x-test-fault': fault });
      t.equal(r.status, 200, 'the faulting request itself was answered');
      victim.destroy();
      const victimWorker = busy.worker === 0 ? 1 : 0;
      const lost = await waitFor(() => s.logLines().filter((l) => l.msg === LOST)[lostBefore], { what: 'the worker loss' });
      t.equal(lost.worker, victimWorker, 'the faulting worker was lost');
      t.equal(lost.code, fault === 'exit' ? 70 : 1, 'exit code of the lost worker');
      if (fault === 'uncaught') t.ok(s.logLines().some((l) => /uncaught exception in an API worker; retiring it/.test(l.msg ?? '') && l.err?.message?.includes('injected')), 'the exception is logged');
      await waitFor(() => s.logLines().filter((l) => l.msg === 'API worker replaced').length > replacedBefore, { what: 'the replacement to listen', timeoutMs: 120_000 });

      const done = await busy.finish();
      t.equal(done.status, 200, `the call in flight on worker ${busy.worker} completed: ${done.body.slice(0, 200)}`);
      // both workers serve again: some new connection lands on the replacement
      const back = await connectionAvoiding(s, busy.worker);
      t.equal((await call(s, back, 'GET', '/health/live')).status, 200, 'the replacement serves');
      back.destroy();
      t.notOk(exitedEarly, 'the process is still up');
    });
  }
  t.notOk(exitedEarly, 'the process is still up');
});

// More than MAX_REPLACEMENTS losses within a minute: a crash loop, which stops the process for
// its supervisor to restart. It used to end with code 0 (a restart-on-failure unit left it
// down) and no "stopped": stop() waited for an 'exit' the dead worker had already sent, and node
// ended by itself, with only an unref'd timer left, before the engine and the store closed.
t.test('a crash loop stops the process with exit 1, the engine and store closed', async (t) => {
  const s = await startServer({ ready: true, env: { WORKERS: '2', TEST_WORKER_FAULTS: '1' } });
  t.teardown(() => s.stop());
  let code: number | null | undefined;
  void s.exited.then((c) => (code = c));
  const LOST = /^API worker exited/;
  for (let fault = 0; fault < 20 && code === undefined; fault++) {
    const lostBefore = s.logLines().filter((l) => LOST.test(l.msg ?? '')).length;
    await fetch(`${s.baseUrl}/health/live`, { headers: { 'x-test-fault': 'exit' } }).catch(() => undefined);
    // the loss, then its replacement listening (or the stop)
    await waitFor(() => s.logLines().filter((l) => LOST.test(l.msg ?? '')).length > lostBefore || code !== undefined, { what: 'a worker loss', timeoutMs: 60_000 });
    await waitFor(() => code !== undefined || s.logLines().filter((l) => l.msg === 'API worker replaced').length >= fault + 1, { what: 'the replacement or the stop', timeoutMs: 120_000 });
  }
  t.equal(await s.exited, 1, 'exit 1: the supervisor restarts it');
  t.ok(s.logLines().some((l) => l.level === 60 && /API workers lost within 60 s\); shutting down/.test(l.msg ?? '')), 'the crash loop is said, fatal');
  t.match(s.logLines().find((l) => l.msg === 'stopped'), { code: 1 }, 'and the stop ran to its end');
});
