// An inference thread collects garbage after a task that carried a large capture, so the
// transferred pixels of a few long sequences do not pile up there; small tasks never pay for it.

import t from 'tap';
import { collectAfterLargeTask, LARGE_TASK_BYTES } from '../../src/inference/task-memory.ts';
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
