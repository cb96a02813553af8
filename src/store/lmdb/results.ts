import type { StoredResults } from '../backend.ts';
import { readLatest, type Store } from './open.ts';

/** The result records a charged call answered (written by its settlement, settle.ts). */
export function getResults(store: Store, requestId: string): StoredResults | undefined {
  readLatest(store);
  return store.db.results.get(requestId);
}
