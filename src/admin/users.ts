import { hashPassword } from '../auth/password.ts';
import { isoNow } from '../clock.ts';
import type { Store } from '../store/open.ts';
import type { Role, UserRecord } from '../store/records.ts';
import { createUser, listUsers, updateUser } from '../store/users.ts';
import { searchUsers } from '../store/token-search.ts';
import { encodeCursor, type ListQuery } from './page-query.ts';

export type UserView = Omit<UserRecord, 'password_hash'>;

export function userView(u: UserRecord): UserView {
  const { password_hash: _h, ...view } = u;
  return view;
}

export async function addUser(store: Store, input: { username: string; password: string; role: Role }): Promise<UserView> {
  return userView(await createUser(store, { username: input.username, role: input.role, password_hash: await hashPassword(input.password), created_at: isoNow() }));
}

export function listUserViews(store: Store): UserView[] {
  return listUsers(store).map(userView);
}

/** A page of users in username order, `q` matching the username or the id. */
export function searchUserViews(store: Store, q: ListQuery): { users: UserView[]; next_cursor: string | null } {
  const page = searchUsers(store, q);
  return { users: page.items.map(userView), next_cursor: page.next && encodeCursor(page.next) };
}

export class LastAdminError extends Error {}

const isActiveAdmin = (u: UserRecord) => u.role === 'admin' && u.enabled;

/** Refuses (LastAdminError) a change that would leave no enabled admin: nobody could log in
 * to undo it. Checked inside the write, so two concurrent demotions cannot both pass. */
export async function patchUser(store: Store, id: string, patch: { enabled?: boolean; password?: string; role?: Role }): Promise<UserView | undefined> {
  const u = await updateUser(
    store,
    id,
    {
      ...(patch.enabled !== undefined ? { enabled: patch.enabled } : {}),
      ...(patch.role !== undefined ? { role: patch.role } : {}),
      ...(patch.password !== undefined ? { password_hash: await hashPassword(patch.password) } : {}),
    },
    (before, after) => {
      if (isActiveAdmin(before) && !isActiveAdmin(after) && !listUsers(store).some((x) => x.id !== before.id && isActiveAdmin(x))) {
        throw new LastAdminError('At least one enabled admin must remain');
      }
    },
  );
  return u && userView(u);
}
