import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { pruneOnce } from '../../src/retention/index.ts';
import { LmdbBackend } from '../../src/store/lmdb/index.ts';
import { tempDir } from '../helpers/server.ts';
import { reserveInput, tokenRecord } from './contract.ts';

// Retention's cut is a span of whole 24-hour days before now (RETENTION_LEDGER_DAYS, 400 by
// default), and the demo archive goes a whole UTC day at a time, whatever the host's time zone.
// This process runs in Pacific/Auckland: 12 hours ahead of UTC in May, 13 in April, so a cut
// counted in local calendar days (`setDate(getDate() - days)`) lands an hour off across the
// daylight-saving change, and an archive day read as a local date goes 12 hours early; a UTC
// host, where the other retention tests run, shows neither (issue 43's mutation check,
// bench/results/mutation-check.md: both slips passed every retention test). In-process: the
// service's own pass (src/retention pruneOnce) over a real LMDB store in a temporary folder.
// The cut is computed before any store is asked (PostgreSQL gets the same cutoff), so one
// store is enough here.
process.env.TZ = 'Pacific/Auckland';

const DAY = 86_400_000;
const at = Date.parse('2026-05-10T12:00:00.000Z');
const settings = { RETENTION_AUDIT_DAYS: 0, RETENTION_RESULTS_DAYS: 0, RETENTION_LEDGER_DAYS: 0, RETENTION_ARCHIVE_DAYS: 0 };

t.test('the zone took effect: local offsets differ across the 400 days', async (t) => {
  t.equal(new Date(at).getTimezoneOffset(), -12 * 60, 'NZST at the pass');
  t.equal(new Date(at - 400 * DAY).getTimezoneOffset(), -13 * 60, 'NZDT 400 days before');
});

t.test('ledger: entries older than 400 x 24 h before the pass go, younger ones stay', async (t) => {
  const dataDir = tempDir();
  const store = LmdbBackend.open(dataDir);
  t.teardown(() => store.close());
  const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: null, period: 'never' }]);
  await store.insertToken(tok);
  const cutoff = at - 400 * DAY;
  t.equal(new Date(cutoff).toISOString(), '2025-04-05T12:00:00.000Z');
  for (const [when, id] of [[cutoff - 30 * 60_000, 'req_before'], [cutoff + 30 * 60_000, 'req_after'], [at, 'req_now']] as const) {
    t.equal((await store.reserve(reserveInput(tok, { at: when, requestId: id }))).kind, 'reserved');
  }
  const report = await pruneOnce(store, { ...settings, DATA_DIR: dataDir, RETENTION_LEDGER_DAYS: 400 }, at);
  t.equal(report.ledger, 1, 'one entry older than the cut');
  t.same((await store.listLedger({ token_id: tok.id })).items.map((e) => e.request_id).sort(), ['req_after', 'req_now'], 'half an hour before the cut goes, half an hour after stays');
  t.same((await store.usageSnapshot(tok, at)).map((u) => u.used), [3], 'usage stays');
  t.ok((await store.verifyLedger()).ok, 'the ledger verifies with the pruned totals');
});

t.test('demo archive: a day goes once its last UTC moment is older than the cut', async (t) => {
  const dataDir = tempDir();
  const store = LmdbBackend.open(dataDir);
  t.teardown(() => store.close());
  for (const day of ['2026-05-08', '2026-05-09']) {
    fs.mkdirSync(path.join(dataDir, 'archive', day, `req_${day}`), { recursive: true });
    fs.writeFileSync(path.join(dataDir, 'archive', day, `req_${day}`, 'parts.json'), '[]');
  }
  // the cut: 2026-05-09T12:00Z; 2026-05-09 (UTC) still has 12 hours younger than that
  const report = await pruneOnce(store, { ...settings, DATA_DIR: dataDir, RETENTION_ARCHIVE_DAYS: 1 }, at);
  t.equal(report.archive, 1, 'one archived request removed');
  t.same(fs.readdirSync(path.join(dataDir, 'archive')).sort(), ['2026-05-09'], 'the whole UTC day before goes; the day the cut falls in stays');
});
