// The pacer's judgment on a simulated clock (the real-server behaviour is in
// test/http/upload-pace-server.test.ts): windows, stalls, the deadline, and a thread that was not
// scheduled for a while not being taken for a slow client.

import t from 'tap';
import type { ServiceError } from '../../src/errors/index.ts';
import { UploadPacer } from '../../src/http/upload-pace.ts';
import type { HttpResponse } from '../../src/http/uws.ts';

function harness(limits = { minBytesPerSecond: 1000, windowSeconds: 3, deadlineSeconds: 600 }) {
  let clock = 0;
  const pacer = new UploadPacer(limits, () => clock);
  const rearmed: number[] = [];
  const res = { pause: () => {}, resume: () => rearmed.push(clock) } as unknown as HttpResponse;
  let fault: ServiceError | null = null;
  const upload = pacer.track(res, (e) => (fault = e));
  // drive the private tick as the interval would
  const tick = (ms = 1000) => {
    clock += ms;
    (pacer as unknown as { tick(): void }).tick();
  };
  return { pacer, upload, tick, rearmed, fault: () => fault, stop: () => upload.done() };
}

t.test('a client at exactly the minimum, sending in bursts, is never cut off', async (t) => {
  const h = harness();
  for (let s = 0; s < 60; s++) {
    if (s % 3 === 0) h.upload.received(3000); // 3000 bytes every 3 s = 1000 bytes/s
    h.tick();
  }
  t.equal(h.fault()?.message, undefined, 'not cut off');
  t.equal(h.rearmed.length, 60, 'uWS\'s timer re-armed on every tick of the upload');
  h.stop();
});

t.test('a stall is answered after about one window, and uWS\'s timer is no longer re-armed', async (t) => {
  const h = harness();
  h.upload.received(50_000);
  let ticks = 0;
  while (h.fault() === null && ticks < 10) {
    h.tick();
    ticks++;
  }
  t.equal(h.fault()?.code, 'request_timeout');
  t.equal(h.fault()?.status, 408);
  t.ok(ticks >= 3 && ticks <= 4, `answered on tick ${ticks} (window 3 s)`);
  const rearms = h.rearmed.length;
  h.tick();
  t.equal(h.rearmed.length, rearms, 'a judged upload is no longer paced');
  t.equal(h.pacer.size(), 0);
});

t.test('a late tick (the thread was not scheduled) judges nobody; the next on-time tick does', async (t) => {
  const h = harness();
  h.tick();
  h.tick(8000); // 8 s without a tick: the bytes may be waiting in the kernel
  t.equal(h.fault(), null, 'not cut off on a late tick');
  h.upload.received(20_000); // delivered by the poll phase after the late tick
  h.tick();
  t.equal(h.fault(), null, 'the bytes that were waiting count');
  h.tick(8000);
  h.tick();
  t.equal(h.fault()?.code, 'request_timeout', 'a real stall is still answered on time ticks');
});

t.test('the deadline bounds an upload at a good rate', async (t) => {
  const h = harness({ minBytesPerSecond: 1000, windowSeconds: 3, deadlineSeconds: 5 });
  for (let s = 0; s < 10 && h.fault() === null; s++) {
    h.upload.received(10_000);
    h.tick();
  }
  t.match(h.fault()?.message, /within 5 s/);
});
