import t from 'tap';
import { HashGate } from '../../src/auth/hash-gate.ts';
import { ERRORS, messageOf, ServiceError, storeNotAnswering } from '../../src/errors/index.ts';
import { UnrecordedCallError } from '../../src/verify/store-outcomes.ts';

// The messages that one code answers in several cases live in the error catalogue
// (src/errors/codes.ts, `variants`); their throw sites name the case. These are the texts
// clients got before the messages moved there (issue 43), word for word: a change of any is a
// change of the answers, to be made on purpose.

t.test('each variant answers its text as before', async (t) => {
  t.same(ERRORS.server_busy.variants, {
    host: 'No capacity slot available; retry after the indicated delay',
    address: 'Too many concurrent verify calls from this client address; retry after the indicated delay',
    token: 'Too many concurrent verify calls with this token; retry after the indicated delay',
    revoked: 'The verify slot went to a caller that held fewer: this token or client address holds more than its share of the host; retry after the indicated delay',
    connections: 'Too many connections with a request in progress from this address; retry after the indicated delay',
    password_checks: 'Too many password checks in progress; retry after the indicated delay',
    store_not_answering: 'The store is not answering; retry after the indicated delay',
  });
  t.equal(ERRORS.server_busy.message, ERRORS.server_busy.variants.host, 'a plain server_busy is the host\'s');
  t.equal(messageOf('module_unavailable', 'models_loading'), 'The module\'s models are not loaded yet');
  t.equal(messageOf('module_not_found', 'named', 'face_liveness'), 'Unknown module "face_liveness"');
  t.equal(messageOf('module_not_found', 'named', `x"${'y'.repeat(100)}`), `Unknown module ${JSON.stringify(`x"${'y'.repeat(62)}`)}`, 'quoted, cut to 64 characters');
  t.equal(messageOf('session_not_allowed', 'other_module', 'rgb_liveness'), 'This session verifies with rgb_liveness only');
  t.same(ERRORS.store_unavailable.variants, {
    nothing_written: 'The service cannot record calls right now (its store is failing writes): nothing was charged and the Idempotency-Key is not bound; retry with the same key after the indicated delay',
    refunded: 'The store could not record this call\'s result: its units were given back and the Idempotency-Key released, so nothing was charged; retry with the same key after the indicated delay',
    refund_deferred: 'The store could not record this call\'s result: nothing is charged; the units held for it are given back as soon as the store can write again (until then a retry with this Idempotency-Key may answer request_in_progress); retry with the same key after the indicated delay',
    not_answering: 'The service\'s database is not answering (restarting or failing over): this call was not charged; retry with the same Idempotency-Key after the indicated delay (until the service has given back what the call held, a retry may answer request_in_progress)',
    settlement_pending: 'The database stopped answering while this call\'s charge was being recorded: the service completes it exactly once as soon as the database answers again; retry with the same Idempotency-Key after the indicated delay to get this call\'s answer (request_in_progress until then)',
    settlement_unknown: 'The database stopped answering while this call\'s charge was being recorded, and without an Idempotency-Key its answer cannot be kept: it is charged only if the charge had committed, else its units are given back; send an Idempotency-Key so a retry can get the answer',
  });
  t.equal(ERRORS.store_unavailable.message, ERRORS.store_unavailable.variants.nothing_written, 'a plain store_unavailable: nothing written');
  const unrecorded = new UnrecordedCallError('settlement_pending', new Error('reset'));
  t.same([unrecorded.code, unrecorded.status, unrecorded.message], ['store_unavailable', 503, ERRORS.store_unavailable.variants.settlement_pending]);
});

t.test('a store that does not answer, a full password queue: Retry-After is the configured delay', async (t) => {
  const cause = new Error('connection refused');
  const busy = storeNotAnswering(cause, 9);
  t.same([busy.code, busy.status, busy.message, busy.headers, busy.cause], ['server_busy', 503, ERRORS.server_busy.variants.store_not_answering, { 'Retry-After': '9' }, cause]);

  const gate = new HashGate(1, 0);
  gate.retryAfterSeconds = 5;
  let finish!: () => void;
  const running = gate.run(() => new Promise<void>((resolve) => (finish = resolve)));
  const refused = await gate.run(() => Promise.resolve()).then(() => null, (err: unknown) => err);
  t.ok(refused instanceof ServiceError, 'the queue is full');
  t.same([(refused as ServiceError).code, (refused as ServiceError).message, (refused as ServiceError).headers], ['server_busy', ERRORS.server_busy.variants.password_checks, { 'Retry-After': '5' }]);
  finish();
  await running;
});
