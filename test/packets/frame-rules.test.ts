import t from 'tap';
import { brief, color, failFrame, issuesOf, okFrame, sequence, single } from './fixtures/metadata.ts';

t.test('source_index and timestamp_us: non-negative integers, strictly increasing', async (t) => {
  const s = sequence(4);
  s.frames[0].source_index = 0;
  s.frames[0].timestamp_us = 0;
  t.same(issuesOf(s), [], 'zero is allowed');
  const eq = sequence(3);
  eq.frames[2].source_index = eq.frames[1].source_index;
  eq.frames[2].timestamp_us = eq.frames[1].timestamp_us;
  const issues = issuesOf(eq);
  t.same(brief(issues), ['body.metadata.frames.2.source_index:not_increasing', 'body.metadata.frames.2.timestamp_us:not_increasing']);
  t.same(issues[0].ctx, { previous: eq.frames[1].source_index });
  const back = sequence(3);
  back.frames[1].timestamp_us = back.frames[0].timestamp_us - 1;
  t.same(brief(issuesOf(back)), ['body.metadata.frames.1.timestamp_us:not_increasing']);
  const plusOne = sequence(3);
  plusOne.frames[1].timestamp_us = plusOne.frames[0].timestamp_us + 1;
  t.same(issuesOf(plusOne), [], 'one microsecond later is increasing');
  const neg = sequence(2);
  neg.frames[0].source_index = -1;
  neg.frames[0].timestamp_us = -5;
  t.same(brief(issuesOf(neg)), ['body.metadata.frames.0.source_index:greater_than_equal', 'body.metadata.frames.0.timestamp_us:greater_than_equal']);
  const huge = sequence(1);
  huge.frames[0].timestamp_us = 2 ** 53;
  t.same(brief(issuesOf(huge)), ['body.metadata.frames.0.timestamp_us:less_than_equal'], 'beyond 2^53-1 order cannot be decided');
  const failures = sequence(0);
  failures.frames = [failFrame(3), failFrame(3)];
  t.same(brief(issuesOf(failures)), ['body.metadata.frames.1.source_index:not_increasing', 'body.metadata.frames.1.timestamp_us:not_increasing'], 'failure events are ordered too');
});

t.test('status ok requires source_size, eyes_xy and image', async (t) => {
  for (const key of ['source_size', 'eyes_xy', 'image']) {
    const s = single();
    delete s.frames[0][key];
    const issues = issuesOf(s);
    t.same(brief(issues), [`body.metadata.frames.0.${key}:missing`], key);
    t.same(issues[0].ctx, { status: 'ok' });
  }
});

t.test('failure events carry no image data', async (t) => {
  for (const status of ['dropped', 'face_unavailable'] as const) {
    const f = { ...okFrame(0), status };
    const issues = issuesOf(single({ frames: [f] }));
    t.same(brief(issues), [
      'body.metadata.frames.0.source_size:field_forbidden',
      'body.metadata.frames.0.eyes_xy:field_forbidden',
      'body.metadata.frames.0.image:field_forbidden',
    ], status);
  }
  t.same(issuesOf(single({ frames: [failFrame(0)] })), []);
});

t.test('RGB frames omit phase and display_time_us', async (t) => {
  const s = sequence(2);
  s.frames[1].phase = 'white';
  s.frames[1].display_time_us = 10;
  t.same(brief(issuesOf(s)), ['body.metadata.frames.1.phase:field_forbidden', 'body.metadata.frames.1.display_time_us:field_forbidden']);
  const f = single({ frames: [{ ...failFrame(0), phase: 'red' }] });
  t.same(brief(issuesOf(f)), ['body.metadata.frames.0.phase:field_forbidden']);
});

t.test('source_size: integers >= 2, fixed within a capture', async (t) => {
  const s = sequence(3);
  for (const f of s.frames) {
    f.source_size = [2, 2];
    f.eyes_xy = [[0, 0], [2, 2]];
  }
  t.same(issuesOf(s), [], '2x2 is the smallest source');
  const small = single();
  small.frames[0].source_size = [1, 480];
  t.same(brief(issuesOf(small)), ['body.metadata.frames.0.source_size.0:greater_than_equal']);
  const frac = single();
  frac.frames[0].source_size = [640.5, 480];
  t.same(brief(issuesOf(frac)), ['body.metadata.frames.0.source_size.0:int_from_float']);
  const three = single();
  three.frames[0].source_size = [640, 480, 3];
  t.same(brief(issuesOf(three)), ['body.metadata.frames.0.source_size:too_long']);
  const changed = sequence(4);
  changed.frames[2].source_size = [480, 640];
  const issues = issuesOf(changed);
  t.same(brief(issues), ['body.metadata.frames.2.source_size:source_size_changed']);
  t.same(issues[0].ctx, { expected: [640, 480], first_frame_index: 0 });
  const gap = sequence(0);
  gap.frames = [okFrame(0), failFrame(1), okFrame(2)];
  gap.frames[2].source_size = [641, 480];
  t.same(brief(issuesOf(gap)), ['body.metadata.frames.2.source_size:source_size_changed'], 'compared across failure events');
});

t.test('eyes_xy: finite, inside [0,w]x[0,h], sorted by x, x1 - x0 >= 2', async (t) => {
  const at = (eyes: unknown, size = [640, 480]) => {
    const s = single();
    s.frames[0].eyes_xy = eyes;
    s.frames[0].source_size = size;
    return brief(issuesOf(s));
  };
  t.same(at([[0, 0], [640, 480]]), [], 'both image corners, edges included');
  t.same(at([[638, 0], [640, 480]]), [], 'x1 - x0 = 2 exactly');
  t.same(at([[638.5, 0], [640, 480]]), ['body.metadata.frames.0.eyes_xy:eyes_too_close']);
  t.same(at([[300, 10], [300, 20]]), ['body.metadata.frames.0.eyes_xy:eyes_too_close']);
  t.same(at([[340, 200], [300, 200]]), ['body.metadata.frames.0.eyes_xy:eyes_not_sorted']);
  t.same(at([[-0.001, 10], [100, 10]]), ['body.metadata.frames.0.eyes_xy.0:eyes_outside_image']);
  t.same(at([[10, 10], [640.001, 10]]), ['body.metadata.frames.0.eyes_xy.1:eyes_outside_image']);
  t.same(at([[10, 480.5], [100, -1]]), ['body.metadata.frames.0.eyes_xy.0:eyes_outside_image', 'body.metadata.frames.0.eyes_xy.1:eyes_outside_image']);
  t.same(at([[10, 10], [100]]), ['body.metadata.frames.0.eyes_xy.1:too_short']);
  t.same(at([[10, 10], [100, '5']]), ['body.metadata.frames.0.eyes_xy.1.1:float_type']);
  t.same(at([[10, 10], [100, 5]], [1, 1]).sort(), [
    'body.metadata.frames.0.source_size.0:greater_than_equal',
    'body.metadata.frames.0.source_size.1:greater_than_equal',
  ], 'without a valid size the inside check is skipped, not guessed');
  // JSON has no Infinity, but 1e400 parses to it.
  const text = JSON.stringify(single()).replace('"eyes_xy":[[300,200]', '"eyes_xy":[[1e400,200]');
  t.same(brief(issuesOf(text)), ['body.metadata.frames.0.eyes_xy.0.0:finite_number']);
});
