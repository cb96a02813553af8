// Inference runs whole captures inside the pool: a 20-frame sequence is one task (one
// message to a pool worker, one back), a 32-capture batch of single frames is 8 tasks of
// 4 (the spec's internal maximum batch), and concurrent single-frame requests that wait
// for a busy pool share a model batch. Scores stay those of onnxruntime-node to 1e-6.
import { join } from 'node:path';
import { setImmediate as turn } from 'node:timers/promises';
import t from 'tap';
import { createInferenceEngine } from '../../src/inference/index.ts';
import { capture, clonePixels } from './helpers.ts';
import { rawSequence, rawSingle } from './reference.ts';

const MODELS = join(import.meta.dirname, '../../models');
const TOL = 1e-6;

// The first three tests share one engine (raw_v1, WASM, 2 pool threads), started once (issue
// 43: an engine start, its pool threads loading the runtime and warming up, is most of this
// file's CPU). Each counts tasks from the counters it read itself, and each awaits all of its
// calls, so the pool is idle again when the next test starts. The third had an engine of 1
// thread: packing does not depend on it (scheduler.ts: the captures queued in one turn gather
// into one group before any task leaves), and a capture sent alone would be a task of its own
// on 1 thread or 2.
const shared = createInferenceEngine({ modelsDir: MODELS, modelSet: 'raw_v1', backend: 'wasm', threads: 2, warmupRuns: 2, enabledModules: ['rgb_liveness'] });
t.teardown(() => shared.close());
const sharedStarted = shared.start();
sharedStarted.catch(() => {}); // awaited, and failing, in the tests that use it

t.test('a 20-frame sequence and a 32-capture batch cross threads a bounded number of times', async (t) => {
  const engine = shared;
  await sharedStarted;

  const seq = capture('seq20', 'rgb_sequence', Array.from({ length: 20 }, (_, i) => ({ seed: 100 + i })));
  const seqPx = clonePixels(seq) as Uint8Array[];
  let before = engine.counters();
  const [q] = await engine.infer({ module_id: 'rgb_liveness', captures: [seq] });
  let after = engine.counters();
  t.equal(after.tasks - before.tasks, 1, 'one pool task (2 thread crossings) for the whole sequence');
  t.equal(q.status, 'ok');
  t.equal(q.final_window_frames, 20);
  const ref = await rawSequence(seqPx);
  t.ok(Math.abs(q.score! - ref.score) < TOL, `sequence score ${q.score} vs onnxruntime-node ${ref.score}`);
  t.ok(Math.abs(q.temporal_logit! - ref.temporal_logit) < 1e-5, `temporal logit ${q.temporal_logit} vs ${ref.temporal_logit}`);

  const batch = Array.from({ length: 32 }, (_, i) => capture(`b${i}`, 'rgb_single', [{ seed: 200 + i }]));
  const batchPx = batch.map((c) => clonePixels(c)[0]!);
  before = engine.counters();
  const results = await engine.infer({ module_id: 'rgb_liveness', captures: batch });
  after = engine.counters();
  t.equal(after.tasks - before.tasks, 8, '32 single frames in 8 pool tasks of 4 (16 thread crossings)');
  t.equal(after.captures - before.captures, 32);
  const refs = await Promise.all(batchPx.map(rawSingle));
  let worst = 0;
  results.forEach((r, i) => {
    t.equal(r.capture_id, `b${i}`, 'records come back in request order');
    worst = Math.max(worst, Math.abs(r.score! - refs[i]));
  });
  t.ok(worst < TOL, `32 single scores match onnxruntime-node, worst difference ${worst}`);
});

t.test('single frames of concurrent requests waiting for a busy pool share one model batch', async (t) => {
  const engine = shared;
  await sharedStarted;
  // The four single frames are made before the sequences go: made between the turns, they took
  // the main thread about a quarter of a sequence's time in the pool (load ~28: ~30 ms a frame,
  // ~450 ms a sequence), a margin that a starved main thread could lose.
  const singleCaps = [0, 1, 2, 3].map((i) => capture(`one${i}`, 'rgb_single', [{ seed: 300 + i }]));
  const px = singleCaps.map((c) => clonePixels(c)[0]!);
  const start = engine.counters();
  // Two 20-frame sequences occupy both pool workers for tens to hundreds of milliseconds ...
  const busy = [1, 2].map((k) => engine.infer({
    module_id: 'rgb_liveness',
    captures: [capture(`busy${k}`, 'rgb_sequence', Array.from({ length: 20 }, (_, i) => ({ seed: k * 50 + i })))],
  }));
  await turn();
  const before = engine.counters();
  t.equal(before.tasks - start.tasks, 2, 'both sequences are with the pool');
  // ... while four single-frame requests arrive one event-loop turn apart.
  const singles: Promise<unknown>[] = [];
  for (const c of singleCaps) {
    singles.push(engine.infer({ module_id: 'rgb_liveness', captures: [c] }));
    await turn();
  }
  const records = (await Promise.all(singles)) as { score: number }[][];
  await Promise.all(busy);
  const after = engine.counters();
  t.equal(after.tasks - before.tasks, 1, 'the four waiting captures went as one task');
  for (const [i, [r]] of records.entries()) {
    const ref = await rawSingle(px[i]);
    t.ok(Math.abs(r.score - ref) < TOL, `request ${i}: ${r.score} vs ${ref}`);
  }
});

t.test('a capture that fails inside a shared task fails alone', async (t) => {
  const engine = shared;
  await sharedStarted;
  const caps = [0, 1, 2, 3].map((i) => capture(`r${i}`, 'rgb_single', [{ seed: 400 + i }]));
  const px = caps.map((c) => clonePixels(c)[0]!);
  // validation never lets this through; here it stands for any fault of one capture
  caps[2].pixels[0] = new Uint8Array(1);
  const before = engine.counters();
  // four requests in one turn: packed into one task
  const outcomes = await Promise.allSettled(caps.map((c) => engine.infer({ module_id: 'rgb_liveness', captures: [c] })));
  t.equal(engine.counters().tasks - before.tasks, 1, 'the four shared one task');
  t.equal(outcomes[2].status, 'rejected');
  t.match((outcomes[2] as PromiseRejectedResult).reason.message, /307200/);
  for (const i of [0, 1, 3]) {
    const o = outcomes[i];
    t.equal(o.status, 'fulfilled', `request ${i} is not failed by its neighbour`);
    if (o.status === 'fulfilled') {
      const ref = await rawSingle(px[i]);
      t.ok(Math.abs(o.value[0].score! - ref) < TOL, `request ${i}: ${o.value[0].score} vs ${ref}`);
    }
  }
});

t.test('with fixed-batch frame graphs single frames go one per task (no model batch to gain)', async (t) => {
  const engine = createInferenceEngine({
    modelsDir: MODELS, modelSet: 'bgr80_ensemble_v1', backend: 'wasm', threads: 1, warmupRuns: 1, enabledModules: ['rgb_liveness'],
  });
  t.teardown(() => engine.close());
  await engine.start();
  const caps = Array.from({ length: 6 }, (_, i) => capture(`f${i}`, 'rgb_single', [{ seed: 500 + i }]));
  const results = await engine.infer({ module_id: 'rgb_liveness', captures: caps });
  t.same(engine.counters(), { tasks: 6, captures: 6 });
  t.same(results.map((r) => r.capture_id), caps.map((c) => c.packet.capture_id));
});
