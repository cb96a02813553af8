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
  t.same(gate.load, { active: 2, waiting: 3, waitingFirst: 0 });
  const refused = await call(5).then(() => undefined, (e: unknown) => e);
  t.ok(refused instanceof ServiceError && refused.code === 'server_busy' && refused.status === 503, 'the sixth is refused');
  t.equal((refused as ServiceError).headers['Retry-After'], '1');
  t.same(started, [0, 1], 'and never started');
  finish[0]!();
  t.equal(await calls[0], 0);
  await new Promise((r) => setImmediate(r));
  t.same(started, [0, 1, 2], 'a finished one lets the next waiting one in, in order');
  t.same(gate.load, { active: 2, waiting: 2, waitingFirst: 0 });
  for (const i of [1, 2]) finish[i]!();
  await Promise.all(calls.slice(1, 3));
  await new Promise((r) => setImmediate(r));
  t.same(started, [0, 1, 2, 3, 4]);
  for (const i of [3, 4]) finish[i]!();
  t.same(await Promise.all(calls), [0, 1, 2, 3, 4]);
  t.same(gate.load, { active: 0, waiting: 0, waitingFirst: 0 }, 'every place is given back');
});

t.test('a failing hash gives its place back', async (t) => {
  const gate = new HashGate(1, 0);
  await t.rejects(gate.run(() => Promise.reject(new Error('scrypt failed'))), /scrypt failed/);
  t.same(gate.load, { active: 0, waiting: 0, waitingFirst: 0 });
  t.equal(await gate.run(() => Promise.resolve('next')), 'next');
});

t.test('the first lane is served before ordinary waiters and bounded apart from them', async (t) => {
  const gate = new HashGate(1, 2);
  const order: string[] = [];
  const finish = new Map<string, () => void>();
  const call = (name: string, first = false) => gate.run(() => new Promise<void>((resolve) => {
    order.push(name);
    finish.set(name, resolve);
  }), first);
  const running = call('flood-0');
  const flood = [call('flood-1'), call('flood-2')];
  const full = await call('flood-3').then(() => undefined, (e: unknown) => e);
  t.ok(full instanceof ServiceError && full.code === 'server_busy', 'the ordinary lane is full');
  const operator = call('operator', true);
  t.same(gate.load, { active: 1, waiting: 2, waitingFirst: 1 }, 'yet the first lane takes the operator');
  finish.get('flood-0')!();
  await running;
  await new Promise((r) => setImmediate(r));
  t.same(order, ['flood-0', 'operator'], 'served before the flood that came earlier');
  finish.get('operator')!();
  await operator;
  await new Promise((r) => setImmediate(r));
  finish.get('flood-1')!();
  await flood[0];
  await new Promise((r) => setImmediate(r));
  finish.get('flood-2')!();
  await Promise.all(flood);
  t.same(order, ['flood-0', 'operator', 'flood-1', 'flood-2']);
  t.same(gate.load, { active: 0, waiting: 0, waitingFirst: 0 });
});

t.test('issue 40: past the shared places, each network holds at most its places in the ordinary lane; the first lane is not counted', async (t) => {
  // no shared places: the per-network rule from the first waiter on
  const gate = new HashGate(1, 3, 1, 0);
  const finish: (() => void)[] = [];
  const call = (network: string | undefined, first = false) => gate.run(() => new Promise<void>((resolve) => finish.push(resolve)), first, network);
  const busy = (p: Promise<unknown>) => p.then(() => false, (e: unknown) => e instanceof ServiceError && e.code === 'server_busy');
  const running = call('198.51.100.1');
  const waiting = call('198.51.100.1');
  t.equal(await busy(call('198.51.100.1')), true, 'a second place for the same network: 503 at once');
  const other = call('2001:db8:1:2::/64');
  const known = call('198.51.100.1', true);
  t.same(gate.load, { active: 1, waiting: 2, waitingFirst: 1 }, 'another network and the known lane still get in');
  for (let i = 0; i < 4 && finish.length > 0; i++) {
    finish.shift()!();
    await new Promise((r) => setImmediate(r));
  }
  await Promise.all([running, waiting, other, known]);
  const again = call('198.51.100.1');
  t.same(gate.load, { active: 1, waiting: 0, waitingFirst: 0 }, 'places given back: the network may wait again');
  const next = call('198.51.100.1');
  finish.shift()!();
  await again;
  await new Promise((r) => setImmediate(r));
  finish.shift()!();
  await next;
});

t.test('issue 40: the shared places are first come, first served; past them one more place per network', async (t) => {
  const gate = new HashGate(1, 4, 1, 2);
  const finish: (() => void)[] = [];
  const call = (network: string) => gate.run(() => new Promise<void>((resolve) => finish.push(resolve)), false, network);
  const busy = (p: Promise<unknown>) => p.then(() => false, (e: unknown) => e instanceof ServiceError && e.code === 'server_busy');
  const calls = [call('a'), call('a'), call('a')];
  t.same(gate.load, { active: 1, waiting: 2, waitingFirst: 0 }, 'one network takes the two shared places');
  t.equal(await busy(call('a')), true, 'past them it holds no more');
  calls.push(call('b'));
  t.equal(await busy(call('b')), true, 'another network gets one, and only one');
  calls.push(call('c'));
  t.equal(await busy(call('d')), true, 'the lane\'s bound holds');
  while (finish.length > 0 || gate.load.active > 0) {
    finish.shift()?.();
    await new Promise((r) => setImmediate(r));
  }
  await Promise.all(calls);
  t.same(gate.load, { active: 0, waiting: 0, waitingFirst: 0 });
});
