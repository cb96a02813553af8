import type { Store } from './open.ts';
import { AUDIT_SCAN_BUDGET, type Page, type PageQuery } from '../backend.ts';
import { pageByTime } from './ledger.ts';
import type { AuditRecord } from '../records.ts';

/** Request audit metadata (spec: data store holds request audit metadata incl. client IP and
 * approximate country). Never image bytes, never tokens. Queued for this thread's next write
 * transaction, or a commit of its own shortly after (audit-queue.ts), off the request's
 * critical path: resolves once a commit holds the line (the row and its token index); a commit
 * that fails (a full disk) rejects this promise, and only it, instead of ending the thread. */
export function writeAudit(store: Store, record: AuditRecord): Promise<void> {
  return store.audit.push(record);
}

export function listAudit(store: Store, q: PageQuery, where?: (r: AuditRecord) => boolean): Page<AuditRecord> {
  return pageByTime<AuditRecord>(store, 'audit', q, where, where ? AUDIT_SCAN_BUDGET : Infinity);
}
