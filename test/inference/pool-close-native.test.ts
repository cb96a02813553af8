import type { Worker } from 'node:worker_threads';
import t from 'tap';
import { loadManifest } from '../../src/inference/index.ts';
import { InferencePool, RELEASE_WAIT_MS } from '../../src/inference/pool.ts';
import type { WorkerReport } from '../../src/inference/protocol.ts';
import { tempDir } from '../helpers/server.ts';
import { waitFor } from '../helpers/wait.ts';
import { slowGraph, writeSet } from './hostile-graphs.ts';

// Issue 39's guard, the other half of pool-close.test.ts: a native (onnxruntime-node) pool
// thread is never terminated inside a runtime call. Terminating one there aborts the whole
// process (the addon's call returns into a thread that is shutting down, node-addon-api throws
// a C++ Napi::Error that nothing catches: "terminate called after throwing an instance of
// 'Napi::Error'", exit 134). So close() waits for the thread's answer, which the thread gives
// only once no runtime call runs (workers/inference.ts release()), bounded by RELEASE_WAIT_MS;
// the warm-up looks at the close between its runs, so the wait is one run, not the warm-up.
// In process, on the pool itself: were the thread terminated mid-run, this test's own process
// would abort, and tap would report the file failed (by signal, SIGABRT).

t.test('close() of a native pool thread busy in its warm-up runs waits for the run it is in, then ends the warm-up and the thread', async (t) => {
  const root = tempDir('pool-close-native-');
  // chained 1024x1024 products: a run of a few hundred ms on one native thread (over a second
  // on a loaded host), well inside RELEASE_WAIT_MS, and 10,000 of them back to back: a
  // warm-up of hours, which the close must end at the next run, not wait out
  const dir = writeSet(root, 'slow_v1', slowGraph(32, 1024, 4));
  const reports: WorkerReport[] = [];
  const errors: Error[] = [];
  const pool = new InferencePool(
    { manifest: loadManifest(dir), modules: ['rgb_liveness'], provider: 'native', sessionThreads: 1, warmupRuns: 10_000 },
    1,
    (r) => reports.push(r),
    (e) => errors.push(e),
  );
  // the thread's answers as the pool hears them, on the pool's own channel (close() resolves
  // from its handler, which runs in the same dispatch as this one)
  const heard: string[] = [];
  (pool as unknown as { channel: BroadcastChannel }).channel.addEventListener('message', (ev) => void heard.push(((ev as MessageEvent).data as { kind: string }).kind));
  let closeCalled = false;
  // the pool's one thread (piscina's own list: the pool does not expose its threads)
  const thread = await waitFor(() => (pool as unknown as { piscina: { threads: Worker[] } }).piscina.threads[0], { what: 'the pool thread' });
  const exit = new Promise<{ code: number; afterClose: boolean }>((resolve) => thread.once('exit', (code) => resolve({ code, afterClose: closeCalled })));
  await waitFor(() => reports.find((r) => r.kind === 'provider'), { what: 'onnxruntime-node loaded', timeoutMs: 120_000 });
  t.match(reports.find((r) => r.kind === 'provider'), { provider: 'native' });
  // Inside the warm-up: from here on the thread is in a runtime call nearly all the time (the
  // session's creation, then one synchronous run after another, the event loop free only for
  // the moment between two). Polled, not slept: a window of the thread's event loop at least
  // 300 ms long and at least 95 % busy.
  let before = thread.performance.eventLoopUtilization();
  await waitFor(() => {
    const now = thread.performance.eventLoopUtilization();
    const d = thread.performance.eventLoopUtilization(now, before);
    before = now;
    return d.utilization >= 0.95 && d.active >= 300;
  }, { what: 'the pool thread inside its warm-up runs', intervalMs: 300, timeoutMs: 120_000 });
  t.notOk(reports.some((r) => r.kind === 'warm'), 'the warm-up has not finished');

  closeCalled = true;
  const answered = await pool.close();
  // without the wait (the thread terminated at once, as a WASM one is): no answer heard, and
  // most often this process aborts right here
  const { code, afterClose } = await exit;
  t.ok(heard.includes('closed'), 'the thread answered the close before the pool terminated it');
  t.equal(answered, true, `the thread answered the close: it left its run and ended its warm-up there, not after 10,000 runs (RELEASE_WAIT_MS: ${RELEASE_WAIT_MS} ms)`);
  t.ok(afterClose, 'the thread ended only after close() was called');
  t.comment(`thread exit code ${code}`);
  t.notOk(reports.some((r) => r.kind === 'warm'), 'the warm-up was cut short, never reported warm');
  t.same(reports.filter((r) => r.kind === 'error'), [], 'no runtime error: no session released under a run');
  t.same(errors, [], 'no worker error');
});
