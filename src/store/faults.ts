import type { StoreBackend } from './backend.ts';

/** Testing only: whether a settlement fails inside its own transaction, the way a failed
 * write would, given the results it was about to save. Installed where the store is opened
 * (TEST_SETTLEMENT_FAIL_PREFIX, select.ts), never in production, so no operation's signature
 * carries it; the inference faults are installed where the engine is built the same way
 * (src/cluster/engine-host.ts). */
export type SettlementFault = (results: unknown) => boolean;

/** What both backends keep for the hook (not part of StoreBackend: callers never see it). */
export interface FaultHooks {
  settlementFault: SettlementFault | null;
}

/** A settlement fails when one of its results has a capture id starting with `prefix`. */
export function settlementFaultFor(prefix: string | undefined): SettlementFault | null {
  if (prefix === undefined) return null;
  return (results) => Array.isArray(results) && results.some((r: { capture_id?: unknown }) => typeof r.capture_id === 'string' && r.capture_id.startsWith(prefix));
}

/** Installs (or, with null, removes) the settlement fault on an opened store. */
export function injectSettlementFault(store: StoreBackend, fault: SettlementFault | null): void {
  (store as StoreBackend & FaultHooks).settlementFault = fault;
}
