import t from 'tap';
import { brief, color, issuesOf, okFrame, sequence, single } from './fixtures/metadata.ts';
import { parseMetadata } from '../../src/packets/validate.ts';

t.test('valid packets of every mode are accepted and their images listed in order', async (t) => {
  t.same(issuesOf(single()), []);
  t.same(issuesOf(sequence(20)), []);
  t.same(issuesOf(color(4), 'color_liveness'), []);
  const seq = sequence(3);
  const parsed = parseMetadata(JSON.stringify(seq), 'rgb_liveness');
  t.equal(parsed.batch, false);
  t.equal(parsed.captures.length, 1);
  t.same(parsed.images.map((r) => [r.part, r.frameIndex, r.captureIndex]), seq.frames.map((f: any, i: number) => [f.image.part, i, 0]));
  t.same(parsed.images[2].loc, ['body', 'metadata', 'frames', 2, 'image']);
  const batch = { captures: [single(), sequence(2)] };
  const p2 = parseMetadata(JSON.stringify(batch), 'rgb_liveness');
  t.equal(p2.batch, true);
  t.same(p2.images[2].loc, ['body', 'metadata', 'captures', 1, 'frames', 1, 'image']);
});

t.test('invalid JSON is one json_invalid item at the metadata field', async (t) => {
  for (const text of ['{', '', 'nul', '{"a":1}x', "{'a':1}"]) {
    const issues = issuesOf(text);
    t.equal(issues.length, 1, text);
    t.same(issues[0].loc, ['body', 'metadata']);
    t.equal(issues[0].type, 'json_invalid');
  }
});

t.test('a non-object metadata is a dict_type at the metadata field', async (t) => {
  for (const v of [[], 3, '"x"', null, true]) {
    t.same(brief(issuesOf(v)), ['body.metadata:dict_type'], JSON.stringify(v));
  }
});

t.test('unknown fields are rejected at every level, batch locs include the capture', async (t) => {
  const p = single({ threshold: 0.5 });
  p.frames[0].label = 'live';
  p.frames[0].image.model = 'x';
  t.same(brief(issuesOf(p)).sort(), [
    'body.metadata.frames.0.image.model:extra_forbidden',
    'body.metadata.frames.0.label:extra_forbidden',
    'body.metadata.threshold:extra_forbidden',
  ]);
  const b = { captures: [single(), single()], model_set: 'x' };
  b.captures[1].frames[0].eyes = 1;
  t.same(brief(issuesOf(b)).sort(), [
    'body.metadata.captures.1.frames.0.eyes:extra_forbidden',
    'body.metadata.model_set:extra_forbidden',
  ]);
  const item = issuesOf(single({ threshold: 0.5 }))[0];
  t.equal(item.input, 0.5, 'the offending value is echoed');
});

t.test('every top-level packet field is required; one missing item each, not two', async (t) => {
  for (const key of ['protocol_version', 'capture_id', 'mode', 'capture_profile', 'preprocess_profile', 'complete', 'frames']) {
    const p = single();
    delete p[key];
    const issues = issuesOf(p).filter((i) => i.loc[2] === key);
    t.same(brief(issues), [`body.metadata.${key}:missing`], key);
  }
  for (const key of ['source_index', 'timestamp_us', 'status']) {
    const p = single();
    delete p.frames[0][key];
    t.same(brief(issuesOf(p)), [`body.metadata.frames.0.${key}:missing`], key);
  }
  for (const key of ['part', 'encoding', 'sha256']) {
    const p = single();
    delete p.frames[0].image[key];
    t.same(brief(issuesOf(p)), [`body.metadata.frames.0.image.${key}:missing`], key);
  }
});

t.test('protocol_version is exactly 1, preprocess_profile exactly eye_crop_320_v1', async (t) => {
  for (const v of [0, 2, '1', 1.5, true]) {
    t.same(brief(issuesOf(single({ protocol_version: v }))), ['body.metadata.protocol_version:literal_error'], String(v));
  }
  t.same(issuesOf(single({ protocol_version: 1.0 })), [], '1.0 is the integer 1 in JSON');
  const wrong = issuesOf(single({ preprocess_profile: 'face_box_320' }));
  t.same(brief(wrong), ['body.metadata.preprocess_profile:literal_error']);
  t.equal(wrong[0].input, 'face_box_320');
});

t.test('enumerations: mode, status, encoding, phase', async (t) => {
  t.same(brief(issuesOf(single({ mode: 'video' }))), ['body.metadata.mode:literal_error']);
  const s = single();
  s.frames[0].status = 'blurred';
  t.same(brief(issuesOf(s)), ['body.metadata.frames.0.status:literal_error']);
  for (const enc of ['jpeg', 'PNG', 'base64', 'float32']) {
    const p = single();
    p.frames[0].image.encoding = enc;
    t.same(brief(issuesOf(p)), ['body.metadata.frames.0.image.encoding:literal_error'], enc);
  }
  const c = color(4);
  c.frames[1].phase = 'yellow';
  t.same(brief(issuesOf(c, 'color_liveness')), ['body.metadata.frames.1.phase:literal_error']);
});

t.test('sha256 is 64 lowercase hex characters', async (t) => {
  const ok = 'a'.repeat(64);
  for (const [v, good] of [[ok, true], ['A'.repeat(64), false], ['a'.repeat(63), false], ['a'.repeat(65), false], ['g'.repeat(64), false], [ok + '\n', false]] as const) {
    const p = single();
    p.frames[0].image.sha256 = v;
    t.same(brief(issuesOf(p)), good ? [] : ['body.metadata.frames.0.image.sha256:string_pattern_mismatch'], JSON.stringify(v));
  }
});

t.test('types: integers, booleans, arrays, objects', async (t) => {
  const p = single({ complete: 'yes', frames: {} });
  t.same(brief(issuesOf(p)).sort(), ['body.metadata.complete:bool_type', 'body.metadata.frames:list_type']);
  const q = single();
  q.frames[0].source_index = 1.5;
  q.frames[0].timestamp_us = '100';
  q.frames[0].image = 'p0';
  t.same(brief(issuesOf(q)).sort(), [
    'body.metadata.frames.0.image:dict_type',
    'body.metadata.frames.0.source_index:int_from_float',
    'body.metadata.frames.0.timestamp_us:int_type',
  ]);
  const r = sequence(2);
  r.frames[1] = 'frame';
  t.same(brief(issuesOf(r)), ['body.metadata.frames.1:dict_type']);
});

t.test('an object with a captures key is an envelope; captures must then be an array', async (t) => {
  t.same(brief(issuesOf({ captures: 'x' })), ['body.metadata.captures:list_type']);
  t.same(brief(issuesOf({ captures: [] })), [], 'an empty batch is valid JSON-wise; nothing to verify');
  const mixed = { ...single(), captures: [single()] };
  const kinds = brief(issuesOf(mixed));
  t.ok(kinds.includes('body.metadata.capture_id:extra_forbidden'), 'packet keys beside captures are extra');
  t.notOk(kinds.some((k) => k.startsWith('body.metadata.captures.0')), 'the inner capture is valid');
});

t.test('frame record of a batch points into its capture', async (t) => {
  const b = { captures: [single(), sequence(5)] };
  b.captures[1].frames[3].eyes_xy = [[300, 200], [301, 200]];
  t.same(brief(issuesOf(b)), ['body.metadata.captures.1.frames.3.eyes_xy:eyes_too_close']);
  const s = sequence(5);
  s.frames[3].eyes_xy = [[300, 200], [301, 200]];
  t.same(brief(issuesOf(s)), ['body.metadata.frames.3.eyes_xy:eyes_too_close']);
});

t.test('an object key that looks like an index stays a string in loc', async (t) => {
  const p = single();
  p.frames[0]['0'] = 1;
  const [issue] = issuesOf(p);
  t.same(issue.loc, ['body', 'metadata', 'frames', 0, '0']);
});

t.test('okFrame fixture sanity: extra fields merge', async (t) => {
  t.equal(okFrame(3, { phase: 'red' }).phase, 'red');
});
