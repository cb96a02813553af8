import fs from 'node:fs';
import type { StoreBackend } from './backend.ts';
import type { Store } from './lmdb/open.ts';

/** Testing only: what becomes of a settlement, given the results it was about to save:
 * `fail` inside its own transaction, the way a failed write would (TEST_SETTLEMENT_FAIL_PREFIX);
 * `hold`, its writes made and its transaction still open, until the process is killed
 * (TEST_SETTLEMENT_HOLD_PREFIX: the crash point "during the settlement", test/metering/
 * crash-points.test.ts). Installed where the store is opened (select.ts), never in production,
 * so no operation's signature carries it; the inference faults are installed where the engine
 * is built the same way (src/cluster/engine-host.ts). */
export type SettlementFault = (results: unknown) => 'fail' | 'hold' | null;

/** What both backends keep for the hook (not part of StoreBackend: callers never see it). */
export interface FaultHooks {
  settlementFault: SettlementFault | null;
}

/** A settlement fails (or holds) when one of its results has a capture id starting with the
 * prefix. */
export function settlementFaultFor(failPrefix: string | undefined, holdPrefix?: string): SettlementFault | null {
  if (failPrefix === undefined && holdPrefix === undefined) return null;
  const named = (results: unknown, prefix: string | undefined) => prefix !== undefined && Array.isArray(results)
    && results.some((r: { capture_id?: unknown }) => typeof r.capture_id === 'string' && r.capture_id.startsWith(prefix));
  return (results) => (named(results, failPrefix) ? 'fail' : named(results, holdPrefix) ? 'hold' : null);
}

/** Stops this thread where it stands, for good (its transaction open, its locks held), after
 * one line on stderr that a test waits for before it kills the process. Synchronous on
 * purpose: an LMDB settlement's transaction runs in a synchronous callback. */
export function holdForever(where: string): never {
  fs.writeSync(2, `${JSON.stringify({ msg: 'test fault: holding', where })}\n`);
  for (;;) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
}

/** Installs (or, with null, removes) the settlement fault on an opened store. */
export function injectSettlementFault(store: StoreBackend, fault: SettlementFault | null): void {
  (store as StoreBackend & FaultHooks).settlementFault = fault;
}

/** Testing only: a full disk under one LMDB handle (`store`, of this thread). Its synchronous
 * commits fail with ENOSPC, the next `commits` of them (Infinity: all), each after its
 * transaction's writes have run, as LMDB's commit fails on a full disk (nothing of it is
 * committed; the metering writer has answered its early reservations by then, writer-thread.ts);
 * and its write probe finds no room, so the store's write health stays failing, until the
 * returned function undoes both. `commits` 0: only the probe. Nothing in the service calls it:
 * a test plants it on a handle of its own thread (test/verify/world.ts diskFull), or on the
 * metering writer's through MeteringWriter.diskFull, which only a test calls; no setting or
 * request reaches either (unlike the TEST_SETTLEMENT_* prefixes above). It replaces the
 * handle's methods, so a store without it runs no code of it. */
export function plantDiskFull(store: Store, commits: number): () => void {
  const root = store.root as unknown as Record<'transactionSync', (fn: () => unknown, flags?: number) => unknown>;
  const health = store.writes as unknown as Record<'probe', () => Promise<boolean>>;
  const ownCommit = Object.hasOwn(root, 'transactionSync');
  const commit = root.transactionSync;
  const probe = health.probe;
  let failing = commits;
  root.transactionSync = (fn, flags) => commit.call(root, () => {
    const out = fn();
    if (failing-- > 0) throw Object.assign(new Error('ENOSPC: no space left on device (a test\'s full disk)'), { code: 'ENOSPC', errno: 28 });
    return out;
  }, flags);
  health.probe = async () => false;
  return () => {
    if (ownCommit) root.transactionSync = commit;
    else delete (root as Partial<typeof root>).transactionSync;
    health.probe = probe;
  };
}
