import t from 'tap';
import type { FrameRecord } from '../../src/packets/types.ts';
import type { Point } from '../../src/contract/index.ts';
import { MAX_FINAL_WINDOW, geometryContinuous, scoreJumps, structuralWindow } from '../../src/inference/window.ts';

function ok(index: number, eyes: [Point, Point] = [[100, 100], [200, 100]]): FrameRecord {
  return { source_index: index, timestamp_us: index * 1000, status: 'ok', source_size: [640, 480], eyes_xy: eyes };
}
const failed = (index: number, status: 'dropped' | 'face_unavailable'): FrameRecord => ({ source_index: index, timestamp_us: index * 1000, status });
const run = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => ok(from + i));

t.test('geometry rule: eye-distance ratio within [0.65, 1.5], midpoint shift within 0.6 d_old', async (t) => {
  const base = ok(0); // d = 100, m = (150, 100)
  const scaled = (d: number) => ok(1, [[150 - d / 2, 100], [150 + d / 2, 100]]);
  t.ok(geometryContinuous(base, scaled(65)), 'ratio 0.65 is inside');
  t.notOk(geometryContinuous(base, scaled(64.9)), 'ratio below 0.65 breaks');
  t.ok(geometryContinuous(base, scaled(150)), 'ratio 1.5 is inside');
  t.notOk(geometryContinuous(base, scaled(150.1)), 'ratio above 1.5 breaks');
  const shifted = (dx: number, dy: number) => ok(1, [[100 + dx, 100 + dy], [200 + dx, 100 + dy]]);
  t.ok(geometryContinuous(base, shifted(36, 48)), 'shift 60 = 0.6 d_old is inside');
  t.notOk(geometryContinuous(base, shifted(36, 48.5)), 'a longer shift breaks');
  // The ratio is against the old distance, so the rule is not symmetric.
  t.ok(geometryContinuous(base, scaled(66)), '100 -> 66 is ratio 0.66');
  t.notOk(geometryContinuous(scaled(66), { ...base, source_index: 2 }), '66 -> 100 is ratio 1.515');
});

t.test('a clean run keeps the last 20 frames and records no reset', async (t) => {
  const w = structuralWindow(run(0, 24));
  t.same(w.resets, []);
  t.equal(w.candidates.length, MAX_FINAL_WINDOW);
  t.same(w.candidates, Array.from({ length: 20 }, (_, i) => i + 5));
});

t.test('a missing source index resets at the frame after the gap', async (t) => {
  const frames = [...run(0, 4), ...run(7, 9)];
  const w = structuralWindow(frames);
  t.same(w.resets, [{ source_index: 7, reason: 'missing_index' }]);
  t.same(w.candidates.map((i) => frames[i].source_index), [7, 8, 9]);
});

t.test('a failed frame records its own status and the window restarts after it', async (t) => {
  const frames = [...run(0, 3), failed(4, 'face_unavailable'), ...run(5, 6), failed(7, 'dropped'), ...run(8, 10)];
  const w = structuralWindow(frames);
  t.same(w.resets, [
    { source_index: 4, reason: 'face_unavailable' },
    { source_index: 7, reason: 'dropped' },
  ]);
  t.same(w.candidates.map((i) => frames[i].source_index), [8, 9, 10]);
});

t.test('a gap onto a failed frame records both, in order', async (t) => {
  const frames = [...run(0, 2), failed(5, 'dropped'), ...run(6, 7)];
  const w = structuralWindow(frames);
  t.same(w.resets, [
    { source_index: 5, reason: 'missing_index' },
    { source_index: 5, reason: 'dropped' },
  ]);
  t.same(w.candidates.map((i) => frames[i].source_index), [6, 7]);
});

t.test('a geometry discontinuity resets at the new frame', async (t) => {
  const frames = [...run(0, 5), ok(6, [[400, 300], [500, 300]]), ok(7, [[400, 300], [500, 300]])];
  const w = structuralWindow(frames);
  t.same(w.resets, [{ source_index: 6, reason: 'geometry_discontinuity' }]);
  t.same(w.candidates.map((i) => frames[i].source_index), [6, 7]);
});

t.test('geometry is not compared across a gap or a failed frame (those already reset)', async (t) => {
  const far: [Point, Point] = [[400, 300], [500, 300]];
  const frames = [...run(0, 2), failed(3, 'dropped'), ok(4, far), ok(6, [[100, 100], [200, 100]])];
  const w = structuralWindow(frames);
  t.same(w.resets, [
    { source_index: 3, reason: 'dropped' },
    { source_index: 6, reason: 'missing_index' },
  ]);
  t.same(w.candidates.map((i) => frames[i].source_index), [6]);
});

t.test('a failed terminal frame leaves no candidates', async (t) => {
  const w = structuralWindow([...run(0, 3), failed(4, 'dropped')]);
  t.same(w.candidates, []);
});

t.test('score jumps above the limit reset at the later frame; equal to the limit does not', async (t) => {
  const r = scoreJumps([10, 11, 12, 13, 14], [0.2, 0.25, 0.8, 0.5, 0.75], 0.25);
  t.same(r.resets, [
    { source_index: 12, reason: 'score_jump' },
    { source_index: 13, reason: 'score_jump' },
  ]);
  t.equal(r.start, 3, 'the final window starts at the last jump');
  t.same(scoreJumps([1], [0.9], 0.1), { start: 0, resets: [] });
});
