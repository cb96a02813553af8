import t from 'tap';
import { MetricsGathering } from '../../src/cluster/metrics-gathering.ts';
import { aggregateMetrics, type MetricsSnapshot } from '../../src/observability/index.ts';

// The main thread's gathering of the API workers' metrics for /metrics
// (src/cluster/metrics-gathering.ts), in process: workers are names, a snapshot a counter.
// Through the real server, /metrics is read by test/observability/traces.test.ts and
// many others.

const snap = (worker: string, value: number): MetricsSnapshot => [{ name: 'lv_test', help: 'h', type: 'counter', values: [{ value, labels: { worker } }], aggregator: 'sum' }] as unknown as MetricsSnapshot;
const valuesOf = (snapshots: MetricsSnapshot[]) => snapshots.map((s) => (s as any)[0].values[0]) as { value: number; labels: { worker: string } }[];

function harness(workers: string[], timeoutMs = 60_000) {
  const asked: { w: string; id: number }[] = [];
  const late: { late: string[]; stale: string[] }[] = [];
  let finished = 0;
  const g = new MetricsGathering<string, { value: number; labels: { worker: string } }[]>({
    workers: () => workers,
    ask: (w, id) => void asked.push({ w, id }),
    finish: async (s) => {
      finished++;
      return valuesOf(s);
    },
    late: (l, stale) => void late.push({ late: l, stale }),
    timeoutMs,
  });
  const answer = (w: string, value: number) => g.answered(w, asked.filter((a) => a.w === w).at(-1)!.id, snap(w, value));
  return { g, asked, late, answer, finished: () => finished };
}

t.test('fifty scrapes at once: one broadcast, one aggregation, one answer for all', async (t) => {
  const h = harness(['a', 'b', 'c']);
  const scrapes = Array.from({ length: 50 }, () => h.g.gather());
  t.equal(h.asked.length, 3, 'each worker asked once');
  h.answer('a', 1);
  h.answer('b', 2);
  t.ok(h.g.pending, 'still waiting for c');
  h.answer('c', 3);
  const answers = await Promise.all(scrapes);
  t.equal(h.finished(), 1, 'aggregated once');
  t.ok(answers.every((a) => a === answers[0]), 'the same answer for every scrape');
  t.same(answers[0]!.map((v) => v.value), [1, 2, 3]);
  t.notOk(h.g.pending, 'nothing kept once answered');
  // the next scrape is a new round
  const next = h.g.gather();
  t.equal(h.asked.length, 6);
  for (const [w, v] of [['a', 4], ['b', 5], ['c', 6]] as const) h.answer(w, v);
  t.same((await next).map((v) => v.value), [4, 5, 6]);
  t.same(h.late, [], 'nobody late');
});

t.test('a worker that never answers: the deadline answers with what arrived and drops the round', async (t) => {
  const h = harness(['a', 'b'], 50);
  const first = h.g.gather();
  h.answer('a', 1);
  // the deadline ends it: b never answers
  t.same((await first).map((v) => v.labels.worker), ['a'], 'answered without b, which never sent a snapshot');
  t.notOk(h.g.pending, 'the round is dropped');
  t.same(h.late, [{ late: ['b'], stale: [] }], 'the late worker is reported');
  // b answers late: kept as its last snapshot, for the next scrape it misses
  h.g.answered('b', h.asked.find((a) => a.w === 'b')!.id, snap('b', 7));
  t.notOk(h.g.pending, 'a late answer starts nothing');
  const second = h.g.gather();
  h.answer('a', 2);
  t.same((await second).map((v) => [v.labels.worker, v.value]), [['a', 2], ['b', 7]], 'b\'s last snapshot stands in for it: its counters do not go back');
  t.same(h.late[1], { late: ['b'], stale: ['b'] });
});

t.test('a worker that exits: the round completes without it, and its last counts stay', async (t) => {
  const workers = ['a', 'b'];
  const h = harness(workers);
  const first = h.g.gather();
  h.answer('a', 1);
  h.answer('b', 2);
  await first;
  const second = h.g.gather();
  h.answer('a', 3);
  workers.splice(1, 1);
  h.g.forget('b');
  t.same((await second).map((v) => [v.labels.worker, v.value]), [['a', 3], ['b', 2]], 'completed at once, b by the counts of its last snapshot');
  t.same(h.late, []);
});

t.test('retired workers: counters and histograms summed under their labels, gauges dropped; a retiring worker\'s last figures count', async (t) => {
  const figures = (counter: number, bucket: number, gauge: number, thread = 'api-0') => [
    { name: 'c_total', help: 'h', type: 'counter', aggregator: 'sum', values: [{ value: counter, labels: { route: '/x' } }] },
    { name: 'h_seconds', help: 'h', type: 'histogram', aggregator: 'sum', values: [
      { value: bucket, labels: { le: 1, thread }, metricName: 'h_seconds_bucket' },
      { value: bucket, labels: { thread }, metricName: 'h_seconds_count' },
    ] },
    { name: 'g', help: 'h', type: 'gauge', aggregator: 'sum', values: [{ value: gauge, labels: {} }] },
  ] as unknown as MetricsSnapshot;
  const workers = ['a'];
  let seen: MetricsSnapshot[] = [];
  const asked: number[] = [];
  const g = new MetricsGathering<string, null>({
    workers: () => workers,
    ask: (_w, id) => void asked.push(id),
    finish: async (s) => {
      seen = s;
      return null;
    },
  });
  const round = g.gather();
  g.answered('a', asked.at(-1)!, figures(5, 2, 9));
  await round;
  // a retires: its last figures come unasked, then its thread ends
  g.final('a', figures(8, 3, 9));
  g.forget('a');
  workers[0] = 'a2';
  g.forget('gone-without-a-snapshot');
  // a2 (same labels) dies after one answer; a3 takes its place
  const second = g.gather();
  g.answered('a2', asked.at(-1)!, figures(4, 1, 7));
  await second;
  g.forget('a2');
  workers[0] = 'a3';
  const third = g.gather();
  g.answered('a3', asked.at(-1)!, figures(1, 1, 5));
  await third;
  const merged = aggregateMetrics(seen);
  const text = (await merged).text;
  t.match(text, /^c_total\{route="\/x"\} 13$/m, '8 + 4 retired, + 1 live');
  t.match(text, /^h_seconds_bucket\{le="1",thread="api-0"\} 5$/m, '3 + 1 retired, + 1 live');
  t.match(text, /^h_seconds_count\{thread="api-0"\} 5$/m);
  t.match(text, /^g 5$/m, 'the gauge is the live worker\'s only');
});

t.test('no workers: answered at once', async (t) => {
  const h = harness([]);
  t.same(await h.g.gather(), []);
  t.notOk(h.g.pending);
});

t.test('an aggregation that fails rejects every scrape of the round, and the next round starts afresh', async (t) => {
  let fail = true;
  const g = new MetricsGathering<string, string>({
    workers: () => ['a'],
    ask: (w, id) => queueMicrotask(() => g.answered(w, id, snap(w, 1))),
    finish: async () => {
      if (fail) throw new Error('aggregation failed');
      return 'ok';
    },
  });
  const both = [g.gather(), g.gather()];
  for (const p of both) await t.rejects(p, /aggregation failed/);
  fail = false;
  t.equal(await g.gather(), 'ok');
});
