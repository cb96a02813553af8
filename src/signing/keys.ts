import { createHash, generateKeyPairSync, randomBytes } from 'node:crypto';
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
 * JWKS read never misses the kid a fresh signature carries; and `current` names the new key
 * before the old one is marked retired, so the key that signs is never one whose publication
 * runs out. A command killed between those two writes left the old key neither current nor
 * retired: published, and its private part kept, for ever. Every rotation therefore retires
 * every key that is not current, not retired and not revoked, that one included. */
export function rotateSigningKey(dataDir: string, at = Date.now()): Promise<{ kid: string; retired: string | null; deleted: string[] }> {
  return withKeysLock(dataDir, () => rotateLocked(dataDir, at));
}

async function rotateLocked(dataDir: string, at: number): Promise<{ kid: string; retired: string | null; deleted: string[] }> {
  const old = await ensureSigningKey(dataDir, at);
  const key = await newKeyFile(dataDir, at);
  writeAtomic(currentFile(dataDir), key.kid);
  const retiredAt = new Date(at).toISOString();
  for (const k of listKeys(dataDir)) {
    if (k.kid !== key.kid && k.retired_at === null && !k.revoked_at) writeAtomic(keyFile(dataDir, k.kid), JSON.stringify({ ...k, retired_at: retiredAt }));
  }
  return { kid: key.kid, retired: old.kid, deleted: deleteRetired(dataDir, at) };
}

/** A key whose file goes: retired RETIRED_DELETE_MS or longer before `at`. A revoked key's file
 * is the record of its revocation (and holds no private part): kept. */
const deletable = (k: KeyFile, at: number) => k.retired_at !== null && !k.revoked_at && Date.parse(k.retired_at) + RETIRED_DELETE_MS <= at;

/** Deletes the files of deletable keys; their kids. */
function deleteRetired(dataDir: string, at: number): string[] {
  const deleted: string[] = [];
  for (const k of listKeys(dataDir)) {
    if (deletable(k, at)) {
      fs.rmSync(keyFile(dataDir, k.kid), { force: true });
      deleted.push(k.kid);
    }
  }
  return deleted;
}

/** The retention pass's share (src/retention): the files of keys retired 30 days ago go even
 * when no rotation follows (only a rotation deleted them, so a retired key's private part
 * stayed on disk as long as the key after it signed). Under the keys lock, taken only when
 * there is something to delete. */
export async function pruneRetiredKeys(dataDir: string, at = Date.now()): Promise<string[]> {
  if (!listKeys(dataDir).some((k) => deletable(k, at))) return [];
  return withKeysLock(dataDir, async () => deleteRetired(dataDir, at));
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
    // the new key file exists before `current` names it (as in a rotation), and `current` never
    // names a key without its private part. Killed between this and the record below, the key
    // is left unrevoked and the command failed: run again, it finishes (the key is no longer
    // current); a rotation meanwhile retires it (rotateLocked).
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
// made whole beside the keys folder (a backup's keys folder holds key files only), never over
// another, naming its holder; one whose holder is gone (a killed command) is taken over by one
// taker at a time (removeStale).
let inProcess: Promise<unknown> = Promise.resolve();
const KEYS_LOCK_WAIT_MS = 30_000;
/** How old the lock of a holder in another PID namespace must be to count as left by a killed
 * command: key commands take milliseconds, and a waiter gives up after KEYS_LOCK_WAIT_MS. */
export const FOREIGN_KEYS_LOCK_MS = 10_000;

/** Runs `work` holding DATA_DIR's keys lock: no rotation or revocation runs meanwhile, in this
 * process or another (restore holds it while it reads the revocations and puts the folders in
 * place). */
export function withKeysLock<T>(dataDir: string, work: () => Promise<T>): Promise<T> {
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

/** Testing only: told where a taker of the keys lock (`taker`, takeKeysLock's `me`) stands, so a
 * test can hold two takers at the point where they race (test/signing/key-commands-race.test.ts).
 * `stale`: it has judged the lock left by a holder that is gone and is about to take it over;
 * `waiting`: the lock is held by a live process and it polls. Nothing in the service sets it. */
export type KeysLockHook = (event: 'stale' | 'waiting', taker: ProcessIdentity) => void | Promise<void>;
let lockHook: KeysLockHook | null = null;
export function setKeysLockHook(hook: KeysLockHook | null): void {
  lockHook = hook;
}

/** Makes `file` holding `text` unless it exists (false then). Written aside and linked into
 * place, so the name never shows an empty or half-written file to a reader, even when the
 * writer is killed in between. */
function createWhole(file: string, text: string): boolean {
  const tmp = `${file}.${randomBytes(6).toString('hex')}.tmp`;
  fs.writeFileSync(tmp, text, { mode: 0o600 });
  try {
    fs.linkSync(tmp, file);
    return true;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    return false;
  } finally {
    fs.rmSync(tmp, { force: true });
  }
}

function readOrNull(file: string): string | null {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch {
    return null;
  }
}

/** Whether `text` (read from `file`, a lock or takeover file) names a holder that is gone. Text
 * that names none is not judged. Our own identity is a holder in this process, never gone. A
 * holder of another PID namespace (a key command in another container) has a pid that names
 * some other process here, or this one: its file counts as held until it is older than a key
 * command lasts (FOREIGN_KEYS_LOCK_MS). */
function heldByGone(text: string | null, me: ProcessIdentity, file: string): boolean {
  let holder: ProcessIdentity;
  try {
    holder = JSON.parse(text ?? '') as ProcessIdentity;
  } catch {
    return false;
  }
  if (typeof holder?.pid !== 'number') return false;
  if (holder.pid === me.pid && holder.pid_start === me.pid_start && (holder.pid_ns ?? null) === (me.pid_ns ?? null)) return false;
  const state = holderState(holder);
  if (state === 'elsewhere') return Date.now() - (fs.statSync(file, { throwIfNoEntry: false })?.mtimeMs ?? Date.now()) > FOREIGN_KEYS_LOCK_MS;
  return state === 'gone';
}

/**
 * Removes `file` if it still holds `judged`, the text of a lock whose holder is gone, and says
 * whether it looked. Two takers that both judged the same lock stale used to both delete it
 * and write their own: the later one deleted the earlier one's fresh lock, and both ran. Here
 * only the holder of a takeover file, made where none exists and named for that text, may look and
 * delete, and it deletes only while the file still holds that text: a lock's text names its
 * holder and a random token, so no later lock has it. A taker that finds the takeover file made
 * by a live process leaves it be (false: the caller polls); one whose maker is gone (killed
 * between making it and removing it) is removed the same way, a takeover file of its own.
 */
function removeStale(file: string, judged: string, me: ProcessIdentity): boolean {
  const marker = `${file}.${createHash('sha256').update(judged).digest('base64url').slice(0, 12)}.takeover`;
  if (!createWhole(marker, JSON.stringify({ ...me, token: randomBytes(8).toString('hex') }))) {
    const text = readOrNull(marker);
    return text !== null && heldByGone(text, me, marker) && removeStale(marker, text, me);
  }
  try {
    if (readOrNull(file) === judged) fs.rmSync(file, { force: true });
  } finally {
    fs.rmSync(marker, { force: true });
  }
  return true;
}

/** Takes DATA_DIR/keys.lock for `me` (this process; a test names others) and returns its
 * release, which removes the lock only while it is still the one this call wrote. */
export async function takeKeysLock(dataDir: string, me: ProcessIdentity = currentProcess()): Promise<() => void> {
  const file = path.join(dataDir, 'keys.lock');
  fs.mkdirSync(dataDir, { recursive: true });
  const mine = JSON.stringify({ ...me, token: randomBytes(8).toString('hex') });
  const deadline = Date.now() + KEYS_LOCK_WAIT_MS;
  for (;;) {
    if (createWhole(file, mine)) {
      return () => {
        if (readOrNull(file) === mine) fs.rmSync(file, { force: true });
      };
    }
    // removed meanwhile (or, from an older build, half written): looked at again
    const text = readOrNull(file);
    const holder = (() => {
      try {
        return JSON.parse(text ?? '') as ProcessIdentity;
      } catch {
        return null;
      }
    })();
    // another process of this pid number (a restart) left it, or a holder that is gone
    if (text !== null && heldByGone(text, me, file)) {
      await lockHook?.('stale', me);
      if (removeStale(file, text, me)) continue;
    } else if (holder) {
      await lockHook?.('waiting', me);
    }
    if (Date.now() > deadline) throw new Error(`another key command holds ${file} (pid ${holder?.pid ?? 'unknown'}); try again once it has finished`);
    // polled: a lock file gives no event to wait for; key commands are rare and short
    await new Promise((r) => setTimeout(r, 25));
  }
}
