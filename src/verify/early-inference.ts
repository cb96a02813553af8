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
// The bound, per token and module and per API worker: a key-less call is overlapped only when
// the last booking of its (charged) token for the module on this worker was a reservation, and
// only for as many images as that reservation's call sent. Any other outcome of a reservation
// takes the token off, and a token not remembered goes serial, as a first call does. So every
// dropped inference follows a reservation that was charged or refunded, and a token refused
// for quota stays serial until a reservation of its succeeds again. (By calls alone, one
// charged single frame would buy a dropped batch of 32 captures or a 20-frame sequence: a
// caller with a few units left alternating the two.)
//
// Calls in flight at once: the first overlapped call of a token whose reservation has not
// answered yet may always start early; more only while their units together fit in the units
// the token had left for the module at its last settlement on this worker (the usage its
// answer carried; unlimited: no cap). So a burst of key-less calls from a caller whose quota
// just ran out (0 left) drops one call's engine work, the calls beyond it serial and refused
// before any inference, and a caller with quota keeps every call overlapped, its calls'
// reservations covered by what it has left. Without that count, every call of a burst read
// "last succeeded" before any of their reservations answered, and each started its
// inference: up to the admission's per-token slots of dropped runs per unit paid. The units
// left are this worker's last sight of them: spent meanwhile through another worker or node,
// a burst here can drop as many calls as they were, once, before its first refusal takes the
// token off. (Capping the calls in flight at one instead cost the overlap of every concurrent
// call of a caller with quota: single-rgb8 at 16 workers and concurrency 32 fell to 0.84 of the
// code before it, bench/results/e50-burst-w16-c32.md; this bound: 1.08 there, and 1.07 at 2
// workers and concurrency 4 over 5 rounds, though 0.64 over 3, e50-units-*.md: a loaded host,
// and the bench's token unlimited, so its calls are overlapped as before.) The alternative,
// reading the caller's remaining units before the reservation, needs a read of the store,
// which the overlap exists to avoid waiting for.
//
// The memory is per API worker (each thread has its own module instance), bounded by
// capacity, the oldest token with no overlapped call in flight forgotten first; forgetting a
// token only makes its next call serial, so the bound holds however the memory is evicted.

/** Default capacity: a few thousand business tokens calling through one worker at once. */
export const EARLY_INFERENCE_TOKENS = 4096;

/** What the memory knows of one token's calls to one module. */
export interface Remembered {
  /** the images of the call whose reservation was the token's last booking on this worker;
   * 0 once another outcome followed (the entry stays only while calls are pending) */
  granted: number;
  /** the units the token had left at its last settlement here (Infinity: no limit) */
  left: number;
  /** the overlapped calls whose reservation has not answered, and their units */
  pendingCalls: number;
  pendingUnits: number;
}

/** An overlapped call's share of its token's bound, given back when its reservation answers
 * (EarlyInference.booked). It names the entry it counts in, so a token forgotten and
 * remembered again meanwhile is not given back what it never counted. */
export interface EarlyClaim {
  readonly entry: Remembered;
  readonly units: number;
}

export class EarlyInference {
  /** tokens (and module) whose last booking on this worker was a reservation, oldest first
   * (and refused ones with overlapped calls still waiting for their reservation) */
  private readonly tokens = new Map<string, Remembered>();

  constructor(private readonly capacity = EARLY_INFERENCE_TOKENS) {}

  /** whether a call under `key` (a token and module) of `images` images and `units` units
   * would be overlapped now */
  allows(key: string, images: number, units = 1): boolean {
    const entry = this.tokens.get(key);
    if (entry === undefined || images > entry.granted) return false;
    return entry.pendingCalls === 0 || entry.pendingUnits + units <= entry.left;
  }

  /** A call under `key` may start its inference before its reservation answers: its claim on
   * the bound, to give back to booked(); null: the call is serial. */
  start(key: string, images: number, units = 1): EarlyClaim | null {
    if (!this.allows(key, images, units)) return null;
    const entry = this.tokens.get(key)!;
    entry.pendingCalls++;
    entry.pendingUnits += units;
    return { entry, units };
  }

  /** What the reservation of a call under `key` came to: a reservation of a call of `images`
   * images, or anything else (null: a refusal, a replay, a store failure); `claim`: the call's,
   * if it started its inference early (start()). Told once per reservation. */
  booked(key: string, images: number | null, claim: EarlyClaim | null = null): void {
    if (claim) {
      claim.entry.pendingCalls--;
      claim.entry.pendingUnits -= claim.units;
    }
    const entry = this.tokens.get(key);
    if (images === null) {
      if (entry === undefined) return;
      // and what it had left is no longer known: a reservation granted later (a refund, new
      // quota) overlaps calls beyond the first only once a settlement tells it again (review R2)
      entry.granted = 0;
      entry.left = 0;
      if (entry.pendingCalls === 0) this.tokens.delete(key);
      return;
    }
    // the same entry (the claims in flight name it), the newest now: re-inserted at the end of
    // the map's order; units left unknown (0) until a settlement tells them
    const remembered = entry ?? { granted: 0, left: 0, pendingCalls: 0, pendingUnits: 0 };
    remembered.granted = images;
    this.tokens.delete(key);
    this.tokens.set(key, remembered);
    if (this.tokens.size > this.capacity) this.forgetOldest();
  }

  /** The units a settled call's answer says the token has left for the module (Infinity: no
   * limit). */
  settled(key: string, left: number): void {
    const entry = this.tokens.get(key);
    if (entry !== undefined) entry.left = left;
  }

  /** Forgets the oldest token with no overlapped call in flight: forgetting one that has some
   * would let a later reservation remember it afresh, its in-flight calls uncounted. Those are
   * at most the calls in flight, so the walk is short. */
  private forgetOldest(): void {
    for (const [key, entry] of this.tokens) {
      if (entry.pendingCalls === 0) {
        this.tokens.delete(key);
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
