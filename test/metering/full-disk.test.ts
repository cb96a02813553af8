import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import t, { type Test } from 'tap';
import { postVerify, request, single, type VerifyCall } from '../helpers/captures.ts';
import { bearer, makeToken, ROOT, spawnChildSync, startServer, tempDir, type ServerHandle } from '../helpers/server.ts';
import { waitFor } from '../helpers/wait.ts';
import { missingTool } from '../helpers/required.ts';

// Security issue 29 (item 5): DATA_DIR on a small tmpfs that fills up. Every answer must tell
// the truth about what was recorded (a 200 is charged and replays; a 503 store_unavailable
// charged nothing and its key runs afresh once space returns), readiness and the metrics must
// say that writes fail, no write failure may end the process, and the service must resume by
// itself when the space comes back.

const TMPFS_SIZE = '40m';

/** Why this file cannot run here, or null: it mounts a tmpfs, which needs root (as in CI). */
function cannotMount(): string | null {
  if (process.platform !== 'linux') return 'needs Linux (mounts a tmpfs)';
  if (process.getuid?.() !== 0) return 'needs root to mount a tmpfs for DATA_DIR (run as root, as CI does)';
  return null;
}

/** Fills the file system with one file until it is full. */
function fillDisk(dir: string): void {
  const fd = fs.openSync(path.join(dir, 'fill'), 'w');
  try {
    for (const size of [1 << 20, 1 << 12, 1 << 9]) {
      const chunk = Buffer.alloc(size, 7);
      try {
        for (;;) fs.writeSync(fd, chunk);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
      }
    }
  } finally {
    fs.closeSync(fd);
  }
}

/** Uses up the pages LMDB freed inside the store's file (helpers/lmdb-exhaust.mjs says why,
 * and why in another process); its exit status is not the point, its report is. */
function exhaustStore(dir: string): void {
  const out = spawnChildSync(process.execPath, [path.join(ROOT, 'test/helpers/lmdb-exhaust.mjs'), path.join(dir, 'store')], { cwd: ROOT, encoding: 'utf8' });
  if (!out.stdout.includes('exhausted')) throw new Error(`could not exhaust the store: ${out.stderr}`);
}

async function readiness(server: ServerHandle): Promise<{ status: number; body: any }> {
  const r = await fetch(`${server.baseUrl}/health/ready`);
  return { status: r.status, body: await r.json() };
}

/** The merged metric value (no labels), or null. */
async function metric(server: ServerHandle, name: string): Promise<number | null> {
  const text = await (await fetch(`${server.baseUrl}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? null : Number(line.split(' ')[1]);
}

async function metricSum(server: ServerHandle, name: string): Promise<number> {
  const text = await (await fetch(`${server.baseUrl}/metrics`)).text();
  return text.split('\n').filter((l) => l.startsWith(`${name}{`)).reduce((n, l) => n + Number(l.split(' ').at(-1)), 0);
}

/** Readiness answered by whichever API worker the kernel picks: the state must hold on each,
 * so it is asked several times in a row. */
async function waitReadiness(server: ServerHandle, want: (r: { status: number; body: any }) => boolean, what: string) {
  return waitFor(async () => {
    for (let i = 0; i < 6; i++) if (!want(await readiness(server))) return false;
    return true;
  }, { timeoutMs: 30_000, intervalMs: 100, what });
}

const used = async (server: ServerHandle, token: string) => (await (await fetch(`${server.baseUrl}/v1/me`, { headers: bearer(token) })).json()).usage[0].used as number;

function checkUnavailable(t: Test, r: VerifyCall, where: string): void {
  t.equal(r.status, 503, `${where}: 503`);
  t.equal(r.json?.error?.code, 'store_unavailable', `${where}: store_unavailable`);
  t.ok(Number(r.headers.get('retry-after')) >= 1, `${where}: Retry-After`);
}

async function run(t: Test, server: ServerHandle, dir: string): Promise<void> {
  const { token } = await makeToken(server, ['rgb_liveness:1000:day']);
  const call = (id: string, key: string) => postVerify(server.baseUrl, token, 'rgb_liveness', request([single({ id })]), { 'idempotency-key': key });

  const before = await call('before-1', 'before-1');
  t.equal(before.status, 200, 'calls work while there is space');

  // A call whose reservation found room, whose settlement then cannot be written: the answer
  // must not be settlement_failed (nothing for an operator), and its units must come back.
  const slow = call('slow-1', 'slow-1');
  await waitFor(async () => (await used(server, token)) === 2, { what: 'the slow call to reserve its unit' });
  fillDisk(dir);
  exhaustStore(dir);
  const slowAnswer = await slow;
  t.not(slowAnswer.status, 200, 'the disk filled up before the slow call settled (6 s inference delay)');
  checkUnavailable(t, slowAnswer, 'a settlement the store could not write');
  t.match(slowAnswer.json.error.message, /nothing is charged|nothing was charged/, 'the answer says nothing was charged');
  t.notMatch(slowAnswer.json.error.message, /operator/, 'and sends no one to the operator');

  // New calls while the disk is full: refused before inference, nothing charged.
  const answers = new Map<string, VerifyCall>();
  for (let i = 0; i < 30; i++) answers.set(`full-${i}`, await call(`full-${i}`, `full-${i}`));
  for (const [key, r] of answers) checkUnavailable(t, r, key);
  t.equal(server.proc.exitCode, null, 'the process is still running');

  const notReady = await waitReadiness(server, (r) => r.status === 503 && r.body.store === 'writes_failing', 'readiness to say writes fail');
  t.ok(notReady);
  const ready = await readiness(server);
  t.equal(ready.body.status, 'not_ready');
  t.match(ready.body.store_writes, { since: String, operation: String, error: String }, 'readiness says since when and why');
  t.equal(await metric(server, 'lv_store_writes_failing'), 1, 'lv_store_writes_failing is 1');
  t.ok((await metricSum(server, 'lv_store_write_failures_total')) >= 1, 'failed writes are counted');
  t.equal(await used(server, token), 2, 'nothing was charged beyond the first call (the slow call\'s unit is held until its refund)');

  // A burst while full: every call answered, none ends the process.
  const burst = await Promise.all(Array.from({ length: 12 }, (_, i) => call(`burst-${i}`, `burst-${i}`)));
  for (const r of burst) t.ok(r.status === 503 && ['store_unavailable', 'server_busy'].includes(r.json?.error?.code), `burst: ${r.status} ${r.json?.error?.code}`);
  t.equal(server.proc.exitCode, null, 'the process is still running after the burst');

  // Space returns: the service resumes by itself, the owed refund first.
  fs.unlinkSync(path.join(dir, 'fill'));
  await waitReadiness(server, (r) => r.status === 200 && r.body.store === 'ok', 'readiness to recover');
  t.equal(await metric(server, 'lv_store_writes_failing'), 0, 'lv_store_writes_failing is back to 0');
  t.equal(await used(server, token), 1, 'the slow call\'s held unit was given back');

  const again = await call('slow-1', 'slow-1');
  t.equal(again.status, 200, 'the slow call\'s key runs afresh');
  t.equal(again.headers.get('idempotency-replayed'), null, 'not a replay: nothing had been recorded for it');
  for (const key of answers.keys()) {
    const r = await call(key, key);
    t.equal(r.status, 200, `${key} succeeds once space returns`);
    t.equal(r.headers.get('idempotency-replayed'), null, `${key} runs afresh: its key was never bound`);
  }
  const replay = await call('before-1', 'before-1');
  t.equal(replay.headers.get('idempotency-replayed'), 'true', 'the call answered 200 before the disk filled replays');
  t.equal(replay.text, before.text, 'byte for byte');
  t.equal(await used(server, token), 2 + answers.size, 'each key charged exactly once');

  // two read-only CLI runs, started together
  const [settlements, ledger] = await Promise.all([server.cli(['settlements', 'list']), server.cli(['ledger', 'verify'])]);
  t.same(settlements.json?.settlements, [], 'no settlement waits for an operator');
  t.equal(ledger.code, 0, `the ledger verifies: ${ledger.stdout}`);
  t.equal(server.proc.exitCode, null, 'the process never exited');
  t.notOk(server.logLines().some((l) => /exited unexpectedly|Unhandled|uncaught/i.test(l.msg ?? '')), 'no thread died');
  const unstored = server.logLines().filter((l) => /^audit write failed/.test(l.msg ?? ''));
  t.ok(unstored.length > 0 && unstored.every((l) => typeof l.audit?.request_id === 'string' && typeof l.audit?.status === 'number'), 'an audit line the store could not write is logged whole');
}

// The tmpfs: one per run, mounted here and unmounted once its server has stopped.
function mount(dir: string): void {
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${TMPFS_SIZE}`, 'tmpfs', dir], { stdio: 'pipe' });
}

function unmount(dir: string): void {
  try {
    execFileSync('umount', [dir], { stdio: 'pipe' });
  } catch {
    // something still holds a file there (a server killed late): detach it now, freed when released
    execFileSync('umount', ['-l', dir], { stdio: 'pipe' });
  }
  fs.rmSync(dir, { recursive: true, force: true });
}

let skip = cannotMount();
if (skip === null) {
  const probe = tempDir('lv-full-disk-');
  try {
    mount(probe);
    unmount(probe);
  } catch (err) {
    fs.rmSync(probe, { recursive: true, force: true });
    skip = `cannot mount a tmpfs here: ${String((err as { stderr?: Buffer }).stderr ?? err).trim()}`;
  }
}

if (skip !== null) {
  missingTool(t, skip);
} else {
  // both ways LMDB commits (LMDB_COMMITS): a failed commit surfaces differently in each. The
  // two run side by side (each its own tmpfs, server and store): most of each run is waiting
  // (the slow call's inference delay, the probe that sees the space come back).
  t.jobs = 2;
  for (const commits of ['sync', 'batched'] as const) {
    t.test(`LMDB_COMMITS=${commits}: a full disk: truthful answers, readiness and metrics say so, the service resumes by itself`, async (t) => {
      const dir = tempDir('lv-full-disk-');
      mount(dir);
      let server: ServerHandle | null = null;
      // one teardown, in this order: the server is stopped before its DATA_DIR is unmounted
      // (also when it failed to start)
      t.teardown(async () => {
        await server?.stop();
        unmount(dir);
      });
      server = await startServer({
        dataDir: dir,
        ready: true,
        env: { WORKERS: '2', LMDB_COMMITS: commits, RETRY_AFTER_SECONDS: '1', TEST_INFERENCE_DELAY_MS: '6000', TEST_INFERENCE_DELAY_PREFIX: 'slow-' },
      });
      await run(t, server, dir);
    });
  }
}
