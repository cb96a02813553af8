import { atomically } from './atomic.ts';
import { BY_TOKEN_FLAG, type Store } from './open.ts';
import type { LedgerEntry } from '../records.ts';

// Per-token index of the audit log and the ledger, so "this token's calls, newest first" is a
// range read of that token's rows, not a scan of every row (50,000 audit rows took about a
// second to scan). Key: [db, token_id, epoch ms, id] -> 1, where [epoch ms, id] is the row's
// key in its own db, so the time cursor of a page is the same with or without the index.
//
// Port note (store interface): in SQL, an index on (token_id, at, id) of each table.

export type TimeDb = 'ledger' | 'audit';

/** Inside the ledger append's write transaction (`void`: its commit is the transaction's). */
export function indexLedgerByToken(store: Store, e: LedgerEntry, at: number): void {
  void store.db.byToken.put(['ledger', e.token_id, at, e.id], 1);
}

export function byTokenReady(store: Store): boolean {
  return store.db.meta.get(BY_TOKEN_FLAG) === true;
}

/** Builds the index from both dbs once per store (older stores have none); until it is
 * complete, token-filtered pages scan the whole db as before. */
export async function ensureByTokenIndex(store: Store): Promise<void> {
  if (byTokenReady(store)) return;
  await atomically(store, () => {
    if (byTokenReady(store)) return;
    for (const { key, value } of store.db.audit.getRange({})) {
      const r = value;
      if (r.token_id !== null) void store.db.byToken.put(['audit', r.token_id, ...(key as [number, string])], 1);
    }
    for (const { key, value } of store.db.ledger.getRange({})) {
      void store.db.byToken.put(['ledger', value.token_id, ...(key as [number, string])], 1);
    }
    void store.db.meta.put(BY_TOKEN_FLAG, true);
  });
}
