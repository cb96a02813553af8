import { hashPassword } from '../auth/index.ts';
import { isoNow } from '../clock.ts';
import { type UserAccounts, newId, type Role, type UserRecord, DuplicateUserError } from '../store/index.ts';
import { encodeCursor, type ListQuery } from './page-query.ts';

export type UserView = Omit<UserRecord, 'password_hash'>;

export function userView(u: UserRecord): UserView {
  const { password_hash: _h, ...view } = u;
  return view;
}

/** Creates a user unless the name is taken (DuplicateUserError; checked atomically with
 * the insert by the store). */
export async function addUser(store: UserAccounts, input: { username: string; password: string; role: Role }): Promise<UserView> {
  const user: UserRecord = { id: newId('usr'), username: input.username, role: input.role, enabled: true, password_hash: await hashPassword(input.password), created_at: isoNow() };
  if (!(await store.createUser(user))) throw new DuplicateUserError(`user ${user.username} exists`);
  return userView(user);
}

export async function listUserViews(store: UserAccounts): Promise<UserView[]> {
  return (await store.listUsers()).map(userView);
}

/** A page of users in username order, `q` matching the username or the id. */
export async function searchUserViews(store: UserAccounts, q: ListQuery): Promise<{ users: UserView[]; next_cursor: string | null }> {
  const page = await store.searchUsers(q);
  return { users: page.items.map(userView), next_cursor: page.next && encodeCursor(page.next) };
}

/** A domain refusal, not an HTTP error: the admin API answers it 409 `conflict` with its message. */
export class LastAdminError extends Error {}

const isActiveAdmin = (u: UserRecord) => u.role === 'admin' && u.enabled;

/** Refuses (LastAdminError) a change that would leave no enabled admin: nobody could log in
 * to undo it. Checked inside the write, so two concurrent demotions cannot both pass. */
/** `guard`: checked in the store's transaction against the record as it is there (not as a
 * caller read it before a slow step); it throws to refuse the change. */
export async function patchUser(
  store: UserAccounts,
  id: string,
  patch: { enabled?: boolean; password?: string; role?: Role },
  guard?: (before: UserRecord, after: UserRecord) => void,
): Promise<UserView | undefined> {
  const u = await store.updateUser(
    id,
    {
      ...(patch.enabled !== undefined ? { enabled: patch.enabled } : {}),
      ...(patch.role !== undefined ? { role: patch.role } : {}),
      ...(patch.password !== undefined ? { password_hash: await hashPassword(patch.password) } : {}),
    },
    (before, after, others) => {
      guard?.(before, after);
      if (isActiveAdmin(before) && !isActiveAdmin(after) && !others.some(isActiveAdmin)) {
        throw new LastAdminError('At least one enabled admin must remain');
      }
    },
  );
  return u && userView(u);
}
