import { createPrivateKey, sign as edSign, type KeyObject } from 'node:crypto';
import { now } from '../clock.ts';
import type { SigningKeys, StoreStatus } from '../store/index.ts';
import { ensureSigningKey, readCurrentKid, readKey } from './keys.ts';
import { SHARED_KEY_CACHE_MS, storeKeys, type KeySource } from './source.ts';

// Each API worker signs every verify response body. The key is imported once per worker;
// `current` is re-read at most once per CHECK_MS so that a `keys rotate` from the CLI is
// picked up within a second without a file read on every response.
const CHECK_MS = 1000;

interface Loaded {
  kid: string;
  key: KeyObject;
  /** base64url of the protected header, the same for every body signed with this key */
  header: string;
}

function loadedKey(kid: string, jwk: object): Loaded {
  const key = createPrivateKey({ key: jwk as import('node:crypto').JsonWebKey, format: 'jwk' });
  if (key.asymmetricKeyType !== 'ed25519') throw new Error(`signing key ${kid} is not an Ed25519 key`);
  const header = Buffer.from(JSON.stringify({ alg: 'EdDSA', kid })).toString('base64url');
  return { kid, key, header };
}

/** Detached compact JWS (RFC 7515 appendix F): `<protected header>..<signature>`, the
 * signature over `<header>.<base64url(body)>`. Written here rather than with jose's
 * CompactSign because jose signs through WebCrypto, whose every call is a round trip to
 * libuv's thread pool and back through the event loop (the respond step took 0.53 ms of a
 * single call's 5 ms); node:crypto signs Ed25519 synchronously in tens of microseconds.
 * jose still verifies them (tests, client). */
function detachedJws({ key, header }: Loaded, body: string | Uint8Array): string {
  const payload = (typeof body === 'string' ? Buffer.from(body) : Buffer.from(body.buffer, body.byteOffset, body.byteLength)).toString('base64url');
  const signature = edSign(null, Buffer.from(`${header}.${payload}`), key);
  return `${header}..${signature.toString('base64url')}`;
}

export class VerdictSigner {
  private loaded: Promise<Loaded> | undefined;
  private checkedAt = 0;

  constructor(readonly dataDir: string) {}

  private load(kid: string | undefined): Promise<Loaded> {
    return (async () => {
      const file = kid ? readKey(this.dataDir, kid) : await ensureSigningKey(this.dataDir, now());
      return loadedKey(file.kid, file.jwk);
    })();
  }

  private async current(): Promise<Loaded> {
    const t = Date.now();
    if (this.loaded && t - this.checkedAt < CHECK_MS) return this.loaded;
    this.checkedAt = t;
    const kid = readCurrentKid(this.dataDir);
    if (!this.loaded || kid === undefined || (await this.loaded.catch(() => undefined))?.kid !== kid) {
      const next = this.load(kid);
      // a failed load is retried on the next call instead of being cached
      next.catch(() => {
        if (this.loaded === next) this.loaded = undefined;
      });
      this.loaded = next;
    }
    return this.loaded;
  }

  /** Detached compact JWS (RFC 7515 appendix F): `<protected header>..<signature>` over the
   * exact bytes of `body`; the header carries alg EdDSA and the kid. */
  async sign(body: string | Uint8Array): Promise<string> {
    return detachedJws(await this.current(), body);
  }
}

const signers = new Map<string, VerdictSigner>();

export function signerFor(dataDir: string): VerdictSigner {
  let s = signers.get(dataDir);
  if (!s) {
    s = new VerdictSigner(dataDir);
    signers.set(dataDir, s);
  }
  return s;
}

/** Signs with the current key of the shared database. A query per response would put the
 * database on the hot path, so the key is re-read at most once per SHARED_KEY_CACHE_MS;
 * a rotation on another node is therefore used here within that time. */
export class SharedSigner {
  private loaded: Promise<Loaded> | undefined;
  private loadedAt = 0;

  constructor(
    readonly keys: KeySource,
    private readonly cacheMs = SHARED_KEY_CACHE_MS,
  ) {}

  private current(): Promise<Loaded> {
    const t = Date.now();
    if (this.loaded && t - this.loadedAt < this.cacheMs) return this.loaded;
    this.loadedAt = t;
    const previous = this.loaded;
    const next = (async () => {
      const old = await previous?.catch(() => undefined);
      let file;
      try {
        file = await this.keys.current(now());
      } catch (err) {
        // the database is away: keep signing with the key this node has (asked again
        // after another SHARED_KEY_CACHE_MS) rather than answer unsigned
        if (old) return old;
        throw err;
      }
      if (old && old.kid === file.kid) return old;
      return loadedKey(file.kid, file.jwk);
    })();
    next.catch(() => {
      if (this.loaded === next) this.loaded = undefined;
    });
    this.loaded = next;
    return next;
  }

  async sign(body: string | Uint8Array): Promise<string> {
    return detachedJws(await this.current(), body);
  }
}

const sharedSigners = new WeakMap<SigningKeys, SharedSigner>();

/** The signer of this process: DATA_DIR's key files with LMDB, the database with PostgreSQL. */
export function signerOf(store: Pick<StoreStatus, 'kind'> & SigningKeys, dataDir: string): VerdictSigner | SharedSigner {
  if (store.kind !== 'postgres') return signerFor(dataDir);
  let s = sharedSigners.get(store);
  if (!s) {
    s = new SharedSigner(storeKeys(store));
    sharedSigners.set(store, s);
  }
  return s;
}

/** Signature for the `X-Verdict-Signature` header of a verify response. */
export function signBody(source: string | VerdictSigner | SharedSigner, body: string | Uint8Array): Promise<string> {
  return (typeof source === 'string' ? signerFor(source) : source).sign(body);
}
