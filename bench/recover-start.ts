// How long LMDB's start-up recovery and a dead API worker's recovery take on a store that keeps
// N reservations (a day of traffic keeps millions: they stay as long as their idempotency keys):
// through the pending index (src/store/lmdb/held.ts), and by the read of every reservation a
// start makes on a store written before the index, or after another build made calls on it.
//
//   node --import tsx bench/recover-start.ts [N=531000]
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { LmdbBackend } from '../src/store/lmdb/index.ts';
import { PENDING_INDEX_FLAG } from '../src/store/lmdb/open.ts';

const N = Number(process.argv[2] ?? 531_000);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'recover-start-'));
let store = LmdbBackend.open(dir);
const T = Date.parse('2026-06-01T00:00:00Z');
const iso = new Date(T).toISOString();
{
  const { db } = store.store;
  // settled reservations as the settlements leave them (charged, 24 h of keys kept)
  for (let b = 0; b < N; b += 5000) {
    await db.reservations.transaction(() => {
      for (let i = b; i < Math.min(N, b + 5000); i++) {
        const id = `rsv_${String(i).padStart(12, '0')}`;
        void db.reservations.put(id, { id, request_id: `req_${i}`, token_id: 'tok_1', module_id: 'rgb_liveness', units: 1, state: 'charged', windows: { day: '2026-06-01', month: '2026-06' }, created_at: iso, settled_at: iso, pid: 1, pid_start: 'x', thread: 1, idempotency_key: `key-${i}`, unsaved_body: null } as never);
      }
    });
  }
}
await store.close();

const timed = async (label: string, fn: () => Promise<unknown>) => {
  const t0 = performance.now();
  await fn();
  console.log(`${label}: ${(performance.now() - t0).toFixed(1)} ms`);
};
store = LmdbBackend.open(dir);
console.log(`${N} settled reservations kept`);
await timed('start-up recovery, through the pending index', () => store.recoverPending(Date.now()));
await timed("a dead API worker's recovery, through the pending index", () => store.recoverThread(3, Date.now()));
await store.store.db.meta.remove(PENDING_INDEX_FLAG);
await timed('start-up recovery on a store another build wrote (reads every reservation, rebuilds the indexes)', () => store.recoverPending(Date.now()));
await timed('the next start, through the index again', () => store.recoverPending(Date.now()));
await store.close();
fs.rmSync(dir, { recursive: true, force: true });
