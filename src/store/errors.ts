// The store's own failures, shared by both implementations. None is an HTTP answer: the
// layers above decide what a caller hears (a 409, a CLI exit code, a start-up refusal).

/** The store could not be opened (a schema this build does not read, a database that refuses). */
export class StoreError extends Error {}

/** A user name that is taken: the name is checked atomically with the insert. */
export class DuplicateUserError extends Error {}

/** A new name (create or rename) that another token already has. */
export class DuplicateTokenNameError extends Error {
  constructor(readonly tokenName: string) {
    super(`A token named ${JSON.stringify(tokenName)} exists (names are unique, ignoring case)`);
  }
}
