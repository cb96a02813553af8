import t from 'tap';
import { postVerify, request, single } from '../helpers/captures.ts';
import { makeToken, startServer } from '../helpers/server.ts';
import { SERVICE_VERSION } from '../../src/version.ts';
import { waitFor } from '../helpers/wait.ts';

// The operator's view through the real server: /metrics after a known mix of calls, and the
// request log lines those calls left.

interface Sample { name: string; labels: Record<string, string>; value: number }

function parse(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = l[2]!;
    out.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return out;
}

function find(samples: Sample[], name: string, labels: Record<string, string> = {}): Sample[] {
  return samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
}

const server = await startServer({ ready: true, env: { TEST_INFERENCE_FAIL_PREFIX: 'fail-' } });
t.teardown(() => server.stop());

t.test('verdicts, units, quota rejections, readiness and process metrics reach /metrics; log lines carry the call', async (t) => {
  const one = await makeToken(server, ['rgb_liveness:1:day']);
  const five = await makeToken(server, ['rgb_liveness:5:day']);

  const ok = await postVerify(server.baseUrl, one.token, 'rgb_liveness', request([single({ id: 'm-ok' })]));
  t.equal(ok.status, 200);
  const r0 = ok.json.results[0];
  const verdict = r0.status === 'retry' ? 'retry' : r0.alive ? 'live' : 'non_live';
  const over = await postVerify(server.baseUrl, one.token, 'rgb_liveness', request([single({ id: 'm-over' })]));
  t.equal(over.status, 429);
  const failed = await postVerify(server.baseUrl, five.token, 'rgb_liveness', request([single({ id: 'fail-1' })]));
  t.equal(failed.status, 500);

  const res = await fetch(`${server.baseUrl}/metrics`);
  t.equal(res.status, 200);
  const samples = parse(await res.text());
  const value = (name: string, labels: Record<string, string>) => find(samples, name, labels).reduce((a, s) => a + s.value, 0);

  t.equal(value('lv_verdicts_total', { module: 'rgb_liveness', mode: 'rgb_single', verdict }), 1, `one ${verdict} verdict`);
  t.equal(find(samples, 'lv_verdicts_total').reduce((a, s) => a + s.value, 0), 1, 'the failed call left no verdict');
  t.equal(value('lv_units_total', { module: 'rgb_liveness', kind: 'charged' }), 2, 'the ok call and the failed call reserved a unit each');
  t.equal(value('lv_units_total', { module: 'rgb_liveness', kind: 'refunded' }), 1, 'the failed call was refunded');
  t.equal(value('lv_quota_rejections_total', { module: 'rgb_liveness' }), 1);
  t.equal(value('lv_verify_errors_total', { module: 'rgb_liveness', code: 'inference_failed' }), 1);
  t.equal(value('lv_model_ready', { module: 'rgb_liveness' }), 1);
  t.equal(value('lv_model_ready', { module: 'color_liveness' }), 1);
  // what an on-call engineer alerts on (issue 25): capacity, build, score drift
  const workers = [...new Set(find(samples, 'nodejs_heap_size_used_bytes').map((s) => s.labels.thread!).filter((th) => th.startsWith('api-')))].length;
  t.equal(value('lv_verify_slots', {}), 2 * workers, 'the host\'s verify slots, once (not once per worker)');
  t.equal(find(samples, 'lv_build_info', { version: SERVICE_VERSION, node: process.versions.node }).length, 1, 'build info');
  t.equal(value('lv_liveness_score_count', { module: 'rgb_liveness', mode: 'rgb_single' }), r0.score === null ? 0 : 1, 'the answered score is in the histogram');
  if (r0.score !== null) t.equal(value('lv_liveness_score_sum', { module: 'rgb_liveness', mode: 'rgb_single' }).toFixed(6), r0.score.toFixed(6));
  t.ok(find(samples, 'lv_inference_queue_wait_seconds', { quantile: '0.99' }).length === 1, 'queue wait reported');
  t.ok(value('lv_inference_compute_seconds', { quantile: '1' }) > 0, 'compute time reported');
  t.ok(find(samples, 'lv_verify_busy_total').length === 1, 'admission rejections reported');
  // each step counts the calls that reached it: the 429 stopped in reserve, the 500 in infer
  const steps = { accept: 3, receive: 3, validate: 3, reserve: 3, infer: 2, settle: 1, respond: 3 };
  for (const [step, calls] of Object.entries(steps)) {
    t.equal(value('lv_verify_step_seconds_count', { step }), calls, `${calls} call(s) timed in ${step}`);
    t.ok(value('lv_verify_step_seconds_sum', { step }) > 0, `${step} took time`);
  }

  const cpu = find(samples, 'process_cpu_user_seconds_total');
  t.equal(cpu.length, 1, 'process-wide CPU once, not once per thread');
  t.equal(cpu[0]!.labels.thread, 'main');
  const pool = [...new Set(find(samples, 'nodejs_heap_size_used_bytes').map((s) => s.labels.thread!).filter((th) => th.startsWith('inference-')))];
  t.ok(pool.length >= 1, `the inference pool threads report their own metrics (${pool.join(', ')})`);
  for (const thread of ['main', 'api-0', 'api-1', ...pool]) {
    t.equal(find(samples, 'nodejs_heap_size_used_bytes', { thread }).length, 1, `heap of ${thread}`);
    t.equal(find(samples, 'nodejs_eventloop_lag_p99_seconds', { thread }).length, 1, `event-loop delay of ${thread}`);
  }

  const rids = [ok.json.request_id, over.headers.get('x-request-id')!, failed.headers.get('x-request-id')!];
  const verifyLines = () => server.logLines().filter((l) => l.msg === 'request' && l.route === '/v1/modules/:module_id/verify');
  // the lines come through a pipe: wait for them, bounded
  await waitFor(() => rids.every((rid) => verifyLines().some((l) => l.request_id === rid)), { timeoutMs: 10_000, what: 'the three request log lines' });
  const lines = verifyLines();
  const line = (rid: string) => lines.find((l) => l.request_id === rid);
  t.match(line(ok.json.request_id), { module: 'rgb_liveness', token_id: one.id, units: 1, outcome: verdict, status: 200 });
  t.match(line(over.headers.get('x-request-id')!), { module: 'rgb_liveness', token_id: one.id, units: 0, outcome: 'error', code: 'quota_exceeded' });
  t.match(line(failed.headers.get('x-request-id')!), { module: 'rgb_liveness', token_id: five.id, units: 0, outcome: 'error', code: 'inference_failed' });
  const all = server.logs.join('\n');
  t.notOk(all.includes(one.token) || all.includes(five.token), 'no token in any log line');
});
