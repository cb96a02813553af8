import { messageOf, ServiceError } from './codes.ts';
import { retryAfter } from './retry-after.ts';

/** The answer to a store that does not answer (the store's StoreUnavailableError: PostgreSQL
 * refused, reset, timed out): the spec's "wait and retry with the same package and key",
 * 503 server_busy with Retry-After (`retryAfterSeconds`: RETRY_AFTER_SECONDS). The store throws
 * its own error, never an HTTP one; the two places that render answers (src/http respond.ts,
 * src/verify outcomes.ts) call this. `cause` keeps the database's message for the log. */
export function storeNotAnswering(cause: unknown, retryAfterSeconds: number): ServiceError {
  return new ServiceError('server_busy', messageOf('server_busy', 'store_not_answering'), retryAfter(retryAfterSeconds), cause);
}
