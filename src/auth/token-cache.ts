import type { TokenRecord } from '../store/index.ts';

/**
 * Token reads by hash kept a few seconds, for the verify path on the shared PostgreSQL store,
 * where each read is a round trip. Safe because nothing is decided on a cached record alone:
 * the reservation re-reads the token inside its one database call (revoked, disabled,
 * expired, grant), so a revocation seen late costs at most an upload answered 401, never a
 * charge. Only tokens found are kept: an unknown hash is read every time, so guessing cannot
 * fill the cache, and a token created on another node works at once. Per API worker thread.
 */
export class TokenCache {
  private readonly entries = new Map<string, { token: TokenRecord; until: number }>();

  constructor(
    private readonly read: (hash: string) => Promise<TokenRecord | undefined>,
    private readonly ttlMs: number,
    private readonly maxEntries = 10_000,
  ) {}

  async get(hash: string): Promise<TokenRecord | undefined> {
    const at = performance.now();
    const hit = this.entries.get(hash);
    if (hit && hit.until > at) return hit.token;
    const token = await this.read(hash);
    if (!token) {
      this.entries.delete(hash);
      return undefined;
    }
    // a bound, not an LRU: past it the cache starts over, which costs only reads
    if (this.entries.size >= this.maxEntries) this.entries.clear();
    this.entries.set(hash, { token, until: at + this.ttlMs });
    return token;
  }
}
