import t from 'tap';
import { brief, color, issuesOf, sequence, single } from './fixtures/metadata.ts';
import { BatchEnvelopeSchema, CapturePacketSchema, FrameSchema, ImageDescriptorSchema, MetadataSchema } from '../../src/packets/schemas.ts';
import { MAX_ISSUES } from '../../src/contract/index.ts';

t.test('every problem of a request comes back at once, across captures', async (t) => {
  const a = single({ protocol_version: 2, label: 'x' });
  a.frames[0].eyes_xy = [[340, 200], [300, 200]];
  const b = sequence(3, { capture_id: a.capture_id });
  b.frames[2].timestamp_us = 0;
  delete b.frames[1].image;
  const c = color(4);
  const issues = issuesOf({ captures: [a, b, c] });
  t.same(brief(issues).sort(), [
    'body.metadata.captures.0.frames.0.eyes_xy:eyes_not_sorted',
    'body.metadata.captures.0.label:extra_forbidden',
    'body.metadata.captures.0.protocol_version:literal_error',
    'body.metadata.captures.1.capture_id:duplicate_capture_id',
    'body.metadata.captures.1.frames.1.image:missing',
    'body.metadata.captures.1.frames.2.timestamp_us:not_increasing',
    'body.metadata.captures.2.mode:mode_not_in_module',
  ].sort());
  for (const issue of issues) {
    t.ok(Array.isArray(issue.loc) && typeof issue.msg === 'string' && typeof issue.type === 'string', 'loc, msg and type present');
    t.same(issue.loc.slice(0, 2), ['body', 'metadata']);
  }
});

t.test('a flood of errors is capped and says so', async (t) => {
  const p: any = single();
  for (let i = 0; i < MAX_ISSUES + 50; i++) p[`k${i}`] = i;
  const issues = issuesOf(p);
  t.equal(issues.length, MAX_ISSUES + 1);
  t.equal(issues[MAX_ISSUES].type, 'too_many_errors');
  t.equal(issues[MAX_ISSUES - 1].type, 'extra_forbidden');
});

t.test('large inputs are not echoed back', async (t) => {
  const [issue] = issuesOf(single({ capture_id: 'x'.repeat(5000) }));
  t.equal(issue.type, 'string_too_long');
  t.notOk('input' in issue);
});

t.test('schemas are plain JSON Schema: closed objects, described, serialisable', async (t) => {
  const objects: any[] = [];
  const walk = (s: any) => {
    if (s === null || typeof s !== 'object') return;
    if (s.type === 'object') objects.push(s);
    for (const v of Object.values(s)) walk(v);
  };
  for (const schema of [ImageDescriptorSchema, FrameSchema, CapturePacketSchema, BatchEnvelopeSchema, MetadataSchema]) {
    const json = JSON.parse(JSON.stringify(schema));
    walk(json);
    t.ok(typeof json.description === 'string' && json.description.length > 0);
    t.notMatch(JSON.stringify(json), /"type":"(Date|Uint8Array|undefined|function)"/);
  }
  t.ok(objects.length >= 4);
  for (const o of objects) t.equal(o.additionalProperties, false, Object.keys(o.properties).join(','));
  t.same(CapturePacketSchema.required.sort(), ['capture_id', 'capture_profile', 'complete', 'frames', 'mode', 'preprocess_profile', 'protocol_version']);
});
