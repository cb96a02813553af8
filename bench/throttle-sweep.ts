// What one sweep of the login throttle's counts costs on LMDB (src/startup.ts runs one a minute
// on the main thread): a pass over N counts still live (it reads them all and removes none) and
// a pass over N stale ones (it removes them all). A spray from an IPv6 /48's 65,536 networks
// leaves up to three counts for each address it tries (address, address and name, name).
//
//   node --import tsx bench/throttle-sweep.ts [N=200000]
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { LmdbBackend } from '../src/store/lmdb/index.ts';
import { WINDOW_MS } from '../src/store/throttle-rules.ts';

const N = Number(process.argv[2] ?? 200_000);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'throttle-sweep-'));
const store = LmdbBackend.open(dir);
const { db } = store.store;
const T = Date.parse('2026-06-01T00:00:00Z');
for (let b = 0; b < N; b += 10_000) {
  await db.loginFailures.transaction(() => {
    for (let i = b; i < Math.min(N, b + 10_000); i++) void db.loginFailures.put(`addr:2001:db8:${(i >> 16).toString(16)}:${(i & 0xffff).toString(16)}::/64`, { count: 1, window_start: T, last_failure: T });
  });
}
const timed = async (at: number) => {
  const t = performance.now();
  await store.sweepLoginThrottle(at);
  return performance.now() - t;
};
const live = await timed(T + 1000);
const kept = db.loginFailures.getCount();
const stale = await timed(T + WINDOW_MS);
const left = db.loginFailures.getCount();
console.log(`${N} live counts: one sweep ${live.toFixed(0)} ms (${kept} kept)`);
console.log(`${N} stale counts: one sweep ${stale.toFixed(0)} ms (${left} left)`);
await store.close();
fs.rmSync(dir, { recursive: true, force: true });
