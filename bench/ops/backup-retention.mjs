// Backup and retention figures on the compiled build (npm run build first):
//   node bench/ops/backup-retention.mjs [records]      (default 50000 of each kind)
// Fills a scratch store with audit rows, ledger entries (through the real append path)
// and result records, then times the compacting backup, one retention pass that prunes
// everything, and `ledger verify` over the pruned totals. Figures only, no targets here.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openStore } from '../../dist/src/store/lmdb/open.js';
import { atomically } from '../../dist/src/store/lmdb/atomic.js';
import { backupStore } from '../../dist/src/store/lmdb/backup.js';
import { appendLedger, verifyLedger } from '../../dist/src/store/lmdb/ledger.js';
import { pruneOnce } from '../../dist/src/retention/index.js';

const n = Number(process.argv[2] ?? 50_000);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lv-bench-ops-'));
const store = openStore(dir);
const t0 = Date.parse('2025-01-01T00:00:00Z');
const day = (ms) => new Date(ms).toISOString().slice(0, 10);

let t = performance.now();
for (let i = 0; i < n; i += 1000) {
  await atomically(store, () => {
    for (let j = i; j < Math.min(n, i + 1000); j++) {
      const at = t0 + j * 1000;
      const rid = `req-${j}`;
      const token = `tok_${j % 50}`;
      void store.db.audit.put([at, rid], { request_id: rid, at: new Date(at).toISOString(), token_id: token, module_id: 'rgb_liveness', client_ip: '203.0.113.9', country: null, status: 200, error_code: null, captures: 1, charged_units: 1, latency_ms: 12.3 });
      appendLedger(store, { request_id: rid, token_id: token, module_id: 'rgb_liveness', units: 1, kind: 'charge', at, windows: { day: day(at), month: day(at).slice(0, 7) } });
      void store.db.results.put(rid, { at: new Date(at).toISOString(), token_id: token, module_id: 'rgb_liveness', results: [{ capture_id: `c-${j}`, mode: 'rgb_single', status: 'ok', alive: true, score: 0.93 }] });
    }
  });
}
const fillS = (performance.now() - t) / 1000;
const liveBytes = fs.statSync(path.join(dir, 'store', 'data.mdb')).size;

const file = path.join(dir, 'backup.mdb');
t = performance.now();
const backup = await backupStore(store, file);
const backupS = (performance.now() - t) / 1000;

t = performance.now();
const report = await pruneOnce(store, { DATA_DIR: dir, RETENTION_AUDIT_DAYS: 1, RETENTION_RESULTS_DAYS: 1, RETENTION_LEDGER_DAYS: 1, RETENTION_ARCHIVE_DAYS: 1 }, t0 + 3650 * 86_400_000);
const pruneS = (performance.now() - t) / 1000;

t = performance.now();
const check = verifyLedger(store);
const verifyMs = performance.now() - t;
await store.close();
fs.rmSync(dir, { recursive: true, force: true });

console.log(JSON.stringify({
  records_per_kind: n,
  fill_s: +fillS.toFixed(2),
  store_file_mb: +(liveBytes / 2 ** 20).toFixed(1),
  backup: { s: +backupS.toFixed(2), mb: +(backup.bytes / 2 ** 20).toFixed(1), mb_per_s: +(backup.bytes / 2 ** 20 / backupS).toFixed(1) },
  prune: { s: +pruneS.toFixed(2), removed: report, records_per_s: Math.round((report.audit + report.results + report.ledger) / pruneS) },
  ledger_verify_after_prune: { ok: check.ok, ms: +verifyMs.toFixed(1) },
}, null, 2));
