import t from 'tap';
import { periodic } from '../../src/retention/index.ts';

// The one scheduler of the process's background store jobs (the pruners, the login throttle's
// sweep, PostgreSQL's lease sweep): one run at a time, and a stop that waits for the run under
// way so that the store closes after it.
t.test('one run at a time; stop ends the schedule and waits for the run under way', async (t) => {
  let runs = 0;
  let finish: () => void = () => undefined;
  const job = periodic(() => {
    runs++;
    return new Promise<void>((resolve) => (finish = resolve));
  }, 3600_000);
  const first = job.run();
  t.equal(job.run(), first, 'asked again while a run is under way: that run');
  t.equal(runs, 1);
  let stopped = false;
  const stop = job.stop().then(() => (stopped = true));
  await Promise.resolve();
  t.notOk(stopped, 'the stop waits for the run under way');
  finish();
  await stop;
  t.ok(stopped, 'and resolves once it ended');
  await job.run();
  t.equal(runs, 1, 'no run starts after the stop');
});

t.test('the clock starts runs', async (t) => {
  let runs = 0;
  let third: () => void = () => undefined;
  const thirdRun = new Promise<void>((resolve) => (third = resolve));
  const job = periodic(async () => {
    if (++runs === 3) third();
  }, 5);
  t.teardown(() => job.stop());
  // the job's timer does not hold the process (as in the service): this one does, meanwhile
  const hold = setInterval(() => undefined, 1000);
  t.teardown(() => clearInterval(hold));
  await thirdRun;
  t.ok(runs >= 3, `${runs} runs by the clock`);
});
