import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

// One CSRF token per session (synchroniser token): the console reads it from /auth/login or
// /auth/session and sends it as X-CSRF-Token. SameSite=Strict already stops most cross-site
// posts; the token also covers same-site attackers and browsers without SameSite.
export function newCsrfToken(): string {
  return randomBytes(32).toString('base64url');
}

/** Constant-time comparison; digests first so that inputs of different lengths compare in the
 * same time as equal-length ones. */
export function csrfMatches(expected: string, got: string | undefined): boolean {
  if (got === undefined || got.length === 0) return false;
  const a = createHash('sha256').update(expected).digest();
  const b = createHash('sha256').update(got).digest();
  return timingSafeEqual(a, b);
}
