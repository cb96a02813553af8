import { generateKeyPairSync, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { calculateJwkThumbprint, type JWK } from 'jose';
import { currentProcess, holderState, type KeyFile, type KeyRevocation, type ProcessIdentity } from '../store/index.ts';

// Verdict signing keys live in DATA_DIR/keys: one file per key (private JWK, mode 0600) and
// a `current` file naming the kid that signs. A rotated key stays published in the JWKS for
// RETIRED_PUBLISH_MS, so a backend that received a verdict just before a rotation can still
// check it, and is deleted after RETIRED_DELETE_MS.
export const RETIRED_PUBLISH_MS = 7 * 24 * 3600 * 1000;
export const RETIRED_DELETE_MS = 30 * 24 * 3600 * 1000;

// stored by the store (files with LMDB, a table with PostgreSQL); defined there
export type { KeyFile, KeyRevocation } from '../store/index.ts';

/** A kid is an RFC 7638 SHA-256 thumbprint: 43 base64url characters. Checked before a kid
 * from the command line names a file. */
export const KID_PATTERN = /^[A-Za-z0-9_-]{43}$/;

/** Not an HTTP error: only the operator's key commands (CLI, start-up) name a key by kid; the CLI
 * turns it into exit EXIT.not_found. */
export class UnknownSigningKeyError extends Error {}

export function keysDir(dataDir: string): string {
  return path.join(dataDir, 'keys');
}

const currentFile = (dataDir: string) => path.join(keysDir(dataDir), 'current');
const keyFile = (dataDir: string, kid: string) => path.join(keysDir(dataDir), `${kid}.json`);

/** Writes via a temporary name and rename, so a reader in another thread or process never
 * sees half a file. */
function writeAtomic(file: string, text: string): void {
  const tmp = `${file}.${randomBytes(6).toString('hex')}.tmp`;
  fs.writeFileSync(tmp, text, { mode: 0o600 });
  fs.renameSync(tmp, file);
}

/** A fresh Ed25519 key, not yet stored anywhere. */
export async function newKey(at: number): Promise<KeyFile> {
  // Encoded to JWK inside the key generation, never by exporting the KeyObject it returns:
  // Node 20's export() holds the key's mutex while it allocates, and a garbage collection at
  // that moment can finalize the finished generation job, whose destructor takes the same
  // mutex; the thread then waits on itself for ever (seen in gdb: ExportJWKEdKey ->
  // CollectGarbage -> ~KeyGenJob -> pthread_mutex_lock). At start-up that was a service that
  // hung before its first log line, about one start in a few hundred (issue 39);
  // `export` after generateKeyPairSync deadlocked within seconds in a loop, this never did.
  const { privateKey: jwk } = generateKeyPairSync('ed25519', { privateKeyEncoding: { format: 'jwk' }, publicKeyEncoding: { format: 'jwk' } }) as unknown as { privateKey: JWK };
  // RFC 7638 thumbprint: a kid any party can recompute from the public key alone.
  const kid = await calculateJwkThumbprint({ kty: jwk.kty!, crv: jwk.crv!, x: jwk.x! });
  return { kid, created_at: new Date(at).toISOString(), retired_at: null, jwk: { ...jwk, kid, alg: 'EdDSA', use: 'sig' } };
}

async function newKeyFile(dataDir: string, at: number): Promise<KeyFile> {
  const key = await newKey(at);
  fs.mkdirSync(keysDir(dataDir), { recursive: true, mode: 0o700 });
  writeAtomic(keyFile(dataDir, key.kid), JSON.stringify(key));
  return key;
}

export function readCurrentKid(dataDir: string): string | undefined {
  try {
    return fs.readFileSync(currentFile(dataDir), 'utf8').trim() || undefined;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
}

export function readKey(dataDir: string, kid: string): KeyFile {
  return JSON.parse(fs.readFileSync(keyFile(dataDir, kid), 'utf8')) as KeyFile;
}

/** The signing key, created on first use. Several API workers may start at once: each
 * candidate `current` is linked into place, which fails when one exists, so exactly one
 * key wins and the losers delete theirs. */
export async function ensureSigningKey(dataDir: string, at = Date.now()): Promise<KeyFile> {
  const kid = readCurrentKid(dataDir);
  if (kid) return readKey(dataDir, kid);
  const key = await newKeyFile(dataDir, at);
  const candidate = `${currentFile(dataDir)}.${key.kid}.tmp`;
  fs.writeFileSync(candidate, key.kid, { mode: 0o600 });
  try {
    fs.linkSync(candidate, currentFile(dataDir));
    return key;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    fs.rmSync(keyFile(dataDir, key.kid), { force: true });
    return readKey(dataDir, readCurrentKid(dataDir)!);
  } finally {
    fs.rmSync(candidate, { force: true });
  }
}

export function listKeys(dataDir: string): KeyFile[] {
  let names: string[];
  try {
    names = fs.readdirSync(keysDir(dataDir));
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw e;
  }
  const keys: KeyFile[] = [];
  for (const name of names) {
    if (!name.endsWith('.json')) continue;
    try {
      keys.push(JSON.parse(fs.readFileSync(path.join(keysDir(dataDir), name), 'utf8')) as KeyFile);
    } catch {
      // a file deleted by a concurrent prune between readdir and read
    }
  }
  return keys.sort((a, b) => a.created_at.localeCompare(b.created_at));
}

/** Public JWKs a backend may check against: the current key and keys retired recently. */
export function publicJwks(dataDir: string, at = Date.now()): { keys: JWK[] } {
  return publicJwksOf(listKeys(dataDir), at);
}

export function publicJwksOf(all: KeyFile[], at: number): { keys: JWK[] } {
  const keys = all.filter((k) => !k.revoked_at && (k.retired_at === null || Date.parse(k.retired_at) + RETIRED_PUBLISH_MS > at));
  return { keys: keys.map((k) => ({ kty: k.jwk.kty, crv: k.jwk.crv, x: k.jwk.x, kid: k.kid, alg: 'EdDSA', use: 'sig' })) };
}

/** New current key; the old one is marked retired (still published for a while), and keys
 * retired long ago are deleted. The new key file exists before `current` names it, so a
 * JWKS read never misses the kid a fresh signature carries. */
export function rotateSigningKey(dataDir: string, at = Date.now()): Promise<{ kid: string; retired: string | null; deleted: string[] }> {
  return withKeysLock(dataDir, () => rotateLocked(dataDir, at));
}

async function rotateLocked(dataDir: string, at: number): Promise<{ kid: string; retired: string | null; deleted: string[] }> {
  const old = await ensureSigningKey(dataDir, at);
  const key = await newKeyFile(dataDir, at);
  writeAtomic(currentFile(dataDir), key.kid);
  writeAtomic(keyFile(dataDir, old.kid), JSON.stringify({ ...old, retired_at: new Date(at).toISOString() }));
  const deleted: string[] = [];
  for (const k of listKeys(dataDir)) {
    // a revoked key's file is the record of its revocation (and holds no private part): kept
    if (k.retired_at !== null && !k.revoked_at && Date.parse(k.retired_at) + RETIRED_DELETE_MS <= at) {
      fs.rmSync(keyFile(dataDir, k.kid), { force: true });
      deleted.push(k.kid);
    }
  }
  return { kid: key.kid, retired: old.kid, deleted };
}

/** The public members of a JWK: what a revoked key's record keeps. */
export function publicPart(jwk: JWK): JWK {
  return { kty: jwk.kty, crv: jwk.crv, x: jwk.x, kid: jwk.kid, alg: jwk.alg, use: jwk.use };
}

/** Emergency revocation (the private key leaked): the key leaves the JWKS at once instead of
 * after RETIRED_PUBLISH_MS, so a verdict forged with it no longer checks. When it was the
 * current key, a new key is made current first (API workers sign with it within CHECK_MS).
 * The key file is rewritten without its private part and with who revoked it and when: it
 * stays as the record of the revocation. Revoking a revoked key changes nothing. */
export function revokeSigningKey(dataDir: string, kid: string, by: string, at = Date.now()): Promise<KeyRevocation> {
  return withKeysLock(dataDir, () => revokeLocked(dataDir, kid, by, at));
}

async function revokeLocked(dataDir: string, kid: string, by: string, at: number): Promise<KeyRevocation> {
  const key = KID_PATTERN.test(kid) ? listKeys(dataDir).find((k) => k.kid === kid) : undefined;
  if (!key) throw new UnknownSigningKeyError(`no signing key ${JSON.stringify(kid)} in ${keysDir(dataDir)} (keys list shows them)`);
  if (key.revoked_at) return { kid, revoked_at: key.revoked_at, revoked_by: key.revoked_by ?? null, current: readCurrentKid(dataDir) ?? null, already_revoked: true };
  let current = readCurrentKid(dataDir) ?? null;
  if (current === kid) {
    // the new key file exists before `current` names it (as in a rotation)
    current = (await newKeyFile(dataDir, at)).kid;
    writeAtomic(currentFile(dataDir), current);
  }
  const revokedAt = new Date(at).toISOString();
  const record: KeyFile = { kid, created_at: key.created_at, retired_at: key.retired_at ?? revokedAt, revoked_at: revokedAt, revoked_by: by, jwk: publicPart(key.jwk) };
  writeAtomic(keyFile(dataDir, kid), JSON.stringify(record));
  return { kid, revoked_at: revokedAt, revoked_by: by, current, already_revoked: false };
}

// Rotations and revocations, one at a time, in this process and across processes (two CLI
// commands, an operator's emergency revoke during a scheduled rotation). Each reads the keys,
// then rewrites them: run together, a rotation wrote back its stale copy of the key a
// revocation had just stripped (the revoked key published again, its private part back on
// disk), and two rotations left a second new key that was never retired. The lock is a file
// made with O_EXCL beside the keys folder (a backup's keys folder holds key files only),
// naming its holder; one whose holder is gone (a killed command) is taken over.
let inProcess: Promise<unknown> = Promise.resolve();
const KEYS_LOCK_WAIT_MS = 30_000;
/** How old the lock of a holder in another PID namespace must be to count as left by a killed
 * command: key commands take milliseconds, and a waiter gives up after KEYS_LOCK_WAIT_MS. */
export const FOREIGN_KEYS_LOCK_MS = 10_000;

function withKeysLock<T>(dataDir: string, work: () => Promise<T>): Promise<T> {
  const run = inProcess.then(async () => {
    const release = await takeKeysLock(dataDir);
    try {
      return await work();
    } finally {
      release();
    }
  });
  inProcess = run.catch(() => {});
  return run;
}

async function takeKeysLock(dataDir: string): Promise<() => void> {
  const file = path.join(dataDir, 'keys.lock');
  fs.mkdirSync(dataDir, { recursive: true });
  const me = currentProcess();
  const deadline = Date.now() + KEYS_LOCK_WAIT_MS;
  for (;;) {
    try {
      fs.writeFileSync(file, JSON.stringify(me), { flag: 'wx', mode: 0o600 });
      return () => fs.rmSync(file, { force: true });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
    let holder: ProcessIdentity | null = null;
    try {
      holder = JSON.parse(fs.readFileSync(file, 'utf8')) as ProcessIdentity;
    } catch {
      // removed, or half written by a holder just starting: looked at again
    }
    // another process of this pid number (a restart) left it, or a holder that is gone; one of
    // another PID namespace (a key command in another container) has a pid that names some
    // other process here: its lock is taken over only once older than a key command lasts
    const mine = holder !== null && holder.pid === me.pid && holder.pid_start === me.pid_start && (holder.pid_ns ?? null) === (me.pid_ns ?? null);
    const state = holder === null || mine ? 'alive' : holderState(holder);
    const gone = state === 'gone' || (state === 'elsewhere' && Date.now() - (fs.statSync(file, { throwIfNoEntry: false })?.mtimeMs ?? Date.now()) > FOREIGN_KEYS_LOCK_MS);
    if (gone) {
      fs.rmSync(file, { force: true });
      continue;
    }
    if (Date.now() > deadline) throw new Error(`another key command holds ${file} (pid ${holder?.pid ?? 'unknown'}); try again once it has finished`);
    // polled: a lock file gives no event to wait for; key commands are rare and short
    await new Promise((r) => setTimeout(r, 25));
  }
}
