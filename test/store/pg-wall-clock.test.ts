import t, { type Test } from 'tap';
import net from 'node:net';
import { parseDatabaseUrl } from '../../src/config/index.ts';
import { HostSelector } from '../../src/store/pg/hosts.ts';
import { RecentSettlements } from '../../src/store/pg/lost-commits.ts';
import type { Reservation } from '../../src/store/records.ts';

// The PostgreSQL store's own lengths of time (the probe's back-off, the window of settlements
// remembered for a failover) are lengths of this thread's time, not dates: a wall clock stepped
// (NTP, an operator) must not stretch or cut them. (The lease's are pg-clock-step's.)

/** Steps this process's wall clock by `ms` until the test ends. */
function stepWallClock(t: Test, ms: number): void {
  const real = Date.now;
  Date.now = () => real() + ms;
  t.teardown(() => {
    Date.now = real;
  });
}

/** A port nothing listens on (taken, then given back). */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

t.test('a wall clock stepped back during the probe back-off does not keep refusing without probing', async (t) => {
  const [a, b] = [await closedPort(), await closedPort()];
  const selector = new HostSelector(parseDatabaseUrl(`postgresql://lv@127.0.0.1:${a},127.0.0.1:${b}/lv`));
  t.teardown(() => selector.close());
  const first = await selector.pick().then(() => null, (e: unknown) => e);
  t.ok(first instanceof Error, 'no host answers: refused');
  t.equal(await selector.pick().then(() => null, (e: unknown) => e), first, 'within the back-off the same refusal, no new probe');
  stepWallClock(t, -3_600_000);
  // the back-off is 200 ms: after it a pick probes again, and its refusal is a new one (with
  // the wall clock's back-off, the hour stepped back: the old one for an hour)
  const deadline = performance.now() + 5_000;
  let later: unknown = first;
  while (later === first && performance.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    later = await selector.pick().then(() => null, (e: unknown) => e);
  }
  t.not(later, first, 'probed again once the back-off had passed');
  t.ok(later instanceof Error, 'and, no host answering, refused anew');
});

t.test('a wall clock stepped forward does not forget the settlements a failover may need', async (t) => {
  const recent = new RecentSettlements();
  const reservation = (id: string): Pick<Reservation, 'id' | 'token_id' | 'module_id'> => ({ id, token_id: 'tok_x', module_id: 'rgb_liveness' });
  recent.remember(reservation('res_one'), Date.now(), '{"a":1}', null);
  stepWallClock(t, 3_600_000);
  recent.remember(reservation('res_two'), Date.now(), '{"a":2}', null);
  t.ok(recent.get('res_one'), 'the settlement answered a moment ago is still remembered');
  t.ok(recent.get('res_two'));
});
