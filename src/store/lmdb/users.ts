import { atomically } from './atomic.ts';
import { readLatest, type Store } from './open.ts';
import type { UserRecord } from '../records.ts';

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
  return [...store.db.users.getRange({})].map((e) => e.value).sort((a, b) => a.created_at.localeCompare(b.created_at));
}

/** Inserts a user unless the name is taken (checked inside the write transaction). */
export async function insertUser(store: Store, user: UserRecord): Promise<boolean> {
  return atomically(store, () => {
    if (store.db.usersByName.get(user.username) !== undefined) return false;
    void store.db.usersByName.put(user.username, user.id);
    void store.db.users.put(user.id, user);
    return true;
  });
}

/** `check` runs inside the write transaction with the user before and after the change and
 * every other user; a throw from it aborts the change (rules over all users, such as "an
 * admin remains", must see the same state the write commits against). */
export async function updateUser(
  store: Store,
  id: string,
  patch: Partial<Pick<UserRecord, 'enabled' | 'role' | 'password_hash'>>,
  check?: (before: UserRecord, after: UserRecord, others: UserRecord[]) => void,
): Promise<UserRecord | undefined> {
  return atomically(store, () => {
    const user = store.db.users.get(id);
    if (!user) return undefined;
    const next = { ...user, ...patch };
    if (check) check(user, next, [...store.db.users.getRange({})].map((e) => e.value).filter((u) => u.id !== id));
    void store.db.users.put(id, next);
    return next;
  });
}
