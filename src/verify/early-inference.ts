// Which callers' calls start the engine beside their reservation rather than after it
// (verify.ts: reserve and infer overlapped, so a call waits for the longer of the two, not
// their sum). An early inference is a bet that the reservation will be granted: when it is
// not (a quota refusal, a token revoked mid-upload, a store failure), the engine's answer is
// dropped, so the engine ran for nothing. Without a bound, a caller with no quota left could
// make the service run its networks in a loop for free, each call answered 429.
//
// Only a call without an Idempotency-Key is ever overlapped (verify.ts startedEarly). The
// spec's idempotency lifecycle says a replay of a completed key returns the saved answer with
// "no inference, no new charge", and a 409 (request_in_progress, idempotency_conflict) runs
// none either; whether a keyed call is a replay or a conflict only the store knows, in the
// reservation itself, so a keyed call waits for it. A key-less call can be neither.
//
// The bound, per token and per API worker: a key-less call is overlapped only when the last
// booking of its (charged) token on this worker was a reservation, and only while the images
// of the token's overlapped calls whose reservation has not answered yet, this one's included,
// are at most the images of that reservation's call. Any other outcome of a reservation takes
// the token off, and a token not remembered goes serial, as a first call does. So every dropped
// inference follows a reservation that was charged or refunded, and however many calls a token
// has in flight (a burst of key-less calls from a caller whose quota just ran out), the engine
// work it can have dropped at once is one such call's images: one frame for a single-frame
// caller; the calls beyond it go serial and are refused before any inference. A token refused
// for quota stays serial until a reservation of its succeeds again. (Without the in-flight
// count, every call of a burst read "last succeeded" before any of their reservations
// answered, and each started its inference: up to the admission's per-token slots of dropped
// runs per unit paid. By calls alone, one charged single frame would buy a dropped batch of 32
// captures or a 20-frame sequence: a caller with a few units left alternating the two.) The
// memory is per API worker (each thread has its own module instance),
// bounded by capacity, the oldest token with no overlapped call in flight forgotten first;
// forgetting a token only makes its next call serial, so the bound holds however the memory
// is evicted. The alternative, knowing the caller's remaining units are positive, needs a
// read of the store (or a cache of the usage the last answer carried, stale across workers)
// before the reservation, which the overlap exists to avoid waiting for.

/** Default capacity: a few thousand business tokens calling through one worker at once. */
export const EARLY_INFERENCE_TOKENS = 4096;

/** What the memory knows of one token. */
export interface Remembered {
  /** the images of the call whose reservation was the token's last booking on this worker;
   * 0 once another outcome followed (the entry stays only while `pending` is not 0) */
  granted: number;
  /** the images of the token's overlapped calls whose reservation has not answered */
  pending: number;
}

/** An overlapped call's share of its token's bound, given back when its reservation answers
 * (EarlyInference.booked). It names the entry it counts in, so a token forgotten and
 * remembered again meanwhile is not given back what it never counted. */
export interface EarlyClaim {
  readonly entry: Remembered;
  readonly images: number;
}

export class EarlyInference {
  /** tokens whose last booking on this worker was a reservation, oldest first (and refused
   * tokens with overlapped calls still waiting for their reservation) */
  private readonly tokens = new Map<string, Remembered>();

  constructor(private readonly capacity = EARLY_INFERENCE_TOKENS) {}

  /** whether a call charged to `tokenId` that sends `images` images would be overlapped now */
  allows(tokenId: string, images: number): boolean {
    const entry = this.tokens.get(tokenId);
    return entry !== undefined && entry.pending + images <= entry.granted;
  }

  /** A call charged to `tokenId` that sends `images` images may start its inference before its
   * reservation answers: its claim on the token's bound, to give back to booked(); null: the
   * call is serial. */
  start(tokenId: string, images: number): EarlyClaim | null {
    if (!this.allows(tokenId, images)) return null;
    const entry = this.tokens.get(tokenId)!;
    entry.pending += images;
    return { entry, images };
  }

  /** What the reservation of a call charged to `tokenId` came to: a reservation of a call of
   * `images` images, or anything else (null: a refusal, a replay, a store failure); `claim`:
   * the call's, if it started its inference early (start()). Told once per reservation. */
  booked(tokenId: string, images: number | null, claim: EarlyClaim | null = null): void {
    if (claim) claim.entry.pending -= claim.images;
    const entry = this.tokens.get(tokenId);
    if (images === null) {
      if (entry === undefined) return;
      entry.granted = 0;
      if (entry.pending === 0) this.tokens.delete(tokenId);
      return;
    }
    // the same entry (the claims in flight name it), the newest now: re-inserted at the end of
    // the map's order
    const remembered = entry ?? { granted: 0, pending: 0 };
    remembered.granted = images;
    this.tokens.delete(tokenId);
    this.tokens.set(tokenId, remembered);
    if (this.tokens.size > this.capacity) this.forgetOldest();
  }

  /** Forgets the oldest token with no overlapped call in flight: forgetting one that has some
   * would let a later reservation remember it afresh, its in-flight calls uncounted. Those are
   * at most the calls in flight, so the walk is short. */
  private forgetOldest(): void {
    for (const [tokenId, entry] of this.tokens) {
      if (entry.pending === 0) {
        this.tokens.delete(tokenId);
        return;
      }
    }
  }

  /** how many tokens are remembered (tests) */
  get size(): number {
    return this.tokens.size;
  }
}

/** This API worker's memory, used by a verify call whose deps name none. */
export const workerEarlyInference = new EarlyInference();
