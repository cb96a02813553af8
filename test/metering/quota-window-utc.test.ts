import t from 'tap';
import { LmdbBackend } from '../../src/store/lmdb/index.ts';
import { tempDir } from '../helpers/server.ts';
import { reserveInput, tokenRecord } from '../store/contract.ts';

// Quota windows are UTC days and months (spec rule 4), whatever the host's time zone. This
// process runs at UTC+14 (Kiritimati), where a window computed in local time is a day off for
// the 14 hours before midnight UTC; a UTC host, where the store contract runs, cannot show
// that (issue 43's mutation check: a quota window in local time passed every in-process test).
// In-process on a real LMDB store in a temporary folder. The window rule is one for both stores
// (src/store/periods.ts: PostgreSQL is handed the window keys and resets it computes).
process.env.TZ = 'Pacific/Kiritimati';

const at = (iso: string) => Date.parse(iso);
const store = LmdbBackend.open(tempDir());
t.teardown(() => store.close());

async function reservedOrKind(p: Promise<{ kind: string }>): Promise<string> {
  return (await p).kind;
}

t.test('the process runs at UTC+14, so local time differs from UTC here', async (t) => {
  t.equal(new Date(at('2026-01-31T23:59:50Z')).getTimezoneOffset(), -14 * 60, 'TZ took effect');
  t.equal(new Date(at('2026-01-31T23:59:50Z')).getDate(), 1, 'locally it is already 1 February');
});

t.test('day window: usage, reset and Retry-After across midnight UTC', async (t) => {
  const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: 2, period: 'day' }]);
  await store.insertToken(tok);
  const before = at('2026-01-31T23:59:50Z');
  t.equal(await reservedOrKind(store.reserve(reserveInput(tok, { units: 2, at: before }))), 'reserved', 'a batch of 2 within the limit');
  t.same(await store.usageSnapshot(tok, before), [{ module_id: 'rgb_liveness', limit: 2, period: 'day', used: 2, remaining: 0, reset_at: '2026-02-01T00:00:00.000Z' }]);
  const refused = await store.reserve(reserveInput(tok, { at: before + 1 }));
  t.match(refused, { kind: 'quota_exceeded', retryAfterSeconds: 10 }, 'Retry-After: the seconds to 00:00 UTC');
  const midnight = at('2026-02-01T00:00:00Z');
  t.same(await store.usageSnapshot(tok, midnight), [{ module_id: 'rgb_liveness', limit: 2, period: 'day', used: 0, remaining: 2, reset_at: '2026-02-02T00:00:00.000Z' }], 'a new UTC day, a new window');
  t.equal(await reservedOrKind(store.reserve(reserveInput(tok, { at: midnight }))), 'reserved');
  t.same((await store.usageSnapshot(tok, before)).map((u) => u.used), [2], 'the previous day keeps its own units');
  t.ok((await store.verifyLedger()).ok);
});

t.test('month window: resets at 00:00 UTC on the first', async (t) => {
  const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: 1, period: 'month' }]);
  await store.insertToken(tok);
  const before = at('2026-02-28T23:59:59Z');
  t.equal(await reservedOrKind(store.reserve(reserveInput(tok, { at: before }))), 'reserved');
  t.match(await store.reserve(reserveInput(tok, { at: before })), { kind: 'quota_exceeded', retryAfterSeconds: 1 });
  t.equal((await store.usageSnapshot(tok, before))[0]!.reset_at, '2026-03-01T00:00:00.000Z');
  const first = at('2026-03-01T00:00:00Z');
  t.same(await store.usageSnapshot(tok, first), [{ module_id: 'rgb_liveness', limit: 1, period: 'month', used: 0, remaining: 1, reset_at: '2026-04-01T00:00:00.000Z' }]);
  t.equal(await reservedOrKind(store.reserve(reserveInput(tok, { at: first }))), 'reserved');
  t.ok((await store.verifyLedger()).ok);
});
