import t from 'tap';
import { ServiceError } from '../../src/errors/index.ts';
import { HashGate } from '../../src/auth/hash-gate.ts';

// The per-worker cap on password hashes (src/auth/hash-gate.ts), driven by work that ends
// when the test says so: which calls run, which wait, which are refused, in what order.
t.test('runs at most `running` at once, queues at most `queued`, refuses the rest with 503 and Retry-After', async (t) => {
  const gate = new HashGate(2, 3);
  const started: number[] = [];
  const finish: (() => void)[] = [];
  const call = (i: number) => gate.run(() => new Promise<number>((resolve) => {
    started.push(i);
    finish[i] = () => resolve(i);
  }));
  const calls = [0, 1, 2, 3, 4].map(call);
  await Promise.resolve();
  t.same(started, [0, 1], 'two run');
  t.same(gate.load, { active: 2, waiting: 3 });
  const refused = await call(5).then(() => undefined, (e: unknown) => e);
  t.ok(refused instanceof ServiceError && refused.code === 'server_busy' && refused.status === 503, 'the sixth is refused');
  t.equal((refused as ServiceError).headers['Retry-After'], '1');
  t.same(started, [0, 1], 'and never started');
  finish[0]!();
  t.equal(await calls[0], 0);
  await new Promise((r) => setImmediate(r));
  t.same(started, [0, 1, 2], 'a finished one lets the next waiting one in, in order');
  t.same(gate.load, { active: 2, waiting: 2 });
  for (const i of [1, 2]) finish[i]!();
  await Promise.all(calls.slice(1, 3));
  await new Promise((r) => setImmediate(r));
  t.same(started, [0, 1, 2, 3, 4]);
  for (const i of [3, 4]) finish[i]!();
  t.same(await Promise.all(calls), [0, 1, 2, 3, 4]);
  t.same(gate.load, { active: 0, waiting: 0 }, 'every place is given back');
});

t.test('a failing hash gives its place back', async (t) => {
  const gate = new HashGate(1, 0);
  await t.rejects(gate.run(() => Promise.reject(new Error('scrypt failed'))), /scrypt failed/);
  t.same(gate.load, { active: 0, waiting: 0 });
  t.equal(await gate.run(() => Promise.resolve('next')), 'next');
});
