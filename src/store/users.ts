import { atomically } from './atomic.ts';
import { readLatest, type Store } from './open.ts';
import type { Role, UserRecord } from './records.ts';
import { newId } from './ids.ts';

export class DuplicateUserError extends Error {}

export function getUser(store: Store, id: string): UserRecord | undefined {
  readLatest(store);
  return store.db.users.get(id);
}

export function getUserByName(store: Store, username: string): UserRecord | undefined {
  readLatest(store);
  const id = store.db.usersByName.get(username);
  return id === undefined ? undefined : store.db.users.get(id);
}

export function listUsers(store: Store): UserRecord[] {
  readLatest(store);
  return [...store.db.users.getRange({})].map((e) => e.value as UserRecord).sort((a, b) => a.created_at.localeCompare(b.created_at));
}

/** Creates a user unless the name is taken (checked inside the write transaction). */
export async function createUser(
  store: Store,
  fields: { username: string; role: Role; password_hash: string; enabled?: boolean; created_at: string },
): Promise<UserRecord> {
  const user: UserRecord = { id: newId('usr'), enabled: true, ...fields };
  const ok = await atomically(store, () => {
    if (store.db.usersByName.get(user.username) !== undefined) return false;
    store.db.usersByName.put(user.username, user.id);
    store.db.users.put(user.id, user);
    return true;
  });
  if (!ok) throw new DuplicateUserError(`user ${user.username} exists`);
  return user;
}

/** `check` runs inside the write transaction with the user before and after the change; a
 * throw from it aborts the change (rules over all users, such as "an admin remains", must
 * see the same state the write commits against). */
export async function updateUser(
  store: Store,
  id: string,
  patch: Partial<Pick<UserRecord, 'enabled' | 'role' | 'password_hash'>>,
  check?: (before: UserRecord, after: UserRecord) => void,
): Promise<UserRecord | undefined> {
  return atomically(store, () => {
    const user = store.db.users.get(id) as UserRecord | undefined;
    if (!user) return undefined;
    const next = { ...user, ...patch };
    check?.(user, next);
    store.db.users.put(id, next);
    return next;
  });
}
