// How LMDB's hourly idempotency prune keeps the store's one writer from another thread, and
// what it costs: fills a store with N completed keys (and their charged reservations, 1.7 KB
// answers, the soak's size, with the expiry entries their settlements write), then, while a
// second thread commits a small synced write every 5 ms (as the metering writer commits verify
// calls), runs the prune with nothing expired, then with a tenth of the keys expired (both
// through the expiry index). Then a second store filled the same way but without entries, as a
// build before the index left it: the first pass reads both trees in chunks and indexes them,
// and a pass after it. Prints each pass's time and the second thread's longest commit during
// it, against its longest commit before. src/store/lmdb/expiry.ts and prune-scan.ts say why.
// (Until session 59 the older store was the first one with its entries removed in one
// transaction: a free list of about a million entries' pages, which LMDB then worked through
// during the pass, made the pass superlinear in N and stalled the other thread 120-240 ms.)
//
//   node --import tsx bench/prune-lock.ts [N=200000]
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { LmdbBackend } from '../src/store/lmdb/index.ts';
import { noteExpiry } from '../src/store/lmdb/expiry.ts';
import { EXPIRING_TREES, expiryFlag } from '../src/store/lmdb/open.ts';

const N = Number(process.argv[2] ?? 200_000);
const T = Date.parse('2026-06-01T00:00:00Z');
const body = 'x'.repeat(1700);

/** A store holding N completed keys and their reservations, the first tenth completed a day
 * before the rest; with their expiry entries, or none (and its trees marked not indexed). */
async function filled(entries: boolean) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'prune-lock-'));
  const store = LmdbBackend.open(dir);
  const { db } = store.store;
  for (let b = 0; b < N; b += 5000) {
    await db.idempotency.transaction(() => {
      for (let i = b; i < Math.min(N, b + 5000); i++) {
        const iso = new Date(i < N / 10 ? T - 86_400_000 : T).toISOString();
        void db.idempotency.put(['tok_1', `key-${i}`], { token_id: 'tok_1', key: `key-${i}`, state: 'completed', fingerprint: 'f'.repeat(64), request_id: `req_${i}`, reservation_id: `res_${i}`, created_at: iso, completed_at: iso, status: 200, body });
        void db.reservations.put(`res_${i}`, { id: `res_${i}`, token_id: 'tok_1', module_id: 'rgb_liveness', units: 1, state: 'charged', created_at: iso, settled_at: iso, idempotency_key: `key-${i}`, request_id: `req_${i}` } as never);
        if (!entries) continue;
        noteExpiry(store.store, 'idempotency', iso, ['tok_1', `key-${i}`]);
        noteExpiry(store.store, 'reservations', iso, `res_${i}`);
      }
    });
  }
  if (!entries) await store.store.root.transaction(() => {
    for (const tree of EXPIRING_TREES) void db.meta.remove(expiryFlag(tree));
  });
  return { dir, store };
}

/** Runs `passes` on `store` while another thread (plain lmdb-js on the same files, no loader)
 * commits a small synced write every 5 ms. */
async function probed(dir: string, store: LmdbBackend, passes: (pass: (label: string, at: number) => Promise<void>) => Promise<void>) {
  const prober = new Worker(`
    const { parentPort, workerData } = require('node:worker_threads');
    const { open } = require(workerData.lmdb);
    const root = open({ path: workerData.path, maxDbs: 32, compression: false });
    const meta = root.openDB({ name: 'meta' });
    let worst = 0, n = 0;
    parentPort.on('message', (m) => { if (m === 'reset') worst = 0; else parentPort.postMessage({ worst, n }); });
    const loop = () => { const t0 = performance.now(); meta.transactionSync(() => void meta.put('prune-lock-probe', n)); worst = Math.max(worst, performance.now() - t0); n++; setTimeout(loop, 5); };
    loop();`, { eval: true, execArgv: [], workerData: { lmdb: createRequire(import.meta.url).resolve('lmdb'), path: path.join(dir, 'store') } });
  const ask = () => new Promise<{ worst: number; n: number }>((resolve) => {
    prober.once('message', resolve);
    prober.postMessage('report');
  });
  await passes(async (label, at) => {
    prober.postMessage('reset');
    await new Promise((r) => setTimeout(r, 1000));
    const before = (await ask()).worst;
    prober.postMessage('reset');
    const t0 = performance.now();
    const pruned = await store.pruneIdempotency(at, 24);
    const took = performance.now() - t0;
    await new Promise((r) => setTimeout(r, 20));
    const { worst } = await ask();
    console.log(`prune of ${N} keys, ${label}: ${took.toFixed(0)} ms (${pruned} removed); another thread's synced commit took at most ${worst.toFixed(1)} ms during it (${before.toFixed(1)} ms in the second before)`);
  });
  await prober.terminate();
  await store.close();
  fs.rmSync(dir, { recursive: true, force: true });
}

// retention 24 h: at T nothing has expired; at T + 1 h the tenth completed at T - 24 h has
const indexed = await filled(true);
await probed(indexed.dir, indexed.store, async (pass) => {
  await pass('nothing expired (expiry index)', T);
  await pass(`${N / 10} expired (expiry index)`, T + 3600_000);
});
const older = await filled(false);
await probed(older.dir, older.store, async (pass) => {
  await pass(`${N / 10} expired, a store written before the index (its first pass reads both trees and indexes them)`, T + 3600_000);
  await pass('nothing expired, the same store once indexed', T + 3600_000);
});
