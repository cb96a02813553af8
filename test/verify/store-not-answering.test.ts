// A store that does not answer (PostgreSQL refused or reset the connection) throws the store's
// own StoreUnavailableError, never an HTTP error (src/store/errors.ts). The use case renders it
// as the spec's "wait and retry": 503 store_unavailable with Retry-After (issue 44: a client and
// an operator can tell a database away from a full service), at every step that reaches the
// store, with the database's message kept for the log and out of the answer.

import t from 'tap';
import { StoreUnavailableError } from '../../src/store/index.ts';
import { request, single } from '../helpers/captures.ts';
import { addToken, bodyCode, call, codeOf, lmdbStore, RETRY_AFTER_SECONDS, world } from './world.ts';

// the outage is this file's: each step's store call is replaced by one that throws what a
// PostgreSQL away makes the store throw; the rest is a real (LMDB) store
const { store } = lmdbStore(t);

const down = () => new StoreUnavailableError('store unavailable: connect ECONNREFUSED 10.0.0.5:5432', Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }));
const body = () => request([single({ id: 'down-1' })]);

const steps = [
  { step: 'accept', break: (w: ReturnType<typeof world>) => { w.deps.tokens = async () => { throw down(); }; } },
  { step: 'reserve', break: (w: ReturnType<typeof world>) => { w.deps.metering.reserve = async () => { throw down(); }; } },
  { step: 'settle', break: (w: ReturnType<typeof world>) => { w.deps.metering.settle = async () => { throw down(); }; } },
  { step: 'infer', break: (w: ReturnType<typeof world>) => { w.inference.fault = 'inference_failed'; w.deps.metering.refund = async () => { throw down(); }; } },
] as const;

for (const step of steps) {
  t.test(`the store not answering at ${step.step}: 503 store_unavailable with Retry-After, the cause logged, not shown`, async (t) => {
    const w = world(store);
    const { plaintext } = await addToken(w);
    step.break(w);
    const answer = await call(w, plaintext, body(), { idempotencyKey: 'k-down', requestId: `req-${step.step}` });
    t.equal(answer.status, 503);
    t.equal(codeOf(answer, step.step), 'store_unavailable');
    t.equal(bodyCode(answer), 'store_unavailable');
    t.equal(answer.headers?.['Retry-After'], String(RETRY_AFTER_SECONDS), 'retry after the configured delay');
    t.notMatch(answer.body as string, /ECONNREFUSED|10\.0\.0\.5/, 'the database\'s address stays in the log');
    t.match(w.logs, [{ obj: { request_id: `req-${step.step}`, err: { cause: { message: /ECONNREFUSED/ } } } }], 'the operator hears of it: the database\'s message is the cause of the error logged');
  });
}
