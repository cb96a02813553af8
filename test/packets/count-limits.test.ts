import t from 'tap';
import { brief, issuesOf, sequence, single, tooLarge } from './fixtures/metadata.ts';

t.test('32 captures pass, 33 are 413 payload_too_large', async (t) => {
  const ok = { captures: Array.from({ length: 32 }, () => single()) };
  t.same(issuesOf(ok), []);
  const over = { captures: Array.from({ length: 33 }, () => single()) };
  const err = tooLarge(over);
  t.equal(err?.code, 'payload_too_large');
  t.equal(err?.status, 413);
  t.match(err?.message, /33 captures/);
});

t.test('128 events per capture pass, 129 are 413', async (t) => {
  t.same(issuesOf(sequence(128)), []);
  t.equal(tooLarge(sequence(129))?.code, 'payload_too_large');
  t.match(tooLarge({ captures: [single(), sequence(129)] })?.message, /captures\[1\]\.frames holds 129 events/);
});

t.test('256 events per request pass, 257 are 413', async (t) => {
  t.same(issuesOf({ captures: [sequence(128), sequence(128)] }), []);
  t.equal(tooLarge({ captures: [sequence(128), sequence(127), sequence(2)] })?.code, 'payload_too_large');
  t.equal(tooLarge({ captures: [sequence(100), sequence(100), sequence(56)] }), null);
  t.equal(tooLarge({ captures: [sequence(100), sequence(100), sequence(57)] })?.code, 'payload_too_large');
});

t.test('counts are judged as soon as the arrays are known, before schema errors', async (t) => {
  const junk = { captures: Array.from({ length: 33 }, () => ({ nonsense: true })), extra: 1 };
  t.equal(tooLarge(junk)?.code, 'payload_too_large', '33 malformed captures are still too many');
  const frames = { frames: Array.from({ length: 129 }, () => 'x'), mode: 'bogus' };
  t.equal(tooLarge(frames)?.code, 'payload_too_large', '129 malformed events are still too many');
  // Arrays that are not where the schema wants them are not counted: there is nothing to count.
  t.same(brief(issuesOf({ captures: { length: 99 } })), ['body.metadata.captures:list_type']);
});

t.test('per-mode event limits are 422 rules, not 413', async (t) => {
  t.equal(tooLarge(single({ frames: sequence(2).frames })), null);
  t.same(brief(issuesOf(single({ frames: sequence(2).frames }))), ['body.metadata.frames:too_many_events']);
});
