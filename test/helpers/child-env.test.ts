import { spawn } from 'node:child_process';
import t from 'tap';
import { childEnv, runChild, spawnChild, spawnChildSync, threadStates } from './server.ts';

// The processes the tests start run without tap's instrumentation (bench/harness/server.ts
// says why), and with any other NODE_OPTIONS a developer set.
t.test('childEnv takes tap\'s entries out of NODE_OPTIONS and keeps the rest', async (t) => {
  const tap = '--import=file:///w/node_modules/@tapjs/processinfo/dist/esm/import.mjs';
  t.same(childEnv({ NODE_OPTIONS: `--max-old-space-size=512 ${tap}  --trace-warnings`, X: '1' }), { NODE_OPTIONS: '--max-old-space-size=512 --trace-warnings', X: '1' });
  t.same(childEnv({ NODE_OPTIONS: tap, X: '1' }), { X: '1' }, 'nothing left: no NODE_OPTIONS at all');
  t.same(childEnv({ X: '1' }), { X: '1' });
  const env = { NODE_OPTIONS: tap };
  childEnv(env);
  t.equal(env.NODE_OPTIONS, tap, 'the given environment is not changed');
});

// what a node child reports: the NODE_OPTIONS it started with, its pid and parent, one variable
const REPORT = 'console.log(JSON.stringify({ options: process.env.NODE_OPTIONS ?? null, pid: process.pid, ppid: process.ppid, x: process.env.X ?? null }))';

function report(p: ReturnType<typeof spawn>): Promise<{ options: string | null; pid: number; ppid: number; x: string | null }> {
  let out = '';
  p.stdout!.on('data', (d) => (out += d));
  return new Promise((resolve, reject) => {
    p.on('error', reject);
    p.on('close', () => resolve(JSON.parse(out)));
  });
}

t.test('under tap, a child started with spawnChild runs without the instrumentation', async (t) => {
  t.match(process.env.NODE_OPTIONS ?? '', /@tapjs\/processinfo/, 'tap put it in NODE_OPTIONS (else this test proves nothing)');
  // tap's spawn hook puts it back into a plain spawn's environment even when the caller took
  // it out: this is what spawnChild is for
  const plain = await report(spawn(process.execPath, ['-e', REPORT], { env: childEnv() }));
  t.match(plain.options, /@tapjs\/processinfo/, 'a plain spawn gets it back from tap\'s hook');

  // what the child should see: a developer's own NODE_OPTIONS, if any, and none of tap's
  const own = childEnv().NODE_OPTIONS ?? null;
  const child = spawnChild(process.execPath, ['-e', REPORT], { env: { ...process.env, X: '1' } });
  const seen = await report(child);
  t.equal(seen.options, own, 'NODE_OPTIONS in the child: only what is not tap\'s');
  t.equal(seen.x, '1', 'the rest of the environment arrives');
  t.equal(seen.pid, child.pid, 'the pid spawnChild returns is the program\'s own (signals reach it)');
  t.equal(seen.ppid, process.pid);

  const kept = await report(spawnChild(process.execPath, ['-e', REPORT], { env: { ...process.env, NODE_OPTIONS: `${process.env.NODE_OPTIONS} --max-old-space-size=300` } }));
  t.equal(kept.options, [own, '--max-old-space-size=300'].filter((o) => o !== null).join(' '), 'a developer\'s own option is passed on, tap\'s are not');

  const sync = spawnChildSync(process.execPath, ['-e', REPORT], { encoding: 'utf8' });
  t.equal(JSON.parse(sync.stdout).options, own, 'spawnChildSync: the same');
});

t.test('runChild: a program that exits without reading its input is a result, not an error', async (t) => {
  // 4 MiB is more than a pipe holds, so the write is still under way when the program exits
  const r = await runChild(process.execPath, ['-e', 'process.stderr.write("bye"); process.exit(3)'], { stdin: 'x'.repeat(4 << 20) });
  t.same({ code: r.code, stderr: r.stderr, timedOut: r.timedOut }, { code: 3, stderr: 'bye', timedOut: false });
  // the limit leaves a loaded host time to start node and reach its event loop (at 200 ms a
  // busy suite once caught the child still loading, one thread running, and no sleep to see)
  const slow = await runChild(process.execPath, ['-e', 'setTimeout(() => {}, 60_000)'], { limitMs: 4_000 });
  t.same({ code: slow.code, signal: slow.signal, timedOut: slow.timedOut }, { code: null, signal: 'SIGKILL', timedOut: true }, 'killed past its limit, and says so');
  // and where it was: one line per thread, the main thread (named after the program) asleep
  const lines = (slow.threads ?? '').split('\n');
  t.ok(lines.length >= 2, `its threads as they were before the kill:\n${slow.threads}`);
  // the main thread's id is the process id; idle, it sleeps in the event loop's poll
  t.ok(lines.some((l) => /^ {2}\d+ node state=S wchan=\S+ syscall=\d+$/.test(l)), 'a thread named after the program, asleep in a system call');
  t.match(threadStates(process.pid), new RegExp(`^ {2}${process.pid} `), 'this process: its main thread first');
  t.equal(threadStates(2 ** 22 + 7), '', 'a pid that does not exist gives nothing');
});
