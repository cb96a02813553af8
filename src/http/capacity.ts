/** Verify capacity of the whole host: the spec's "2 concurrent calls per API worker" pooled
 * into 2 x WORKERS slots that every API worker draws from, so that no call is refused while
 * any slot of the host is free (the kernel's SO_REUSEPORT hash spreads connections unevenly).
 * A slot is taken before the body is read and held through upload, preparation and
 * inference; when none is free the call is refused at once (503), never queued.
 *
 * The table lives in a SharedArrayBuffer created by the main thread and handed to every API
 * worker. Each slot records who holds it (worker, client address, token), so the per-address
 * and per-token caps can be checked against the same table in the same critical section: a
 * count kept beside the table could be raced past its cap by two workers at once. The critical
 * section is a scan of at most 128 entries, so a plain spin lock costs less than a message
 * round trip to a coordinator thread would. */

const LOCK = 0;
const USED = 1;
const HEADER = 2;
// per slot: holder worker + 1 (0 = free), address hash (2 words), token hash (2 words)
const ENTRY = 5;

export interface AdmissionLimits {
  slots: number;
  perAddress: number;
  perToken: number;
}

export type AdmissionRefusal = 'host' | 'address' | 'token';

/** Creates the shared table (main thread). */
export function createAdmissionTable(slots: number): SharedArrayBuffer {
  return new SharedArrayBuffer((HEADER + slots * ENTRY) * Int32Array.BYTES_PER_ELEMENT);
}

/** Two independent 32-bit FNV-1a hashes: a collision would only make two clients share a cap. */
function hash2(text: string, out: Int32Array, at: number): void {
  let a = 0x811c9dc5;
  let b = 0x01000193 ^ text.length;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    a = Math.imul(a ^ c, 0x01000193);
    b = Math.imul(b ^ c, 0x5bd1e995) ^ (b >>> 15);
  }
  out[at] = a | 0;
  out[at + 1] = b | 0;
}

export class HostAdmission {
  private readonly table: Int32Array;
  private readonly slots: number;
  private readonly key = new Int32Array(4);
  /** slots this worker holds, for the per-worker gauge (the main thread sums the gauges) */
  private mine = 0;

  constructor(
    buffer: SharedArrayBuffer,
    private readonly worker: number,
    private readonly limits: AdmissionLimits,
    private readonly onChange?: (heldByThisWorker: number) => void,
  ) {
    this.table = new Int32Array(buffer);
    this.slots = (this.table.length - HEADER) / ENTRY;
    if (limits.slots !== this.slots) throw new RangeError(`admission table has ${this.slots} slots, config says ${limits.slots}`);
  }

  // A worker that dies with slots held is replaced by the main thread, which first frees its
  // entries (releaseWorkerSlots): no slot outlives its holder.

  /** Slots taken on the whole host. */
  inUse(): number {
    return Atomics.load(this.table, USED);
  }

  /** Returns an idempotent release function, or why the call is refused. */
  tryAcquire(address: string, tokenId: string): (() => void) | AdmissionRefusal {
    const t = this.table;
    const k = this.key;
    hash2(address, k, 0);
    hash2(tokenId, k, 2);
    let slot = -1;
    let refusal: AdmissionRefusal | null = null;
    this.lock();
    try {
      if (t[USED]! >= this.slots) {
        refusal = 'host';
      } else {
        let sameAddress = 0;
        let sameToken = 0;
        for (let i = 0; i < this.slots; i++) {
          const e = HEADER + i * ENTRY;
          if (t[e] === 0) {
            if (slot < 0) slot = i;
            continue;
          }
          if (t[e + 1] === k[0] && t[e + 2] === k[1]) sameAddress++;
          if (t[e + 3] === k[2] && t[e + 4] === k[3]) sameToken++;
        }
        if (sameAddress >= this.limits.perAddress) refusal = 'address';
        else if (sameToken >= this.limits.perToken) refusal = 'token';
        else {
          const e = HEADER + slot * ENTRY;
          t[e + 1] = k[0]!;
          t[e + 2] = k[1]!;
          t[e + 3] = k[2]!;
          t[e + 4] = k[3]!;
          t[e] = this.worker + 1;
          t[USED]!++;
        }
      }
    } finally {
      this.unlock();
    }
    if (refusal !== null) return refusal;
    this.mine++;
    this.onChange?.(this.mine);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.lock();
      try {
        t[HEADER + slot * ENTRY] = 0;
        t[USED]!--;
      } finally {
        this.unlock();
      }
      this.mine--;
      this.onChange?.(this.mine);
    };
  }

  private lock(): void {
    lockTable(this.table);
  }

  private unlock(): void {
    unlockTable(this.table);
  }
}

// The holder of the lock runs a bounded scan with no I/O and no await, so waiting is short;
// Atomics.wait with a 1 ms bound keeps a waiter from burning its core meanwhile.
function lockTable(t: Int32Array): void {
  while (Atomics.compareExchange(t, LOCK, 0, 1) !== 0) {
    Atomics.wait(t, LOCK, 1, 1);
  }
}

function unlockTable(t: Int32Array): void {
  Atomics.store(t, LOCK, 0);
  Atomics.notify(t, LOCK, 1);
}

/** Frees every slot a worker that is gone still holds (main thread, after the worker's exit
 * and before its replacement takes the same index); returns how many. A worker that retires
 * releases its own slots as its calls finish, so this matters only for one that died
 * abruptly. A release function the dead worker never called dies with its thread. */
export function releaseWorkerSlots(buffer: SharedArrayBuffer, worker: number): number {
  const t = new Int32Array(buffer);
  const slots = (t.length - HEADER) / ENTRY;
  let freed = 0;
  lockTable(t);
  try {
    for (let i = 0; i < slots; i++) {
      const e = HEADER + i * ENTRY;
      if (t[e] !== worker + 1) continue;
      t[e] = 0;
      t[USED]!--;
      freed++;
    }
  } finally {
    unlockTable(t);
  }
  return freed;
}
