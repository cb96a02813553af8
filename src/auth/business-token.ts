import { createHash, randomBytes } from 'node:crypto';
import { ServiceError } from '../errors/index.ts';
import { type CallerReads, type TokenRecord, isTokenLive } from '../store/index.ts';

// lvk_ + base64url of 32 random bytes: 256 bits, 47 characters, recognisable in logs and
// secret scanners. Only the SHA-256 is stored; a slow hash buys nothing at this entropy.
export const TOKEN_PREFIX = 'lvk_';
const TOKEN_RE = /^lvk_[A-Za-z0-9_-]{43}$/;

export function generateToken(): string {
  return TOKEN_PREFIX + randomBytes(32).toString('base64url');
}

export function hashToken(plaintext: string): string {
  return createHash('sha256').update(plaintext).digest('hex');
}

export function isTokenShaped(value: string): boolean {
  return TOKEN_RE.test(value);
}

/** Resolves `Authorization: Bearer <token>` to a live token record or throws 401. The
 * lookup is by hash, so its timing does not depend on how much of a guess matched.
 * `lookup`: the verify path may read through a short cache (token-cache.ts). */
export async function authenticateBearer(
  store: Pick<CallerReads, 'getTokenByHash'>,
  authorization: string | undefined,
  at: number,
  lookup: (hash: string) => Promise<TokenRecord | undefined> = (hash) => store.getTokenByHash(hash),
): Promise<TokenRecord> {
  const m = authorization === undefined ? null : /^Bearer ([^\s]+)$/i.exec(authorization.trim());
  if (!m || !isTokenShaped(m[1]!)) throw new ServiceError('invalid_token');
  const hash = hashToken(m[1]!);
  const token = await lookup(hash);
  if (!token || !isTokenLive(token, at)) throw new ServiceError('invalid_token');
  return token;
}
