import { once } from 'node:events';
import { join } from 'node:path';
import type { Worker } from 'node:worker_threads';
import t from 'tap';
import { loadManifest } from '../../src/inference/index.ts';
import { InferencePool, RELEASE_WAIT_MS } from '../../src/inference/pool.ts';
import type { WorkerReport } from '../../src/inference/protocol.ts';
import { tempDir } from '../helpers/server.ts';
import { waitFor } from '../helpers/wait.ts';
import { slowGraph, writeSet } from './hostile-graphs.ts';

// Issue 43 (found in model-load-timeout.test.ts): a set refused at MODEL_LOAD_TIMEOUT_SECONDS
// has its WASM pool thread inside a warm-up run minutes long. That thread cannot read the
// pool's close message before the run returns, and close() waited RELEASE_WAIT_MS (30 s) for its
// answer: the thread kept computing that long, and a SIGTERM waited behind it. A WASM thread
// ends safely mid-run, so close() now ends it at once. (A native thread is still waited for:
// terminating onnxruntime-node mid-call aborts the process, issue 39: pool-close-native.test.ts.)
// In process, on the pool itself: no server is needed to see the thread end.

t.test('close() ends a WASM pool thread inside a long run at once, without waiting for its answer', async (t) => {
  const root = tempDir('pool-close-');
  // chained 2048x2048 products: minutes on one WASM thread (model-load-timeout.test.ts)
  const dir = writeSet(root, 'slow_v1', slowGraph(32, 2048, 8));
  const reports: WorkerReport[] = [];
  const errors: Error[] = [];
  const pool = new InferencePool(
    { manifest: loadManifest(dir), modules: ['rgb_liveness'], provider: 'wasm', sessionThreads: 1, warmupRuns: 1 },
    1,
    (r) => reports.push(r),
    (e) => errors.push(e),
  );
  // the pool's one thread (piscina's own list: the pool does not expose its threads)
  const thread = await waitFor(() => (pool as unknown as { piscina: { threads: Worker[] } }).piscina.threads[0], { what: 'the pool thread' });
  const exited = once(thread, 'exit').then(() => performance.now());
  await waitFor(() => reports.some((r) => r.kind === 'provider'), { what: 'the WASM runtime loaded', timeoutMs: 120_000 });
  // Inside the warm-up run: the thread's event loop is busy without a pause for a whole
  // half-second (the tiny graph's load takes milliseconds; the run, minutes). Polled, not slept.
  let before = thread.performance.eventLoopUtilization();
  await waitFor(() => {
    const now = thread.performance.eventLoopUtilization();
    const d = thread.performance.eventLoopUtilization(now, before);
    before = now;
    return d.idle === 0 && d.active >= 500;
  }, { what: 'the pool thread inside its warm-up run', intervalMs: 500, timeoutMs: 120_000 });
  t.notOk(reports.some((r) => r.kind === 'warm'), 'the warm-up has not finished');

  const t0 = performance.now();
  const answered = await pool.close();
  const closedAt = performance.now();
  const end = await exited;
  t.comment(`close() returned after ${Math.round(closedAt - t0)} ms; the thread ended ${Math.round(end - t0)} ms after close() was called`);
  // without the fix: false, after RELEASE_WAIT_MS, the thread computing all that time
  t.equal(answered, true, `close() did not wait out RELEASE_WAIT_MS (${RELEASE_WAIT_MS} ms) for an answer the thread cannot give`);
  t.ok(end <= closedAt, 'the thread had ended when close() returned');
  t.same(errors, [], 'no worker error');
});
