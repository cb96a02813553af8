import { generateToken, hashToken } from '../auth/business-token.ts';
import { isoNow, now } from '../clock.ts';
import { usageSnapshot, type UsageRecord } from '../metering/usage.ts';
import type { ModuleId } from '../packets/types.ts';
import { newId } from '../store/ids.ts';
import type { Store } from '../store/open.ts';
import type { Grant, TokenRecord } from '../store/records.ts';
import { getToken, insertToken, listTokens, updateToken, withGrant, withoutGrant } from '../store/tokens.ts';
import { searchTokens } from '../store/token-search.ts';
import { encodeCursor, type ListQuery } from './page-query.ts';

export { DuplicateTokenNameError } from '../store/token-names.ts';

// Token administration shared by the admin API and the CLI, so both behave the same.

/** A token as operators see it: never the hash, never the plaintext. */
export type TokenView = Omit<TokenRecord, 'hash'>;

export function tokenView(t: TokenRecord): TokenView {
  const { hash: _hash, ...view } = t;
  return view;
}

/** Index of the first grant naming a module already granted earlier in the list, or -1;
 * the admin API and the CLI both refuse such a list instead of keeping the last one. */
export function duplicateGrantIndex(grants: readonly Grant[]): number {
  const seen = new Set<string>();
  for (let i = 0; i < grants.length; i++) {
    if (seen.has(grants[i]!.module_id)) return i;
    seen.add(grants[i]!.module_id);
  }
  return -1;
}

export async function createToken(
  store: Store,
  input: { name: string; expires_at?: string | null; demo?: boolean; grants: Grant[] },
): Promise<{ token: TokenView; plaintext: string }> {
  const plaintext = generateToken();
  let record: TokenRecord = {
    id: newId('tok'),
    name: input.name,
    token_prefix: plaintext.slice(0, 12),
    hash: hashToken(plaintext),
    enabled: true,
    expires_at: input.expires_at ? new Date(input.expires_at).toISOString() : null,
    demo: input.demo ?? false,
    revoked: false,
    created_at: isoNow(),
    grants: [],
  };
  for (const g of input.grants) record = withGrant(record, g);
  await insertToken(store, record);
  return { token: tokenView(record), plaintext };
}

export function listTokenViews(store: Store): TokenView[] {
  return listTokens(store).map(tokenView);
}

/** A page of tokens in name order (case ignored), `q` matching name, prefix or id. */
export async function searchTokenViews(store: Store, q: ListQuery): Promise<{ tokens: TokenView[]; next_cursor: string | null }> {
  const page = await searchTokens(store, q);
  return { tokens: page.items.map(tokenView), next_cursor: page.next && encodeCursor(page.next) };
}

/** Adds each row's token name (null when the row has no token or the token is gone), so
 * operators read names, not ids. One read per distinct token of the page. */
export function withTokenNames<T extends { token_id: string | null }>(store: Store, items: readonly T[]): (T & { token_name: string | null })[] {
  const names = new Map<string, string | null>();
  return items.map((item) => {
    const id = item.token_id;
    if (id !== null && !names.has(id)) names.set(id, getToken(store, id)?.name ?? null);
    return { ...item, token_name: id === null ? null : names.get(id)! };
  });
}

export function tokenDetail(store: Store, id: string): (TokenView & { usage: UsageRecord[] }) | undefined {
  const t = getToken(store, id);
  return t && { ...tokenView(t), usage: usageSnapshot(store, t, now()) };
}

/** Re-enabling a revoked token: refused, so no record ever reads enabled and revoked. */
export class RevokedTokenError extends Error {}

export async function patchToken(
  store: Store,
  id: string,
  patch: { name?: string; enabled?: boolean; expires_at?: string | null; demo?: boolean },
): Promise<TokenView | undefined> {
  const t = await updateToken(store, id, (t) => {
    if (t.revoked && patch.enabled === true) throw new RevokedTokenError(`token ${id} is revoked for good and cannot be enabled`);
    return {
      ...t,
      ...(patch.name !== undefined ? { name: patch.name } : {}),
      ...(patch.enabled !== undefined ? { enabled: patch.enabled } : {}),
      ...(patch.demo !== undefined ? { demo: patch.demo } : {}),
      ...(patch.expires_at !== undefined ? { expires_at: patch.expires_at === null ? null : new Date(patch.expires_at).toISOString() } : {}),
    };
  });
  return t && tokenView(t);
}

/** Revocation is final: the token is disabled with it, and patchToken refuses to enable it. */
export async function revokeToken(store: Store, id: string): Promise<TokenView | undefined> {
  const t = await updateToken(store, id, (t) => ({ ...t, revoked: true, enabled: false }));
  return t && tokenView(t);
}

/** Usage counters are keyed by token, module and window, not by grant, so changing or
 * removing and re-adding a grant keeps the period's usage (spec rule 3). */
export async function setGrant(store: Store, id: string, grant: Grant): Promise<Grant | undefined> {
  const t = await updateToken(store, id, (t) => withGrant(t, grant));
  return t && t.grants.find((g) => g.module_id === grant.module_id);
}

export async function removeGrant(store: Store, id: string, moduleId: ModuleId): Promise<boolean | undefined> {
  let had = false;
  const t = await updateToken(store, id, (t) => {
    had = t.grants.some((g) => g.module_id === moduleId);
    return withoutGrant(t, moduleId);
  });
  return t && had;
}
