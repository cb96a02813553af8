// GET /admin/api/overview: what an operator wants at a glance (issue 25). Everything here is
// read from what the service keeps anyway (the audit log, the tokens' usage, the slot table,
// readiness): nothing new is counted on the verify path.
import type { InferenceService } from '../inference/index.ts';
import { listPendingSettlements } from '../metering/index.ts';
import type { AuditReads, AuditRecord, ModuleReads, Settlements, TokenAdmin, UsageReads } from '../store/index.ts';
import { moduleViews, type ModuleView } from './modules.ts';
import { auditOutcome } from './page-query.ts';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
/** Audit rows read for one overview at most (a day of a busy host is more): past it the
 * older buckets are marked incomplete rather than the page taking seconds. */
export const OVERVIEW_MAX_ROWS = 50_000;
/** Tokens whose usage is read for "nearing the limit" at most. */
export const OVERVIEW_MAX_TOKENS = 2_000;
/** A grant at or above this share of its limit is listed. */
export const NEAR_LIMIT = 0.8;

export interface CallBucket {
  start: string;
  calls: number;
  /** answers by class */
  ok: number;
  client_error: number;
  server_error: number;
  /** 200 answers by what they said (replays counted as calls, not as verdicts) */
  live: number;
  non_live: number;
  retry: number;
  mixed: number;
}

export interface NearLimit {
  token_id: string;
  token_name: string;
  module_id: string;
  used: number;
  limit: number;
  period: string;
  reset_at: string | null;
}

export interface Overview {
  at: string;
  /** per minute over the last hour, oldest first */
  last_hour: CallBucket[];
  /** per hour over the last day, oldest first */
  last_day: CallBucket[];
  /** the audit log held more rows than were read: buckets before `complete_from` are short */
  complete_from: string | null;
  slots: { total: number; in_use: number };
  modules: ModuleView[];
  pending_settlements: number;
  near_limit: NearLimit[];
  /** more tokens than were read for near_limit */
  near_limit_truncated: boolean;
}

function buckets(end: number, size: number, count: number): CallBucket[] {
  const first = Math.floor(end / size) * size - (count - 1) * size;
  return Array.from({ length: count }, (_, i) => ({
    start: new Date(first + i * size).toISOString(),
    calls: 0, ok: 0, client_error: 0, server_error: 0, live: 0, non_live: 0, retry: 0, mixed: 0,
  }));
}

function count(b: CallBucket, a: AuditRecord): void {
  // a row counting refused calls (store/refusal-tally.ts) stands for `calls` of them
  const n = a.calls ?? 1;
  b.calls += n;
  if (a.status < 400) b.ok += n;
  else if (a.status < 500) b.client_error += n;
  else b.server_error += n;
  if (a.replayed) return;
  const o = auditOutcome(a);
  if (o === 'live' || o === 'non_live' || o === 'retry' || o === 'mixed') b[o]++;
}

export async function overview(
  store: AuditReads & Pick<TokenAdmin, 'listTokens'> & Pick<UsageReads, 'usageSnapshot'> & ModuleReads & Settlements,
  inference: InferenceService,
  fallbackModelSet: string,
  slots: { total: number; in_use: number },
  at: number,
): Promise<Overview> {
  const hour = buckets(at, MINUTE, 60);
  const day = buckets(at, HOUR, 24);
  const hourStart = Date.parse(hour[0]!.start);
  const dayStart = Date.parse(day[0]!.start);
  // newest first, so that a cut-off loses the oldest rows, which matter least
  let cursor: string | undefined;
  let read = 0;
  let oldest: number | null = null;
  let truncated = false;
  for (;;) {
    const page = await store.listAudit({ from: dayStart, to: at + 1, order: 'desc', limit: 1000, cursor });
    for (const a of page.items) {
      const t = Date.parse(a.at);
      oldest = t;
      const d = day[Math.floor((t - dayStart) / HOUR)];
      if (d) count(d, a);
      if (t >= hourStart) {
        const m = hour[Math.floor((t - hourStart) / MINUTE)];
        if (m) count(m, a);
      }
    }
    read += page.items.length;
    if (page.next_cursor === null) break;
    if (read >= OVERVIEW_MAX_ROWS) {
      truncated = true;
      break;
    }
    cursor = page.next_cursor;
  }

  const near: NearLimit[] = [];
  const tokens = (await store.listTokens()).filter((t) => t.enabled && !t.revoked && (t.expires_at === null || Date.parse(t.expires_at) > at));
  for (const t of tokens.slice(0, OVERVIEW_MAX_TOKENS)) {
    for (const u of await store.usageSnapshot(t, at)) {
      if (u.limit === null || u.limit === 0 || u.used / u.limit < NEAR_LIMIT) continue;
      near.push({ token_id: t.id, token_name: t.name, module_id: u.module_id, used: u.used, limit: u.limit, period: u.period, reset_at: u.reset_at });
    }
  }
  near.sort((a, b) => b.used / b.limit - a.used / a.limit || a.token_name.localeCompare(b.token_name));

  return {
    at: new Date(at).toISOString(),
    last_hour: hour,
    last_day: day,
    complete_from: truncated && oldest !== null ? new Date(oldest).toISOString() : null,
    slots,
    modules: await moduleViews(store, inference, fallbackModelSet),
    pending_settlements: (await listPendingSettlements(store)).length,
    near_limit: near.slice(0, 50),
    near_limit_truncated: tokens.length > OVERVIEW_MAX_TOKENS,
  };
}
