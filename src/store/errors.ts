// The store's own failures, shared by both implementations. None is an HTTP answer: the
// layers above decide what a caller hears (a 409, a CLI exit code, a start-up refusal).

/** The store could not be opened (a schema this build does not read, a database that refuses). */
export class StoreError extends Error {}

/** The database does not answer (refused, reset, timed out, shutting down): a retry may
 * succeed, and nothing the failed call began was charged (what may have committed before the
 * connection broke is repaired, see the PostgreSQL store's repairs). Only the PostgreSQL store
 * meets it, on any operation of any route; the layers above answer it the same way everywhere
 * (src/errors storeNotAnswering: 503 server_busy with Retry-After; the CLI's exit code 5). */
export class StoreUnavailableError extends Error {
  constructor(message: string, cause: unknown) {
    super(message, { cause });
    this.name = 'StoreUnavailableError';
  }
}

/** A user name that is taken: the name is checked atomically with the insert. */
export class DuplicateUserError extends Error {}

/** A new name (create or rename) that another token already has. */
export class DuplicateTokenNameError extends Error {
  constructor(readonly tokenName: string) {
    super(`A token named ${JSON.stringify(tokenName)} exists (names are unique, ignoring case)`);
  }
}
