import { generateToken, hashToken } from '../auth/index.ts';
import { isoNow, now } from '../clock.ts';
import { type UsageRecord, newId, type CallerReads, type DeviceSessions, type TokenAdmin, type UsageReads, type Grant, type TokenRecord, withGrant, withoutGrant } from '../store/index.ts';
import type { ModuleId } from '../contract/index.ts';
import { encodeCursor, type ListQuery } from './page-query.ts';

export { DuplicateTokenNameError } from '../store/index.ts';

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
  store: TokenAdmin,
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
  await store.insertToken(record);
  return { token: tokenView(record), plaintext };
}

export async function listTokenViews(store: TokenAdmin): Promise<TokenView[]> {
  return (await store.listTokens()).map(tokenView);
}

/** A page of tokens in name order (case ignored), `q` matching name, prefix or id, `name`
 * the name itself. */
export async function searchTokenViews(store: TokenAdmin & Pick<UsageReads, 'usageSnapshot'>, q: ListQuery): Promise<{ tokens: (TokenView & { usage: UsageRecord[] })[]; next_cursor: string | null }> {
  const page = await store.searchTokens(q);
  // usage against limit in the list: one snapshot per token of the page (at most MAX_PAGE)
  const at = now();
  const tokens = [];
  for (const t of page.items) tokens.push({ ...tokenView(t), usage: await store.usageSnapshot(t, at) });
  return { tokens, next_cursor: page.next && encodeCursor(page.next) };
}

/** Adds each row's token name (null when the row has no token or the token is gone), so
 * operators read names, not ids. One read per distinct token of the page. */
export async function withTokenNames<T extends { token_id: string | null }>(store: Pick<CallerReads, 'getToken'>, items: readonly T[]): Promise<(T & { token_name: string | null })[]> {
  const names = new Map<string, string | null>();
  for (const { token_id: id } of items) {
    if (id !== null && !names.has(id)) names.set(id, (await store.getToken(id))?.name ?? null);
  }
  return items.map((item) => ({ ...item, token_name: item.token_id === null ? null : names.get(item.token_id)! }));
}

export async function tokenDetail(store: Pick<CallerReads, 'getToken'> & Pick<UsageReads, 'usageSnapshot'>, id: string): Promise<(TokenView & { usage: UsageRecord[] }) | undefined> {
  const t = await store.getToken(id);
  return t && { ...tokenView(t), usage: await store.usageSnapshot(t, now()) };
}

/** Re-enabling a revoked token: refused, so no record ever reads enabled and revoked. A domain
 * refusal, not an HTTP error: the admin API answers it 409 `conflict`, the CLI exits EXIT.conflict. */
export class RevokedTokenError extends Error {}

/** Disabled, or expired at `at`: the token authorises nothing, and its sessions are dead. */
const deadAt = (t: TokenRecord, at: number) => !t.enabled || (t.expires_at !== null && Date.parse(t.expires_at) <= at);

/** Revokes the token's active device sessions minted at or before `at` (all of them but one a
 * concurrent mint made after the change): a page of the newest at a time until none is left. */
async function endDeviceSessions(store: DeviceSessions, tokenId: string, at: number): Promise<number> {
  let ended = 0;
  for (;;) {
    const page = (await store.listActiveDeviceSessions(tokenId, at)).filter((s) => Date.parse(s.created_at) <= at);
    if (page.length === 0) return ended;
    for (const s of page) await store.revokeDeviceSession(s.id, at);
    ended += page.length;
  }
}

export async function patchToken(
  store: TokenAdmin & DeviceSessions,
  id: string,
  patch: { name?: string; enabled?: boolean; expires_at?: string | null; demo?: boolean },
): Promise<TokenView | undefined> {
  const at = now();
  let before: TokenRecord | undefined;
  const t = await store.updateToken(id, (t) => {
    if (t.revoked && patch.enabled === true) throw new RevokedTokenError(`token ${id} is revoked for good and cannot be enabled`);
    before = t;
    return {
      ...t,
      ...(patch.name !== undefined ? { name: patch.name } : {}),
      ...(patch.enabled !== undefined ? { enabled: patch.enabled } : {}),
      ...(patch.demo !== undefined ? { demo: patch.demo } : {}),
      ...(patch.expires_at !== undefined ? { expires_at: patch.expires_at === null ? null : new Date(patch.expires_at).toISOString() } : {}),
    };
  });
  // Disabling (or expiring) a token ends its device sessions for good, as docs/sessions.md
  // says: they were only refused while it was off, and enabling it again brought them back
  // (issue 40), devices included that the operator meant to cut off. Ended after the change
  // commits, so no session is minted in between; and again when the token comes back, for a
  // mint that read the token just before it went off and committed after the first sweep.
  if (t && before && (deadAt(t, at) || deadAt(before, at))) await endDeviceSessions(store, t.id, at);
  return t && tokenView(t);
}

/** Revocation is final: the token is disabled with it, and patchToken refuses to enable it. */
export async function revokeToken(store: TokenAdmin & DeviceSessions, id: string): Promise<TokenView | undefined> {
  const at = now();
  const t = await store.updateToken(id, (t) => ({ ...t, revoked: true, enabled: false }));
  // dead for good with their token already; revoked too, so they read as they are
  if (t) await endDeviceSessions(store, t.id, at);
  return t && tokenView(t);
}

/** Usage counters are keyed by token, module and window, not by grant, so changing or
 * removing and re-adding a grant keeps the period's usage (spec rule 3). */
export async function setGrant(store: TokenAdmin, id: string, grant: Grant): Promise<Grant | undefined> {
  const t = await store.updateToken(id, (t) => withGrant(t, grant));
  return t && t.grants.find((g) => g.module_id === grant.module_id);
}

export async function removeGrant(store: TokenAdmin, id: string, moduleId: ModuleId): Promise<boolean | undefined> {
  let had = false;
  const t = await store.updateToken(id, (t) => {
    had = t.grants.some((g) => g.module_id === moduleId);
    return withoutGrant(t, moduleId);
  });
  return t && had;
}
