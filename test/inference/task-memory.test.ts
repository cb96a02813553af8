// An inference thread collects garbage after a task that carried a large capture, so the
// transferred pixels of a few long sequences do not pile up there; small tasks never pay for it.

import t from 'tap';
import { collectIfLarge, LARGE_TASK_BYTES } from '../../src/inference/task-memory.ts';
import type { WorkerTask } from '../../src/inference/protocol.ts';

const FRAME = 320 * 320 * 3;
const task = (frames: number): WorkerTask => ({
  op: 'captures', module: 'rgb_liveness', mode: 'rgb_sequence',
  captures: [{ packet: {} as never, pixels: [...Array.from({ length: frames }, () => new Uint8Array(FRAME)), null] }],
}) as WorkerTask;

t.test('a task of at least LARGE_TASK_BYTES of pixels collects; a smaller one does not', async (t) => {
  let calls = 0;
  const gc = () => void calls++;
  const below = Math.floor((LARGE_TASK_BYTES - 1) / FRAME);
  t.equal(collectIfLarge(task(20), gc), false, 'a 20-frame sequence (6 MB) does not collect');
  t.equal(collectIfLarge(task(below), gc), false, 'just under the limit does not collect');
  t.equal(calls, 0);
  t.equal(collectIfLarge(task(below + 1), gc), true, 'at the limit it collects');
  t.equal(collectIfLarge(task(93), gc), true, 'a 93-frame rgb8 sequence (28 MB) collects');
  t.equal(calls, 2);
  t.equal(collectIfLarge(task(93), undefined), false, 'without gc() (no --expose-gc) nothing happens');
});
