import t from 'tap';
import { ERRORS, ServiceError } from '../../src/errors/index.ts';
import { admittedOrThrow, settledOrThrow, SettlementRefusedError, UnrecordedCallError } from '../../src/verify/store-outcomes.ts';

// What a client hears for each outcome of the store's reserve and settle: the store says what
// happened (test/store/contract.ts holds both stores to it), this mapping the answer.

function thrown(fn: () => unknown): ServiceError {
  try {
    fn();
  } catch (err) {
    if (err instanceof ServiceError) return err;
    throw err;
  }
  throw new Error('expected a ServiceError');
}

t.test('reserve: admitted outcomes pass through, refusals become their catalogue errors', async (t) => {
  const reserved = { kind: 'reserved', reservation: { id: 'rsv_1' } } as never;
  t.equal(admittedOrThrow(reserved, 7), reserved);
  const replay = { kind: 'replay', status: 200, body: '{"a":1}' } as const;
  t.equal(admittedOrThrow(replay, 7), replay);

  const quota = thrown(() => admittedOrThrow({ kind: 'quota_exceeded', message: 'The daily quota of rgb_liveness has 1 unit(s) left; this request needs 2', retryAfterSeconds: 46800 }, 7));
  t.same([quota.code, quota.status, quota.message, quota.headers], ['quota_exceeded', 429, 'The daily quota of rgb_liveness has 1 unit(s) left; this request needs 2', { 'Retry-After': '46800' }], 'Retry-After: seconds to the reset');
  const cumulative = thrown(() => admittedOrThrow({ kind: 'quota_exceeded', message: 'm', retryAfterSeconds: null }, 7));
  t.same(cumulative.headers, {}, 'a quota that never resets has no Retry-After');

  const busy = thrown(() => admittedOrThrow({ kind: 'request_in_progress' }, 7));
  t.same([busy.code, busy.status, busy.message, busy.headers], ['request_in_progress', 409, ERRORS.request_in_progress.message, { 'Retry-After': '7' }], 'Retry-After: RETRY_AFTER_SECONDS');
  for (const kind of ['idempotency_conflict', 'settlement_failed', 'invalid_token', 'module_forbidden'] as const) {
    const e = thrown(() => admittedOrThrow({ kind }, 7));
    // a refused Bearer token names its scheme (RFC 9110; src/errors/challenge.ts), the others carry nothing
    const headers = kind === 'invalid_token' ? { 'WWW-Authenticate': 'Bearer realm="liveness"' } : {};
    t.same([e.code, e.status, e.message, e.headers], [kind, ERRORS[kind].status, ERRORS[kind].message, headers], kind);
  }
});

t.test('settle: the body of a settled call, the catalogue error of one that was not', async (t) => {
  t.equal(settledOrThrow({ kind: 'settled', body: '{"ok":1}' }), '{"ok":1}');
  const cause = new Error('lease lapsed');
  for (const refunded of [true, false]) {
    const refused = thrown(() => settledOrThrow({ kind: 'refused', cause, refunded }));
    t.same([refused.code, refused.status, refused.headers, refused.cause], ['inference_failed', 500, {}, cause], 'a refused settlement: inference failed, units back');
    t.equal((refused as SettlementRefusedError).refunded, refunded, 'saying whether this call\'s refund gave them back (the metrics count them)');
  }
  const failed = thrown(() => settledOrThrow({ kind: 'settlement_failed', cause }));
  t.same([failed.code, failed.status, failed.message, failed.cause], ['settlement_failed', 500, ERRORS.settlement_failed.message, cause]);
  for (const refund of ['refunded', 'refund_deferred'] as const) {
    const e = thrown(() => settledOrThrow({ kind: 'not_recorded', refund, cause }));
    t.type(e, UnrecordedCallError);
    t.same([e.code, e.status, (e as UnrecordedCallError).outcome, e.cause], ['store_unavailable', 503, refund, cause], refund);
  }
});
