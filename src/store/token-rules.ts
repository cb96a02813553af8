import type { ModuleId } from '../contract/index.ts';
import type { Grant, TokenRecord } from './records.ts';

// Rules on token records that both stores apply the same way.

/** A token authenticates only while enabled, not revoked and not past its expiry. */
export function isTokenLive(token: TokenRecord, at: number): boolean {
  return token.enabled && !token.revoked && (token.expires_at === null || Date.parse(token.expires_at) > at);
}

/** Names are unique ignoring case and Unicode composition ("Kiosk-1" and "kiosk-1" name the
 * same token for an operator reading a list). */
export function tokenNameKey(name: string): string {
  return name.normalize('NFC').toLowerCase();
}

export function withGrant(token: TokenRecord, grant: Grant): TokenRecord {
  const grants = token.grants.filter((g) => g.module_id !== grant.module_id);
  grants.push(grant);
  grants.sort((a, b) => a.module_id.localeCompare(b.module_id));
  return { ...token, grants };
}

export function withoutGrant(token: TokenRecord, moduleId: ModuleId): TokenRecord {
  return { ...token, grants: token.grants.filter((g) => g.module_id !== moduleId) };
}
