import t from 'tap';
import { bgr80Single, rawColor, rawSequence, rawSingle } from '../inference/reference.ts';
import { color, crop, frameInput, postVerify, request, sequence, single } from '../helpers/captures.ts';
import { startApi } from '../helpers/api.ts';
import { makeToken, waitReady } from '../helpers/server.ts';

// Result records over real HTTP with the real pool, checked against scores computed directly
// with onnxruntime-node (test/inference/reference.ts writes the preprocessing out by hand).
// The service's app and its own engine (startEngine, the pool threads) in process
// (test/helpers/api.ts; the file was four server starts, one per engine setting).
const KEYS = ['capture_id', 'mode', 'status', 'alive', 'score', 'reason', 'final_window_frames', 'window_frame_indices', 'reset_events',
  'single_score', 'temporal_logit', 'color_logits', 'model_set', 'decision_policy', 'threshold', 'min_final_frames'];

t.test('raw_v1 on WASM: every mode, scores equal onnxruntime-node within 1e-5', async (t) => {
  const server = await startApi({ engine: 'real', ready: true, env: { INFERENCE_BACKEND: 'wasm' } });
  t.teardown(() => server.stop());
  const ready = await (await fetch(`${server.baseUrl}/health/ready`)).json();
  t.equal(ready.modules.rgb_liveness.execution_provider, 'wasm');
  const { token } = await makeToken(server, ['rgb_liveness:100:day', 'color_liveness:100:day']);

  const r = await postVerify(server.baseUrl, token, 'rgb_liveness', request([single({ id: 's', seed: 3 }), sequence(4, { id: 'q' })]));
  t.equal(r.status, 200);
  const [s, q] = r.json.results;
  for (const rec of r.json.results) t.same(Object.keys(rec).sort(), [...KEYS].sort(), 'every key present');
  t.match(s, { capture_id: 's', mode: 'rgb_single', status: 'ok', reason: null, final_window_frames: 0, window_frame_indices: [], reset_events: [], temporal_logit: null, color_logits: null, model_set: 'raw_v1', decision_policy: 'single_frame_v1', min_final_frames: null });
  const want = await rawSingle(crop(3));
  t.ok(Math.abs(s.score - want) <= 1e-5, `single score ${s.score} vs ${want}`);
  t.equal(s.single_score, s.score);
  t.equal(s.alive, s.score > s.threshold, 'alive iff score > threshold');
  t.match(q, { capture_id: 'q', mode: 'rgb_sequence', status: 'ok', final_window_frames: 4, window_frame_indices: [0, 1, 2, 3], reset_events: [], single_score: null, color_logits: null, min_final_frames: 1 });
  const seq = await rawSequence([1, 2, 3, 4].map(crop));
  t.ok(Math.abs(q.score - seq.score) <= 1e-5, `sequence score ${q.score} vs ${seq.score}`);
  t.ok(Math.abs(q.temporal_logit - seq.temporal_logit) <= 1e-5);

  const c = await postVerify(server.baseUrl, token, 'color_liveness', request([color({ id: 'c' })]));
  const rec = c.json.results[0];
  t.match(rec, { mode: 'color', status: 'ok', single_score: null, temporal_logit: null, min_final_frames: null, final_window_frames: 0, decision_policy: 'color_fusion_v1' });
  const col = await rawColor([10, 11, 12, 13].map(crop));
  t.ok(Math.abs(rec.score - col.score) <= 1e-5, `colour score ${rec.score} vs ${col.score}`);
  t.ok(Math.abs(rec.color_logits.difference - col.difference) <= 1e-5);
  t.ok(Math.abs(rec.color_logits.appearance - col.appearance) <= 1e-5);
  t.ok(Math.abs(rec.color_logits.fused - col.fused) <= 1e-5);

  // complete=true with the red phase dropped: incomplete_capture is only for complete=false
  const dropped = color({ id: 'c-red-dropped' });
  const red = dropped.frames[1]!;
  dropped.frames[1] = { timestamp_us: red.timestamp_us, status: 'dropped', phase: 'red', display_time_us: (red as any).display_time_us };
  const d = await postVerify(server.baseUrl, token, 'color_liveness', request([dropped]));
  t.equal(d.status, 200, d.text);
  t.match(d.json.results[0], { status: 'retry', reason: 'insufficient_final_window', alive: null, score: null, color_logits: null });

  t.test('sequence windows and retries', async (t) => {
    const frames = [0, 1, 2, 3, 4, 5].map((i) => frameInput(i, { seed: i + 1 }));
    // a face_unavailable event in the middle resets the window; the window is what follows
    const withGap = { capture_id: 'gap', mode: 'rgb_sequence' as const, frames: [frames[0]!, frames[1]!, { timestamp_us: 1_070_000, status: 'face_unavailable' as const }, frames[3]!, frames[4]!] };
    const failedLast = { capture_id: 'last', mode: 'rgb_sequence' as const, frames: [frames[0]!, frames[1]!, { timestamp_us: 1_070_000, status: 'dropped' as const }] };
    const incomplete = { capture_id: 'inc', mode: 'rgb_sequence' as const, complete: false, frames: [frames[0]!] };
    const r = await postVerify(server.baseUrl, token, 'rgb_liveness', request([withGap, failedLast, incomplete]));
    t.equal(r.status, 200);
    const [gap, last, inc] = r.json.results;
    t.match(gap, { status: 'ok', final_window_frames: 2, window_frame_indices: [3, 4] });
    t.same(gap.reset_events.map((e: any) => e.reason), ['face_unavailable']);
    const g = await rawSequence([4, 5].map(crop));
    t.ok(Math.abs(gap.score - g.score) <= 1e-5, 'window score from the frames after the reset');
    t.match(last, { status: 'retry', reason: 'terminal_frame_unavailable', alive: null, score: null });
    t.match(inc, { status: 'retry', reason: 'incomplete_capture', alive: null, score: null });
    t.equal(r.json.charged_units, 3, 'retry results charge');
  });
});

t.test('the second model set deploys by manifest only and matches onnxruntime', async (t) => {
  const server = await startApi({ engine: 'real', env: { MODEL_SET: 'bgr80_ensemble_v1', INFERENCE_BACKEND: 'wasm' } });
  t.teardown(() => server.stop());
  // color_liveness is not in that set: the service stays not ready until the operator disables it
  const { token } = await makeToken(server, ['rgb_liveness:100:day']);
  t.equal((await server.cli(['module', 'disable', 'color_liveness'])).code, 0);
  const ready = await waitReady(server.baseUrl, 60_000);
  t.equal(ready.status, 'ready');
  t.equal(ready.modules.rgb_liveness.model_set, 'bgr80_ensemble_v1');
  const r = await postVerify(server.baseUrl, token, 'rgb_liveness', request([single({ seed: 5 })]));
  t.equal(r.status, 200);
  const rec = r.json.results[0];
  t.equal(rec.model_set, 'bgr80_ensemble_v1');
  const want = await bgr80Single(crop(5));
  t.ok(Math.abs(rec.score - want) <= 1e-5, `served ${rec.score} vs onnxruntime ${want}`);
});

t.test('the native backend serves the same scores', async (t) => {
  const server = await startApi({ engine: 'real', ready: true, env: { INFERENCE_BACKEND: 'native' } });
  t.teardown(() => server.stop());
  const ready = await (await fetch(`${server.baseUrl}/health/ready`)).json();
  t.equal(ready.modules.rgb_liveness.execution_provider, 'native');
  const { token } = await makeToken(server, ['rgb_liveness:100:day']);
  const r = await postVerify(server.baseUrl, token, 'rgb_liveness', request([single({ seed: 3 })]));
  const want = await rawSingle(crop(3));
  t.ok(Math.abs(r.json.results[0].score - want) <= 1e-5);
});

t.test('/health/ready is 503 until warm, and verify answers module_unavailable meanwhile', async (t) => {
  // 1,000 warm-up runs a graph on one thread: seconds, against the few milliseconds the token and
  // the call below take. Readiness never turns back, so the check after the call proves the call
  // came during the warm-up; the test then requires its refusal (it used to accept a 200 as
  // "warm-up finished meanwhile", and passed with the readiness check planted away).
  const server = await startApi({ engine: 'real', env: { WARMUP_RUNS: '1000', INFERENCE_THREADS: '1' } });
  t.teardown(() => server.stop());
  const first = await fetch(`${server.baseUrl}/health/ready`);
  const body = await first.json();
  t.equal(first.status, 503);
  t.equal(body.status, 'not_ready');
  t.equal(body.modules.rgb_liveness.ready, false);
  const { token } = await makeToken(server, ['rgb_liveness:100:day']);
  const r = await postVerify(server.baseUrl, token, 'rgb_liveness', request([single()]));
  const modules = await (await fetch(`${server.baseUrl}/v1/modules`, { headers: { authorization: `Bearer ${token}` } })).json();
  const after = await fetch(`${server.baseUrl}/health/ready`);
  t.equal(after.status, 503, 'still warming up after the call (the precondition: the call came during the warm-up)');
  t.equal(r.status, 503, r.text.slice(0, 200));
  t.equal(r.json.error.code, 'module_unavailable');
  t.ok(r.headers.get('retry-after'));
  t.equal(modules.modules[0].status, 'unavailable');
});
