import { AUDIT_SCAN_BUDGET, type Page, type PageQuery } from '../backend.ts';
import type { AuditRecord } from '../records.ts';
import { cursorOf, pageByTime } from './ledger.ts';
import type { Pg } from './open.ts';

/** The line commits unsynced (docs/metering.md "Commits"): an audit line records an answer,
 * not a charge, so its commit need not wait for a WAL flush of its own; the next synced commit
 * (any call's settlement) or the WAL writer flushes it. The setting is made in the statement
 * itself (set_config(..., true): local to this statement's own transaction), so it never leaks
 * to the pooled connection's next transaction. */
export const AUDIT_INSERT = `INSERT INTO audit (at_ms, request_id, record)
  SELECT $1::bigint, $2::text, $3::jsonb FROM (SELECT set_config('synchronous_commit', 'off', true)) AS unsynced
  ON CONFLICT DO NOTHING`;

export async function writeAudit(db: Pg, record: AuditRecord) {
  await db.q(AUDIT_INSERT, [Date.parse(record.at), record.request_id, record]);
}

/** A row of counted refusals written again at the end of its minute (store/refusal-tally.ts):
 * it replaces the first call's row in place (same at and request id), unsynced likewise; if
 * it overtakes that first INSERT on another pooled connection, the first INSERT then finds it
 * and does nothing. */
export const AUDIT_REWRITE = `INSERT INTO audit (at_ms, request_id, record)
  SELECT $1::bigint, $2::text, $3::jsonb FROM (SELECT set_config('synchronous_commit', 'off', true)) AS unsynced
  ON CONFLICT (at_ms, request_id) DO UPDATE SET record = EXCLUDED.record`;

export async function writeAuditCount(db: Pg, record: AuditRecord, again: boolean) {
  await db.q(again ? AUDIT_REWRITE : AUDIT_INSERT, [Date.parse(record.at), record.request_id, record]);
}

export async function listAudit(db: Pg, q: PageQuery, where?: (r: AuditRecord) => boolean): Promise<Page<AuditRecord>> {
  if (!where) return pageByTime(db, 'audit', q, (r) => r.record as AuditRecord, 'request_id');
  // filters are predicates shared with LMDB: scan pages until this one is full, bounded
  // like the LMDB scan (AUDIT_SCAN_BUDGET), and answer a cursor at the last row examined
  const limit = Math.min(Math.max(q.limit ?? 100, 1), 1000);
  const items: AuditRecord[] = [];
  let cursor = q.cursor;
  for (let scanned = 0; scanned < AUDIT_SCAN_BUDGET; ) {
    const page = await pageByTime(db, 'audit', { ...q, cursor, limit: 1000 }, (r) => r.record as AuditRecord, 'request_id');
    for (const r of page.items) {
      scanned++;
      if (!where(r)) continue;
      items.push(r);
      if (items.length === limit) return { items, next_cursor: cursorOf(Date.parse(r.at), r.request_id) };
    }
    if (!page.next_cursor) return { items, next_cursor: null };
    cursor = page.next_cursor;
  }
  return { items, next_cursor: cursor ?? null };
}
