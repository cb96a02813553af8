// What a verify call decided, for the audit log: operators filter on it, and a charged call
// whose captures all came back `retry` reads differently from one that said `live`.

import type { AuditOutcome } from '../store/index.ts';

/** One result per capture: every capture live, every one non-live, every one retry, or a
 * batch with more than one of these (mixed). */
export function outcomeOfResults(results: readonly { status: string; alive: boolean | null }[]): AuditOutcome {
  const seen = new Set<AuditOutcome>(results.map((r) => (r.status === 'retry' ? 'retry' : r.alive ? 'live' : 'non_live')));
  if (seen.size === 1) return [...seen][0]!;
  return seen.size === 0 ? 'error' : 'mixed';
}

/** A replayed answer is the saved body of the first call: its outcome is that call's. */
export function outcomeOfBody(status: number, body: string): AuditOutcome {
  if (status !== 200) return 'error';
  try {
    const parsed = JSON.parse(body) as { results?: { status: string; alive: boolean | null }[] };
    return Array.isArray(parsed.results) ? outcomeOfResults(parsed.results) : 'error';
  } catch {
    return 'error';
  }
}
