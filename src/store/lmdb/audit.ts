import { lmdbWrite } from './atomic.ts';
import type { Store } from './open.ts';
import { indexAuditByToken } from './by-token.ts';
import { AUDIT_SCAN_BUDGET, type Page, type PageQuery } from '../backend.ts';
import { pageByTime } from './ledger.ts';
import type { AuditRecord } from '../records.ts';

/** Request audit metadata (spec: data store holds request audit metadata incl. client IP and
 * approximate country). Never image bytes, never tokens. Written without awaiting: lmdb
 * batches these into the next commit, off the request's critical path. Both writes of a line
 * (the row and its token index) are awaited, so a commit that fails (a full disk) rejects
 * this promise, and only it, instead of ending the thread. */
export async function writeAudit(store: Store, record: AuditRecord): Promise<void> {
  const index = indexAuditByToken(store, record);
  const row = store.db.audit.put([Date.parse(record.at), record.request_id], record);
  await lmdbWrite(store, 'audit', Promise.all([row, index]));
}

export function listAudit(store: Store, q: PageQuery, where?: (r: AuditRecord) => boolean): Page<AuditRecord> {
  return pageByTime<AuditRecord>(store, 'audit', q, where, where ? AUDIT_SCAN_BUDGET : Infinity);
}
