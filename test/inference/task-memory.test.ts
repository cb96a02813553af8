// An inference thread collects garbage after a task that carried a large capture, so the
// transferred pixels of a few long sequences do not pile up there; small tasks never pay for it.

import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import t from 'tap';
import { collectAfterLargeTask, EXTERNAL_GROWTH_BYTES, ExternalGarbage, LARGE_TASK_BYTES } from '../../src/inference/task-memory.ts';
import type { CapturesTask } from '../../src/inference/protocol.ts';

const FRAME = 320 * 320 * 3;
const task = (frames: number): CapturesTask => ({
  op: 'captures', module: 'rgb_liveness', mode: 'rgb_sequence',
  captures: [{ packet: {} as never, pixels: [...Array.from({ length: frames }, () => new Uint8Array(FRAME)), null] }],
}) as CapturesTask;

t.test('a task of at least LARGE_TASK_BYTES of pixels collects; a smaller one does not', async (t) => {
  let calls = 0;
  const gc = () => void calls++;
  const now = (run: () => void) => run();
  const below = Math.floor((LARGE_TASK_BYTES - 1) / FRAME);
  t.equal(collectAfterLargeTask(task(20), gc, now), false, 'a 20-frame sequence (6 MB) does not collect');
  t.equal(collectAfterLargeTask(task(below), gc, now), false, 'just under the limit does not collect');
  t.equal(calls, 0);
  t.equal(collectAfterLargeTask(task(below + 1), gc, now), true, 'at the limit it collects');
  t.equal(collectAfterLargeTask(task(93), gc, now), true, 'a 93-frame rgb8 sequence (28 MB) collects');
  t.equal(calls, 2);
  t.equal(collectAfterLargeTask(task(93), undefined, now), false, 'without gc() (no --expose-gc) nothing happens');
});

t.test('the collection runs on a later turn, after the task was answered', async (t) => {
  let calls = 0;
  t.equal(collectAfterLargeTask(task(93), () => void calls++), true);
  t.equal(calls, 0, 'not while the task is still held');
  await new Promise((r) => setImmediate(r));
  t.equal(calls, 1, 'on the next turn');
});

t.test('ExternalGarbage: a young collection once external memory is 4 MiB above its low point, on a later turn', async (t) => {
  const MiB = 1024 * 1024;
  let external = 20 * MiB;
  const calls: unknown[] = [];
  const queued: (() => void)[] = [];
  const g = new ExternalGarbage((o) => {
    calls.push(o);
    external = 21 * MiB; // what the collection could not free
  }, () => external, (run) => queued.push(run));
  t.equal(g.afterTask(), false, 'the first task sets the low point');
  external = 18 * MiB;
  t.equal(g.afterTask(), false, 'lower: the new low point');
  external = 18 * MiB + EXTERNAL_GROWTH_BYTES - 1;
  t.equal(g.afterTask(), false, 'just under the growth');
  external = 18 * MiB + EXTERNAL_GROWTH_BYTES;
  t.equal(g.afterTask(), true, 'at the growth it schedules');
  t.equal(g.afterTask(), false, 'one at a time');
  t.same(calls, [], 'not while the task is still held');
  queued.shift()!();
  t.same(calls, [{ type: 'minor' }], 'a young-generation collection');
  t.equal(g.collections, 1);
  external = 21 * MiB + EXTERNAL_GROWTH_BYTES - 1;
  t.equal(g.afterTask(), false, 'what it left is the new low point');
  external = 21 * MiB + EXTERNAL_GROWTH_BYTES;
  t.equal(g.afterTask(), true);
  t.equal(new ExternalGarbage(undefined, () => 1e12).afterTask(), false, 'without gc() (no --expose-gc) nothing happens');
});

t.test('ExternalGarbage with V8\'s own gc(): the young collection runs and frees a task\'s leftovers', async (t) => {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as (o?: { type: 'minor' | 'major' }) => void;
  // read here from Node's ArrayBuffer allocator, which counts a free at once (V8's external
  // memory figure, which the inference thread reads, catches up later for ArrayBuffers)
  const native = () => process.memoryUsage().arrayBuffers;
  const g = new ExternalGarbage(gc, native);
  // what the tests above left is freed first: a full collection frees array buffers in the
  // background, and the next one finishes that
  gc();
  await new Promise((r) => setImmediate(r));
  gc();
  // nothing that allocates (no assertion) between the leftovers and the collection: a
  // collection on the way would take them, or promote them out of the young generation
  const first = g.afterTask();
  const low = native();
  // a task's leftovers: young objects holding 8 MiB of native memory, dropped at once
  const made = ((n) => Array.from({ length: n }, () => Buffer.alloc(1024 * 1024)).length)(8);
  const held = native() - low;
  const scheduled = g.afterTask();
  await new Promise((r) => setImmediate(r));
  const collections = g.collections;
  // V8 frees the buffers of collected objects on a background thread: wait for that (bounded)
  const deadline = Date.now() + 10_000;
  while (native() - low >= 1024 * 1024 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
  const left = native() - low;
  t.equal(first, false, 'the first task sets the low point');
  t.ok(made === 8 && held >= 8 * 1024 * 1024, `the leftovers held until collected (${held} bytes)`);
  t.equal(scheduled, true, '8 MiB above the low point: scheduled');
  t.equal(collections, 1, 'V8 ran the young collection on the next turn');
  t.ok(left < 1024 * 1024, `and it freed them (${left} bytes above the low point left)`);
});
