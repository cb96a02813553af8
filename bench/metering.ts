// Cost of metering + idempotency per verify call: one reservation transaction (idempotency
// lookup, quota check, ledger entry, counters, reservation, pending key) and one settlement
// transaction (reservation charged, key completed with the body, result JSON), against a
// real LMDB store on this disk. Sequential calls show the latency a request pays (each waits
// for its durable commit); concurrent calls show how LMDB batches commits under load.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { createToken } from '../src/admin/tokens.ts';
import { reserve, settle } from '../src/store/lmdb/index.ts';
import { LmdbBackend } from '../src/store/lmdb/index.ts';
import { openStore } from '../src/store/lmdb/open.ts';

export async function benchMetering(opts: { quick: boolean }) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lv-bench-metering-'));
  const store = openStore(dir);
  const { token: view } = await createToken(new LmdbBackend(store), { name: 'bench', grants: [{ module_id: 'rgb_liveness', limit: null, period: 'never' }] });
  const token = store.db.tokens.get(view.id)!;
  const body = JSON.stringify({ results: [{ capture_id: 'x', status: 'ok', score: 0.5 }], pad: 'x'.repeat(900) });
  let n = 0;
  const one = async () => {
    const id = `req-${n++}`;
    const r = await reserve(store, { token, moduleId: 'rgb_liveness', units: 1, requestId: id, idempotencyKey: id, fingerprint: 'f', at: Date.now() });
    if (r.kind !== 'reserved') throw new Error('unexpected replay');
    if ((await settle(store, r.reservation, Date.now(), () => body, [{ capture_id: 'x' }])).kind !== 'settled') throw new Error('settlement failed');
  };
  const count = opts.quick ? 200 : 1000;
  const t0 = performance.now();
  for (let i = 0; i < count; i++) await one();
  const sequentialMs = (performance.now() - t0) / count;
  const t1 = performance.now();
  const inFlight = 8;
  await Promise.all(Array.from({ length: inFlight }, async () => { for (let i = 0; i < count / inFlight; i++) await one(); }));
  const concurrentPerS = count / ((performance.now() - t1) / 1000);
  await store.close();
  fs.rmSync(dir, { recursive: true, force: true });
  return { calls: count, sequential_ms_per_call: sequentialMs, concurrent_calls_per_s: concurrentPerS, concurrent_in_flight: inFlight, transactions_per_call: 2 };
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  console.log(JSON.stringify(await benchMetering({ quick: process.argv.includes('--quick') }), null, 2));
  process.exit(0);
}
