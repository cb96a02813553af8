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
// The bound: a key-less call is overlapped only when the last booking of its (charged) token
// on this API worker was a reservation, and only when it sends no more images than that
// reservation's call did; any other outcome of the reservation takes the token off, and a token
// not remembered goes serial, as a first call does. So every dropped inference follows a
// reservation that was charged or refunded, for at most as many images as that one ran, at
// most one per call that token has in flight at that moment (admission caps those per token),
// and a token refused for quota stays serial until a reservation of its succeeds again. (By
// calls alone, one charged single frame would buy a dropped batch of 32 captures or a
// 20-frame sequence: a caller with a few units left alternating the two.) The memory is per
// API worker (each thread has its own module instance), bounded by capacity, oldest forgotten first;
// forgetting a token only makes its next call serial, so the bound holds however the memory
// is evicted. The alternative, knowing the caller's remaining units are positive, needs a
// read of the store (or a cache of the usage the last answer carried, stale across workers)
// before the reservation, which the overlap exists to avoid waiting for.

/** Default capacity: a few thousand business tokens calling through one worker at once. */
export const EARLY_INFERENCE_TOKENS = 4096;

export class EarlyInference {
  /** tokens whose last booking on this worker was a reservation, oldest first, with the
   * number of images that reservation's call sent */
  private readonly reserved = new Map<string, number>();

  constructor(private readonly capacity = EARLY_INFERENCE_TOKENS) {}

  /** whether a call charged to `tokenId` that sends `images` images may start its inference
   * before its reservation answers */
  allows(tokenId: string, images: number): boolean {
    const granted = this.reserved.get(tokenId);
    return granted !== undefined && images <= granted;
  }

  /** what the reservation of a call charged to `tokenId` came to: a reservation of a call of
   * `images` images, or anything else (null: a refusal, a replay, a store failure) */
  booked(tokenId: string, images: number | null): void {
    this.reserved.delete(tokenId);
    if (images === null) return;
    this.reserved.set(tokenId, images);
    if (this.reserved.size > this.capacity) this.reserved.delete(this.reserved.keys().next().value!);
  }

  /** how many tokens are remembered (tests) */
  get size(): number {
    return this.reserved.size;
  }
}

/** This API worker's memory, used by a verify call whose deps name none. */
export const workerEarlyInference = new EarlyInference();
