// Experiment (not part of any suite): does lmdb-js's native memory (RssAnon) grow with the bytes
// written to a store, outside the service? One writer (this thread) commits with the service's
// flags (transactionSync, NO_SYNC_FLUSH under overlappingSync), about 4 KB a "call" in batches of
// four over five named databases (random and time-ordered keys, as reservations, ledger,
// results, idempotency and audit are keyed); READERS worker threads read as verify calls do
// (gets and short reverse ranges, a fresh read transaction each turn). Prints RssAnon every
// 128 MiB of store. bench/results/soak-30min.md says what it showed.
//
//   READERS=4 MALLOC_MMAP_THRESHOLD_=32768 node bench/experiments/lmdb-rss-growth.mjs [GiB=1.5] [DIR]
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { isMainThread, Worker, workerData } from 'node:worker_threads';
import { open, TransactionFlags } from 'lmdb';

const NAMES = ['reservations', 'ledger', 'results', 'idempotency', 'audit'];
const openAll = (dir) => {
  const root = open({ path: dir, maxDbs: 32, mapSize: 16 * 1024 ** 3, compression: false });
  return { root, dbs: NAMES.map((name) => root.openDB({ name })) };
};

if (!isMainThread) {
  const { dbs } = openAll(workerData.dir);
  const turn = () => {
    for (let i = 0; i < 50; i++) {
      dbs[0].get(`res_${Math.random()}`);
      for (const e of dbs[1].getRange({ reverse: true, limit: 3 })) void e;
      void dbs[4].getRange({ reverse: true, limit: 2 }).asArray;
    }
    setImmediate(turn);
  };
  turn();
} else {
  const target = Number(process.argv[2] ?? 1.5) * 1024 ** 3;
  const dir = process.argv[3] ?? fs.mkdtempSync(path.join(os.tmpdir(), 'lmdb-rss-'));
  const { root, dbs } = openAll(dir);
  for (const d of dbs) d.putSync('seed', 1);
  const readers = Array.from({ length: Number(process.env.READERS ?? 0) }, () => new Worker(new URL(import.meta.url), { workerData: { dir } }));
  const FLAGS = TransactionFlags.ABORTABLE | TransactionFlags.SYNCHRONOUS_COMMIT | TransactionFlags.NO_SYNC_FLUSH;
  const anonMiB = () => Number(/RssAnon:\s+(\d+)/.exec(fs.readFileSync('/proc/self/status', 'utf8'))[1]) / 1024;
  const pad = 'x'.repeat(1800);
  const t0 = Date.now();
  let calls = 0;
  let next = 0;
  for (;;) {
    root.transactionSync(() => {
      for (let i = 0; i < 4; i++, calls++) {
        const id = `res_${randomBytes(9).toString('base64url')}`;
        const at = Date.now();
        void dbs[0].put(id, { id, state: 'charged', at, token_id: 'tok_x', units: 1, note: pad.slice(0, 400) });
        void dbs[1].put([at, id], { id, kind: 'charge', units: 1 });
        void dbs[2].put(randomBytes(16).toString('hex'), { at, results: [{ score: Math.random(), capture_id: id }], note: pad.slice(0, 500) });
        void dbs[3].put(['k', id], { body: pad });
        void dbs[4].put([at, id], { request_id: id, status: 200, note: pad.slice(0, 250) });
      }
    }, FLAGS);
    const size = fs.statSync(path.join(dir, 'data.mdb')).size;
    if (size >= next) {
      console.log(`${((Date.now() - t0) / 1000).toFixed(0)} s, ${calls} calls, store ${(size / 2 ** 20).toFixed(0)} MiB, RssAnon ${anonMiB().toFixed(1)} MiB`);
      next += 128 * 2 ** 20;
    }
    if (size >= target) break;
  }
  for (const r of readers) await r.terminate();
  await root.close();
  fs.rmSync(dir, { recursive: true, force: true });
}
