import t from 'tap';
import { brief, color, failFrame, issuesOf } from './fixtures/metadata.ts';

const C = 'color_liveness' as const;

t.test('four phases white, red, green, blue in order', async (t) => {
  t.same(issuesOf(color(4), C), []);
  const swapped = color(4);
  [swapped.frames[1].phase, swapped.frames[2].phase] = ['green', 'red'];
  const issues = issuesOf(swapped, C);
  t.same(brief(issues), ['body.metadata.frames.1.phase:phase_order', 'body.metadata.frames.2.phase:phase_order']);
  t.same(issues[0].ctx, { expected: 'red' });
  const missing = color(4);
  delete missing.frames[3].phase;
  t.same(brief(issuesOf(missing, C)), ['body.metadata.frames.3.phase:missing']);
});

t.test('a prefix of phases only with complete=false', async (t) => {
  for (let n = 0; n <= 4; n++) {
    t.same(issuesOf(color(n, { complete: false }), C), [], `${n} phases, complete=false`);
  }
  for (let n = 1; n < 4; n++) {
    const issues = issuesOf(color(n), C);
    t.same(brief(issues), ['body.metadata.frames:phases_incomplete'], `${n} phases, complete=true`);
  }
  const notPrefix = color(3, { complete: false });
  notPrefix.frames[0].phase = 'red';
  notPrefix.frames[1].phase = 'green';
  notPrefix.frames[2].phase = 'blue';
  t.equal(issuesOf(notPrefix, C).filter((i) => i.type === 'phase_order').length, 3, 'red, green, blue is not a prefix');
});

t.test('at most four colour events', async (t) => {
  const five = color(4);
  five.frames.push({ ...five.frames[3], source_index: 4, timestamp_us: five.frames[3].timestamp_us + 1, phase: 'white', display_time_us: undefined });
  five.frames[4].image = { ...five.frames[3].image, part: 'extra' };
  delete five.frames[4].display_time_us;
  const issues = issuesOf(five, C);
  t.same(brief(issues), ['body.metadata.frames:too_many_events']);
  t.same(issues[0].ctx, { mode: 'color', max_events: 4, actual: 5 });
});

t.test('colour failure events keep their phase and carry no image', async (t) => {
  const c = color(4);
  c.frames[2] = { ...failFrame(2, 'face_unavailable'), phase: 'green' };
  t.same(issuesOf(c, C), []);
  const noPhase = color(4);
  noPhase.frames[2] = failFrame(2);
  t.same(brief(issuesOf(noPhase, C)), ['body.metadata.frames.2.phase:missing']);
});

t.test('display_time_us: optional, <= own exposure, > previous exposure', async (t) => {
  const none = color(4);
  for (const f of none.frames) delete f.display_time_us;
  t.same(issuesOf(none, C), [], 'optional');
  const edges = color(4);
  edges.frames[0].display_time_us = 0;
  edges.frames[1].display_time_us = edges.frames[1].timestamp_us; // equal to own exposure
  edges.frames[2].display_time_us = edges.frames[1].timestamp_us + 1; // just after the previous
  t.same(issuesOf(edges, C), [], 'edges that hold');
  const late = color(4);
  late.frames[1].display_time_us = late.frames[1].timestamp_us + 1;
  const lateIssues = issuesOf(late, C);
  t.same(brief(lateIssues), ['body.metadata.frames.1.display_time_us:display_time_after_exposure']);
  t.same(lateIssues[0].ctx, { timestamp_us: late.frames[1].timestamp_us });
  const early = color(4);
  early.frames[2].display_time_us = early.frames[1].timestamp_us;
  t.same(brief(issuesOf(early, C)), ['body.metadata.frames.2.display_time_us:display_time_not_after_previous']);
  const neg = color(4);
  neg.frames[0].display_time_us = -1;
  t.same(brief(issuesOf(neg, C)), ['body.metadata.frames.0.display_time_us:greater_than_equal']);
  const frac = color(4);
  frac.frames[0].display_time_us = 1.5;
  t.same(brief(issuesOf(frac, C)), ['body.metadata.frames.0.display_time_us:int_from_float']);
});

t.test('an empty colour capture claiming completeness gets one item, not two', async (t) => {
  t.same(brief(issuesOf(color(0), C)), ['body.metadata.frames:frames_empty']);
});
