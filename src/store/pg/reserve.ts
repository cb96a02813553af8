import { randomBytes } from 'node:crypto';
import type { ReserveInput, ReserveOutcome } from '../backend.ts';
import { quotaRefusal } from '../quota.ts';
import type { Grant } from '../records.ts';
import { StoreUnavailableError } from '../errors.ts';
import { isoOf, type Pg } from './open.ts';
import { windowsOf } from './usage.ts';
import { reserveStatement, sessionRefusal } from './device-sessions.ts';

export async function reserve(db: Pg, input: ReserveInput): Promise<ReserveOutcome> {
  const { token, moduleId, units, requestId, idempotencyKey: key, fingerprint, at } = input;
  const w = windowsOf(at);
  const created = isoOf(at);
  // a same-key request admitted between the function's lookup and its claim answers
  // 'retry': the second call then sees it (a handful of rounds is plenty)
  for (let round = 0; ; round++) {
    const id = `rsv_${randomBytes(9).toString('base64url')}`;
    // the reservation commits unsynced (reserveStatement says why)
    const sql = reserveStatement(input.sessionId, [
      token.id, moduleId, units, requestId, key, fingerprint, at, created, w.day, w.month, id, `led_${randomBytes(9).toString('base64url')}`, db.node,
    ]);
    const call = db.q(sql.text, sql.values, sql.name).catch((err: unknown) => {
      // the caller answers 503 and runs nothing: if the reservation did commit, give it back
      if (err instanceof StoreUnavailableError) db.repairs.set(id, { kind: 'refund', at });
      throw err;
    });
    const out = (await call).rows[0]!.r as { kind: string; code?: string; status?: number; body?: string; used?: number; max?: number; grant?: Grant };
    if (out.kind === 'reserved') {
      return {
        kind: 'reserved',
        reservation: {
          id, request_id: requestId, token_id: token.id, module_id: moduleId, units, state: 'pending', windows: { day: w.day, month: w.month },
          created_at: created, settled_at: null, pid: process.pid, node: db.node, idempotency_key: key, unsaved_body: null,
        },
      };
    }
    if (out.kind === 'replay') return { kind: 'replay', status: out.status ?? 200, body: out.body ?? '' };
    if (out.kind === 'retry' && round < 5) continue;
    // the function refused under the same rule lmdb/reserve.ts applies; the message and the
    // reset come from the one rule both share (quota.ts)
    if (out.code === 'quota_exceeded') return quotaRefusal(moduleId, out.grant!, out.used!, units, at)!;
    const sessionRefused = sessionRefusal(out, units);
    if (sessionRefused) return sessionRefused;
    if (out.code === 'request_in_progress' || out.kind === 'retry') return { kind: 'request_in_progress' };
    return { kind: out.code as 'invalid_token' | 'module_forbidden' | 'idempotency_conflict' | 'settlement_failed' };
  }
}
