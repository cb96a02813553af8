import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';
import type { Config } from '../config/index.ts';
import { HashGate } from './hash-gate.ts';

// scrypt N=2^17, r=8, p=1: OWASP's recommended minimum for scrypt (~4x the cost of the
// earlier N=2^15). The parameters are stored with each hash, so older hashes still verify
// and are rewritten with these at their next successful login (needsRehash).
// Testing only, never set in production (docs/configuration.md): TEST_PASSWORD_SCRYPT_N, a power
// of two from 2^10 to 2^17, lowers N for a test server that hashes hundreds of generated
// passwords (test/openapi/property.test.ts: each hash is ~0.5 s of a core at 2^17). The code
// path is the same, only cheaper; unset (or any other value), N is 2^17.
const TEST_N = Number(process.env.TEST_PASSWORD_SCRYPT_N ?? '');
const N = Number.isInteger(TEST_N) && TEST_N >= 1 << 10 && TEST_N <= 1 << 17 && (TEST_N & (TEST_N - 1)) === 0 ? TEST_N : 1 << 17;
export const PARAMS = { N, r: 8, p: 1, keylen: 32 };
type Params = typeof PARAMS;

// One gate per API worker thread (module state): see hash-gate.ts.
const gate = new HashGate();

/** This thread's password checks answer a full queue with the configured Retry-After (called
 * once by the API worker as it starts). */
export function configurePasswordChecks(config: Pick<Config, 'RETRY_AFTER_SECONDS'>): void {
  gate.retryAfterSeconds = config.RETRY_AFTER_SECONDS;
}

function derive(password: string, salt: Buffer, p: Params, first = false, network?: string): Promise<Buffer> {
  // scrypt needs 128 * N * r bytes (128 MiB at N=2^17, above Node's 32 MiB default maxmem);
  // twice that leaves room for its small extra allocations
  const opts: ScryptOptions = { N: p.N, r: p.r, p: p.p, maxmem: 128 * p.N * p.r * 2 };
  return gate.run(() => new Promise((resolve, reject) => scrypt(password, salt, p.keylen, opts, (e, key) => (e ? reject(e) : resolve(key)))), first, network);
}

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await derive(password, salt, PARAMS);
  return `scrypt$${PARAMS.N}$${PARAMS.r}$${PARAMS.p}$${salt.toString('base64')}$${key.toString('base64')}`;
}

// A fixed hash verified for unknown users, so that "no such user" costs the same time as
// "wrong password" (contract: same answer, same time).
const DUMMY = `scrypt$${PARAMS.N}$${PARAMS.r}$${PARAMS.p}$${Buffer.alloc(16).toString('base64')}$${Buffer.alloc(PARAMS.keylen).toString('base64')}`;

/** `first`: hashed before ordinary waiters (a login from an address the name is known at,
 * see hash-gate.ts); `network`: the client network, which holds at most one ordinary place. */
export async function verifyPassword(password: string, stored: string | undefined, first = false, network?: string): Promise<boolean> {
  const parts = (stored ?? DUMMY).split('$');
  if (parts.length !== 6 || parts[0] !== 'scrypt') return false;
  const [, n, r, p, salt, key] = parts;
  const expected = Buffer.from(key!, 'base64');
  const got = await derive(password, Buffer.from(salt!, 'base64'), { N: Number(n), r: Number(r), p: Number(p), keylen: expected.length }, first, network);
  return timingSafeEqual(got, expected) && stored !== undefined;
}

/** A stored hash made with other (older) parameters than PARAMS: rehash it once the
 * password is known to be right. */
export function needsRehash(stored: string): boolean {
  const [kind, n, r, p, , key] = stored.split('$');
  return kind !== 'scrypt' || Number(n) !== PARAMS.N || Number(r) !== PARAMS.r || Number(p) !== PARAMS.p || Buffer.from(key ?? '', 'base64').length !== PARAMS.keylen;
}
