/**
 * Credential reads by hash kept a few seconds, for the verify path on the shared PostgreSQL
 * store, where each read is a round trip: business tokens, and device sessions with their
 * parent token. Safe because nothing is decided on a cached record alone: the reservation
 * re-reads the token (revoked, disabled, expired, grant) and the session (revoked, expired,
 * captures left) inside its one database call, so a change seen late costs at most an upload
 * answered 401 or 429, never a charge. Only records found are kept: an unknown hash is read
 * every time, so guessing cannot fill the cache, and a token or session made on another node
 * works at once. Per API worker thread.
 */
export class ReadCache<V> {
  private readonly entries = new Map<string, { value: V; until: number }>();

  constructor(
    private readonly read: (hash: string) => Promise<V | undefined>,
    private readonly ttlMs: number,
    private readonly maxEntries = 10_000,
  ) {}

  async get(hash: string): Promise<V | undefined> {
    const at = performance.now();
    const hit = this.entries.get(hash);
    if (hit && hit.until > at) return hit.value;
    const value = await this.read(hash);
    if (value === undefined) {
      this.entries.delete(hash);
      return undefined;
    }
    // a bound, not an LRU: past it the cache starts over, which costs only reads
    if (this.entries.size >= this.maxEntries) this.entries.clear();
    this.entries.set(hash, { value, until: at + this.ttlMs });
    return value;
  }
}
