import t from 'tap';
import { MANY_CLIENTS, RefusalTally, type AuditRecord } from '../../src/store/index.ts';

// The counting of refused calls (src/store/refusal-tally.ts) on its own, with its clock in
// the test's hands: what is written at once, what is written again when the minute ends, the
// bound on keys, a write that fails. Through the real server and both stores:
// refusal-cost.test.ts.

const T0 = Date.parse('2026-03-01T10:00:00.000Z');
const MIN = 60_000;

function line(i: number, over: Partial<AuditRecord> = {}): AuditRecord {
  return {
    request_id: `req_${i}`, at: new Date(T0 + i).toISOString(), token_id: 'tok_a', module_id: 'rgb_liveness', client_ip: '198.51.100.7', country: null,
    status: 503, error_code: 'server_busy', captures: 0, charged_units: 0, latency_ms: 1 + (i % 7), outcome: 'error', replayed: false, ...over,
  };
}

function harness(maxKeys = 1000) {
  let clock = T0;
  const writes: { row: AuditRecord; again: boolean }[] = [];
  const lost: AuditRecord[] = [];
  let fail = false;
  const tally = new RefusalTally(async (row, again) => {
    if (fail) throw new Error('disk full');
    writes.push({ row: structuredClone(row), again });
  }, MIN, maxKeys, () => clock);
  return {
    tally, writes, lost,
    onLost: (_err: unknown, row: AuditRecord) => void lost.push(row),
    at: (ms: number) => void (clock = ms),
    failWrites: () => void (fail = true),
    /** the rows as a store keyed by (at, request_id) would hold them */
    stored: () => {
      const m = new Map<string, AuditRecord>();
      for (const w of writes) if (w.again || !m.has(`${w.row.at}|${w.row.request_id}`)) m.set(`${w.row.at}|${w.row.request_id}`, w.row);
      return [...m.values()];
    },
  };
}

t.test('the first refusal of a key is written at once; the rest of its minute only counted, then written again in place', async (t) => {
  const h = harness();
  for (let i = 0; i < 500; i++) h.tally.add(line(i), h.onLost);
  await h.tally.flush();
  t.equal(h.writes.length, 1, 'one write for 500 refusals while the minute lasts');
  t.same([h.writes[0]!.row.request_id, h.writes[0]!.row.calls, h.writes[0]!.again], ['req_0', undefined, false], 'the first call\'s own row');
  h.at(T0 + MIN);
  await h.tally.flush();
  t.equal(h.writes.length, 2, 'written again once the minute is over');
  t.match(h.writes[1], { again: true, row: { request_id: 'req_0', at: new Date(T0).toISOString(), calls: 500, last_at: new Date(T0 + 499).toISOString(), latency_ms: 7 } });
  t.equal(h.stored().length, 1, 'one row in the store');
  t.equal(h.tally.size, 0, 'nothing held after the flush');
});

t.test('a lone refusal is never written again; keys differ by token, address, status and code; minutes apart', async (t) => {
  const h = harness();
  h.tally.add(line(1), h.onLost);
  h.tally.add(line(2, { token_id: 'tok_b' }), h.onLost);
  h.tally.add(line(3, { client_ip: '198.51.100.8' }), h.onLost);
  h.tally.add(line(4, { status: 401, error_code: 'invalid_token', token_id: null }), h.onLost);
  h.tally.add(line(MIN + 5), h.onLost);
  h.tally.add(line(MIN + 6), h.onLost);
  h.at(T0 + 3 * MIN);
  await h.tally.flush();
  t.same(h.writes.map((w) => [w.row.request_id, w.again, w.row.calls]), [
    ['req_1', false, undefined], ['req_2', false, undefined], ['req_3', false, undefined], ['req_4', false, undefined],
    [`req_${MIN + 5}`, false, undefined], [`req_${MIN + 5}`, true, 2],
  ]);
});

t.test('past maxKeys addresses in a minute, the others are counted without their address: the bound', async (t) => {
  const h = harness(10);
  // 5,000 refusals from 5,000 addresses of one token
  for (let i = 0; i < 5000; i++) h.tally.add(line(i, { client_ip: `10.0.${i >> 8}.${i & 255}`, country: 'ZZ' }), h.onLost);
  h.at(T0 + MIN);
  await h.tally.flush();
  const rows = h.stored();
  t.equal(rows.length, 11, '10 addressed rows and one of many clients');
  const many = rows.find((r) => r.client_ip === MANY_CLIENTS)!;
  t.match(many, { calls: 4990, country: null, token_id: 'tok_a' });
  t.equal(rows.reduce((n, r) => n + (r.calls ?? 1), 0), 5000, 'every call counted once');
  // the next minute starts afresh
  h.tally.add(line(MIN + 1, { client_ip: '10.9.9.9' }), h.onLost);
  t.equal(h.writes.at(-1)!.row.client_ip, '10.9.9.9', 'a new minute has room for addresses again');
});

t.test('close writes the counts of the current minute; later refusals get rows of their own; a failed write goes to lost', async (t) => {
  const h = harness();
  for (let i = 0; i < 3; i++) h.tally.add(line(i), h.onLost);
  await h.tally.close();
  t.match(h.writes.at(-1), { again: true, row: { calls: 3 } }, 'the open minute written at close');
  h.tally.add(line(10), h.onLost);
  h.tally.add(line(11), h.onLost);
  await h.tally.flush();
  t.same(h.writes.slice(-2).map((w) => [w.row.request_id, w.again]), [['req_10', false], ['req_11', false]], 'after close: a row each');

  const f = harness();
  f.failWrites();
  for (let i = 0; i < 4; i++) f.tally.add(line(i), f.onLost);
  await f.tally.close();
  t.same(f.lost.map((r) => [r.request_id, r.calls]), [['req_0', undefined], ['req_0', 4]], 'the first row and the count, each handed to lost whole');
});

t.test('a lost report that throws is caught: no rejection left unhandled, and the counting goes on', async (t) => {
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => void unhandled.push(reason);
  process.on('unhandledRejection', onUnhandled);
  t.teardown(() => void process.off('unhandledRejection', onUnhandled));
  const h = harness();
  h.failWrites();
  let reports = 0;
  const throwing = () => {
    reports++;
    throw new Error('the log is gone too');
  };
  for (let i = 0; i < 3; i++) h.tally.add(line(i), throwing);
  h.at(T0 + MIN);
  await t.resolves(h.tally.flush(), 'the flush waits for the writes and resolves');
  await t.resolves(h.tally.close());
  t.equal(reports, 2, 'the first row and the count were reported (and the report threw)');
  // Node reports an unhandled rejection once the microtasks are done: one turn of the event
  // loop later, it would be here
  await new Promise<void>((resolve) => setImmediate(resolve));
  t.same(unhandled, [], 'no unhandled rejection');
  t.equal(h.tally.size, 0);
});
