// A store that does not answer (PostgreSQL refused or reset the connection) throws the store's
// own StoreUnavailableError, never an HTTP error (src/store/errors.ts). The use case renders it
// as the spec's "wait and retry": 503 server_busy with Retry-After, at every step that reaches
// the store, with the database's message kept for the log and out of the answer.

import t from 'tap';
import { StoreUnavailableError } from '../../src/store/index.ts';
import { request, single } from '../helpers/captures.ts';
import { addToken, bodyCode, call, codeOf, world } from './fakes.ts';

const down = () => new StoreUnavailableError('store unavailable: connect ECONNREFUSED 10.0.0.5:5432', Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }));
const body = () => request([single({ id: 'down-1' })]);

const steps = [
  { step: 'accept', break: (w: ReturnType<typeof world>) => { w.deps.tokens = async () => { throw down(); }; } },
  { step: 'reserve', break: (w: ReturnType<typeof world>) => { w.deps.metering.reserve = async () => { throw down(); }; } },
  { step: 'settle', break: (w: ReturnType<typeof world>) => { w.deps.metering.settle = async () => { throw down(); }; } },
  { step: 'infer', break: (w: ReturnType<typeof world>) => { w.inference.fault = 'inference_failed'; w.deps.metering.refund = async () => { throw down(); }; } },
] as const;

for (const s of steps) {
  t.test(`the store not answering at ${s.step}: 503 server_busy with Retry-After, the cause logged, not shown`, async (t) => {
    const w = world();
    const { plaintext } = addToken(w);
    s.break(w);
    const answer = await call(w, plaintext, body(), { idempotencyKey: 'k-down', requestId: `req-${s.step}` });
    t.equal(answer.status, 503);
    t.equal(codeOf(answer, s.step), 'server_busy');
    t.equal(bodyCode(answer), 'server_busy');
    t.equal(answer.headers?.['Retry-After'], '1', 'retry after a second');
    t.notMatch(answer.body as string, /ECONNREFUSED|10\.0\.0\.5/, 'the database\'s address stays in the log');
    t.match(w.logs, [{ obj: { request_id: `req-${s.step}`, err: { message: /ECONNREFUSED/ } } }], 'the operator hears of it');
  });
}
