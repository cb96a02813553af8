import { createPrivateKey, createPublicKey, sign, verify } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { calculateJwkThumbprint, type JWK } from 'jose';
import { KID_PATTERN, newKey, type KeyFile } from './keys.ts';

// The signing keys a `restore` puts into DATA_DIR/keys (issue 40, findings 4 and 5). A
// backup's keys folder is read as untrusted input: a folder someone could have tampered with
// (it copied /etc/passwd through a symlink, and a folder inside stopped the restore half-way),
// so every entry is checked before anything in DATA_DIR moves. And a backup taken before
// `keys revoke` must not bring the revoked (leaked) key back: the revocations recorded in the
// DATA_DIR being replaced are kept.

/** Not an HTTP error: the restore is refused with this message, DATA_DIR untouched. */
export class KeyFolderError extends Error {}

/** A key file is a few hundred bytes: anything much larger is not one. */
const MAX_KEY_FILE_BYTES = 64 * 1024;
const MAX_KEY_FILES = 10_000;
const CURRENT = 'current';
// writeAtomic's and ensureSigningKey's temporaries (`<name>.<hex>.tmp`): a backup made
// while one existed holds it; the service never reads them
const TEMPORARY = /\.tmp$/;

const iso = (v: unknown) => typeof v === 'string' && !Number.isNaN(Date.parse(v));

/** Reads a plain file without following a link (O_NOFOLLOW: a link is refused, ELOOP), and
 * only if it is a regular file of a key file's size. */
function readPlain(file: string): string {
  let fd: number;
  try {
    fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ELOOP' || code === 'EMLINK') throw new KeyFolderError(`${file} is a symbolic link; a backup's keys folder holds only plain files`);
    throw new KeyFolderError(`${file} cannot be read: ${(e as Error).message}`);
  }
  try {
    const st = fs.fstatSync(fd);
    if (!st.isFile()) throw new KeyFolderError(`${file} is not a plain file`);
    if (st.size > MAX_KEY_FILE_BYTES) throw new KeyFolderError(`${file} is ${st.size} bytes: not a key file`);
    return fs.readFileSync(fd, 'utf8');
  } finally {
    fs.closeSync(fd);
  }
}

/** Whether the private part of an Ed25519 JWK belongs to its public x: a signature made with
 * the one verifies with the other (no KeyObject is exported: see newKey in keys.ts). */
function privateMatchesPublic(jwk: JWK): boolean {
  try {
    const probe = Buffer.from('liveness restore key check');
    const signature = sign(null, probe, createPrivateKey({ key: { kty: 'OKP', crv: 'Ed25519', x: jwk.x, d: jwk.d }, format: 'jwk' }));
    return verify(null, probe, createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: jwk.x }, format: 'jwk' }), signature);
  } catch {
    return false;
  }
}

/** One key file checked the way the service will use it: a kid that is the RFC 7638
 * thumbprint of its public key, dates, and (unless revoked) a private part that matches. */
export async function checkKeyFile(file: string, text: string, expectKid: string): Promise<KeyFile> {
  let key: KeyFile;
  try {
    key = JSON.parse(text) as KeyFile;
  } catch {
    throw new KeyFolderError(`${file} is not JSON: not a key file`);
  }
  const bad = (why: string) => new KeyFolderError(`${file} is not a valid signing key: ${why}`);
  if (typeof key !== 'object' || key === null || Array.isArray(key)) throw bad('not an object');
  if (key.kid !== expectKid) throw bad(`its kid ${JSON.stringify(key.kid)} is not its file name`);
  const jwk = key.jwk;
  if (typeof jwk !== 'object' || jwk === null || jwk.kty !== 'OKP' || jwk.crv !== 'Ed25519' || typeof jwk.x !== 'string') throw bad('not an Ed25519 key');
  if ((await calculateJwkThumbprint({ kty: jwk.kty, crv: jwk.crv, x: jwk.x })) !== key.kid) throw bad('its kid is not the thumbprint of its public key');
  if (!iso(key.created_at)) throw bad('created_at is not a time');
  if (key.retired_at !== null && !iso(key.retired_at)) throw bad('retired_at is not a time');
  if (key.revoked_at !== undefined && key.revoked_at !== null && !iso(key.revoked_at)) throw bad('revoked_at is not a time');
  if (!key.revoked_at) {
    if (typeof jwk.d !== 'string') throw bad('no private part (and not revoked)');
    if (!privateMatchesPublic(jwk)) throw bad('its private part does not match its public key');
  } else if (jwk.d !== undefined) throw bad('a revoked key\'s record keeps no private part');
  return key;
}

export interface KeyFolder {
  keys: Map<string, KeyFile>;
  current: string;
}

/** A backup's keys folder, every entry checked: a folder of plain files only (no links, no
 * folders, no devices), named `current` or `<kid>.json` (temporaries skipped), each a valid
 * key, and `current` naming a key that can sign. KeyFolderError otherwise. */
export async function readBackupKeyFolder(dir: string): Promise<KeyFolder> {
  let st: fs.Stats;
  try {
    st = fs.lstatSync(dir);
  } catch (e) {
    throw new KeyFolderError(`${dir} cannot be read: ${(e as Error).message}`);
  }
  if (st.isSymbolicLink()) throw new KeyFolderError(`${dir} is a symbolic link; restore reads only a plain keys folder written by backup`);
  if (!st.isDirectory()) throw new KeyFolderError(`${dir} is not a folder`);
  const names = fs.readdirSync(dir);
  if (names.length > MAX_KEY_FILES) throw new KeyFolderError(`${dir} holds ${names.length} entries: not a keys folder`);
  const keys = new Map<string, KeyFile>();
  let current: string | undefined;
  for (const name of names.sort()) {
    const file = path.join(dir, name);
    const entry = fs.lstatSync(file);
    if (entry.isSymbolicLink()) throw new KeyFolderError(`${file} is a symbolic link; a backup's keys folder holds only plain files`);
    if (!entry.isFile()) throw new KeyFolderError(`${file} is ${entry.isDirectory() ? 'a folder' : 'not a plain file'}; a backup's keys folder holds only key files`);
    if (TEMPORARY.test(name)) continue;
    if (name === CURRENT) {
      current = readPlain(file).trim();
      continue;
    }
    const kid = name.endsWith('.json') ? name.slice(0, -'.json'.length) : '';
    if (!KID_PATTERN.test(kid)) throw new KeyFolderError(`${file}: a backup's keys folder holds only \`current\` and <kid>.json files`);
    keys.set(kid, await checkKeyFile(file, readPlain(file), kid));
  }
  if (keys.size === 0) throw new KeyFolderError(`${dir} holds no key`);
  if (current === undefined) throw new KeyFolderError(`${dir} has no \`current\` file naming the signing key`);
  const signing = keys.get(current);
  if (!signing) throw new KeyFolderError(`${path.join(dir, CURRENT)} names ${JSON.stringify(current)}, which is not a key of the folder`);
  if (signing.revoked_at) throw new KeyFolderError(`${path.join(dir, CURRENT)} names a revoked key`);
  return { keys, current };
}

/** What the DATA_DIR being replaced says about keys, read leniently (its folder is the
 * service's own): its revocation records, and its current key when that can sign. Links and
 * anything unreadable are passed over. */
async function readLiveKeys(dir: string): Promise<{ revoked: KeyFile[]; current: KeyFile | undefined }> {
  const revoked: KeyFile[] = [];
  let current: KeyFile | undefined;
  let names: string[];
  try {
    // followed if DATA_DIR/keys is a link the operator set up: its revocations must be kept
    if (!fs.statSync(dir).isDirectory()) return { revoked, current };
    names = fs.readdirSync(dir);
  } catch {
    return { revoked, current };
  }
  let currentKid: string | undefined;
  try {
    currentKid = readPlain(path.join(dir, CURRENT)).trim();
  } catch {
    // no current key: a new one is made if one is needed
  }
  for (const name of names) {
    const kid = name.endsWith('.json') ? name.slice(0, -'.json'.length) : '';
    if (!KID_PATTERN.test(kid)) continue;
    try {
      const file = path.join(dir, name);
      const key = await checkKeyFile(file, readPlain(file), kid);
      if (key.revoked_at) revoked.push(key);
      else if (kid === currentKid) current = key;
    } catch {
      // not a key this restore can use: passed over (it stays in the moved-aside folder)
    }
  }
  return { revoked, current };
}

export interface RestoredKeys {
  /** file name -> content, to be written into the new DATA_DIR/keys */
  files: Map<string, string>;
  current: string;
  /** revoked in DATA_DIR, unrevoked in the backup: kept revoked */
  kept_revocations: string[];
  /** where the signing key comes from: the backup's current key, DATA_DIR's current key
   * (the backup's was revoked since), or a new key (neither could sign) */
  current_from: 'backup' | 'data_dir' | 'new';
}

/** The keys folder a restore writes: the backup's keys, with every revocation recorded in the
 * DATA_DIR being replaced kept (the revocation record, public part only, replaces the
 * backup's file of that kid; a revoked kid stays revoked). When that leaves the backup's
 * current key revoked, DATA_DIR's current key signs (it was made by the revocation), or a
 * new key when it has none. */
export async function keysForRestore(backupDir: string, liveDir: string, at: number): Promise<RestoredKeys> {
  const backup = await readBackupKeyFolder(backupDir);
  const live = await readLiveKeys(liveDir);
  const keys = new Map(backup.keys);
  const kept: string[] = [];
  for (const r of live.revoked) {
    const had = keys.get(r.kid);
    if (had && !had.revoked_at) kept.push(r.kid);
    if (!had?.revoked_at) keys.set(r.kid, r);
  }
  let current = backup.current;
  let from: RestoredKeys['current_from'] = 'backup';
  if (keys.get(current)!.revoked_at) {
    const replacement = live.current && !keys.get(live.current.kid)?.revoked_at ? live.current : await newKey(at);
    from = replacement === live.current ? 'data_dir' : 'new';
    keys.set(replacement.kid, replacement);
    current = replacement.kid;
  }
  const files = new Map<string, string>([[CURRENT, current]]);
  for (const [kid, key] of keys) files.set(`${kid}.json`, JSON.stringify(key));
  return { files, current, kept_revocations: kept.sort(), current_from: from };
}
