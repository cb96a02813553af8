import t from 'tap';
import { brief, color, failFrame, issuesOf, okFrame, sequence, single } from './fixtures/metadata.ts';

t.test('capture_id: 1 to 128 code points', async (t) => {
  t.same(issuesOf(single({ capture_id: 'a' })), []);
  t.same(issuesOf(single({ capture_id: 'a'.repeat(128) })), []);
  t.same(brief(issuesOf(single({ capture_id: 'a'.repeat(129) }))), ['body.metadata.capture_id:string_too_long']);
  t.same(brief(issuesOf(single({ capture_id: '' }))), ['body.metadata.capture_id:string_too_short']);
  // 128 astral characters are 256 UTF-16 code units but 128 characters as the spec counts them.
  const emoji = '\u{1F600}';
  t.same(issuesOf(single({ capture_id: emoji.repeat(128) })), []);
  const over = issuesOf(single({ capture_id: emoji.repeat(129) }));
  t.same(brief(over), ['body.metadata.capture_id:string_too_long']);
  t.same(over[0].ctx, { max_length: 128, actual_length: 129 });
  t.same(issuesOf(single({ capture_id: 'é'.repeat(128) })), [], 'BMP characters count one each');
  t.same(brief(issuesOf(single({ capture_id: 5 }))), ['body.metadata.capture_id:string_type']);
  t.same(brief(issuesOf(single({ capture_id: 'a\ud800b' }))), ['body.metadata.capture_id:string_unicode'], 'a lone high surrogate is not text');
  t.same(brief(issuesOf(single({ capture_id: '\udc00' }))), ['body.metadata.capture_id:string_unicode'], 'nor a lone low one');
  t.same(issuesOf(single({ capture_id: '\ud83d\ude00 \u2028\u202e' })), [], 'a pair is a character; other code points are text');
});

t.test('capture_id is unique within the request', async (t) => {
  const a = single({ capture_id: 'same' });
  const b = sequence(2, { capture_id: 'same' });
  const c = single({ capture_id: 'same' });
  const issues = issuesOf({ captures: [a, b, c] });
  t.same(brief(issues), [
    'body.metadata.captures.1.capture_id:duplicate_capture_id',
    'body.metadata.captures.2.capture_id:duplicate_capture_id',
  ]);
  t.same(issues[0].ctx, { first_index: 0 });
  t.same(issuesOf({ captures: [single({ capture_id: 'x' }), single({ capture_id: 'X' })] }), [], 'ids are case-sensitive');
});

t.test('mode belongs to the module of the path; one module per request', async (t) => {
  t.same(issuesOf({ captures: [single(), sequence(3)] }, 'rgb_liveness'), [], 'single and sequence share a request');
  t.same(brief(issuesOf(color(), 'rgb_liveness')), ['body.metadata.mode:mode_not_in_module']);
  t.same(brief(issuesOf(single(), 'color_liveness')), ['body.metadata.mode:mode_not_in_module']);
  const mixed = issuesOf({ captures: [single(), color(), sequence(2)] }, 'rgb_liveness');
  t.same(brief(mixed), ['body.metadata.captures.1.mode:mode_not_in_module']);
  const mixedColor = issuesOf({ captures: [color(), single()] }, 'color_liveness');
  t.same(brief(mixedColor), ['body.metadata.captures.1.mode:mode_not_in_module']);
  t.same(mixedColor[0].ctx, { module_id: 'color_liveness', allowed_modes: ['color'] });
});

t.test('capture_profile must match the mode exactly', async (t) => {
  const pairs: [string, string][] = [['rgb_single', 'rgb_single_v1'], ['rgb_sequence', 'rgb_contiguous_v1'], ['color', 'color_wrgb_v1']];
  for (const [mode, profile] of pairs) {
    for (const [, other] of pairs) {
      const packet = mode === 'rgb_single' ? single() : mode === 'rgb_sequence' ? sequence(2) : color();
      packet.capture_profile = other;
      const issues = issuesOf(packet, mode === 'color' ? 'color_liveness' : 'rgb_liveness');
      t.same(brief(issues), other === profile ? [] : ['body.metadata.capture_profile:capture_profile_mismatch'], `${mode} ${other}`);
    }
  }
  t.same(brief(issuesOf(single({ capture_profile: 'rgb_single_v2' }))), ['body.metadata.capture_profile:literal_error']);
});

t.test('rgb_single carries at most one event', async (t) => {
  t.same(issuesOf(single({ frames: [okFrame(0)] })), []);
  t.same(issuesOf(single({ frames: [failFrame(0, 'face_unavailable')] })), [], 'one failure event is allowed');
  const two = issuesOf(single({ frames: [okFrame(0), okFrame(1)] }));
  t.same(brief(two), ['body.metadata.frames:too_many_events']);
  t.same(two[0].ctx, { mode: 'rgb_single', max_events: 1, actual: 2 });
});

t.test('zero frames: accepted only with complete=false', async (t) => {
  t.same(brief(issuesOf(single({ frames: [] }))), ['body.metadata.frames:frames_empty']);
  t.same(brief(issuesOf(sequence(0))), ['body.metadata.frames:frames_empty']);
  t.same(issuesOf(single({ frames: [], complete: false })), []);
  t.same(issuesOf(sequence(0, { complete: false })), []);
  t.same(issuesOf(color(0, { complete: false }), 'color_liveness'), []);
});

t.test('a sequence may hold failure events and gaps', async (t) => {
  const s = sequence(0);
  s.frames = [okFrame(0), failFrame(1), failFrame(2, 'face_unavailable'), okFrame(5), okFrame(9)];
  t.same(issuesOf(s), []);
  t.same(issuesOf(sequence(128)), [], 'sequence length is not capped at the 20-frame window');
});
