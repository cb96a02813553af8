import { isIPv6 } from 'node:net';

/** Verify capacity of the whole host: the spec's "2 concurrent calls per API worker" pooled
 * into VERIFY_SLOTS slots (2 x WORKERS when only WORKERS is set) that every API worker draws
 * from, so that no call is refused while
 * any slot of the host is free (the kernel's SO_REUSEPORT hash spreads connections unevenly).
 * A slot is taken before the body is read and held through upload, preparation and
 * inference; when none is free the call is refused at once (503), never queued.
 *
 * Fair shares (security issue 29): a caller is a token and a client address, the address
 * counted by network (an IPv4 /32, an IPv6 /64: one host's /64 is one caller, however many
 * addresses it walks through). A caller's load is the larger of the slots its token holds and
 * the slots its address holds. While a slot is free, anyone gets it, so a lone tenant can use
 * the whole host. When every slot is taken, a newcomer whose load would still be below the
 * load of some holder after the swap (holder load > newcomer load + 1) takes that holder's
 * slot: of the callers with the highest load, the upload that has held its slot longest
 * (trickling uploads are the long-lived ones) is revoked and answered 503 server_busy, charged
 * nothing. Only calls still uploading are revoked; a call in preparation or inference keeps its
 * slot. The swap strictly lowers the larger load and never raises it past the one it lowered,
 * so the table moves toward max-min fair shares and two callers at their share never trade a
 * slot back and forth; a caller at its share asking for more is the one refused.
 *
 * The table lives in a SharedArrayBuffer created by the main thread and handed to every API
 * worker. Each slot records who holds it (worker, client network, token), when (a ticket from a
 * host-wide counter) and whether the call is still uploading, so the caps, the loads and the
 * choice of a slot to revoke are all decided in one critical section: counts kept beside the
 * table could be raced past their caps by two workers at once. The section is a scan of at most
 * 128 entries (the load of each holder: 128 x 128 comparisons at worst, only when the host is
 * full), cheaper than a message round trip to a coordinator thread would be. A revoked slot
 * passes to the newcomer at once; its former holder's worker sees the slot's ticket change
 * (polled every REVOKE_POLL_MS while it has uploads in flight) and ends that upload. */

const LOCK = 0;
const USED = 1;
/** ticket counter: each admission takes the next value */
const SEQ = 2;
/** revocation counter: moves each time a slot is taken from its holder */
const REVOKED = 3;
const HEADER = 4;
// per slot: holder worker + 1 (0 = free), address hash (2 words), token hash (2 words), ticket,
// phase
const ENTRY = 7;
const OWNER = 0;
const TICKET = 5;
const PHASE = 6;
const UPLOADING = 1;
const PROCESSING = 2;

/** How often a worker with uploads in flight looks whether one of its slots was revoked: the
 * newcomer already has the slot, so this only bounds how long the revoked upload runs on. */
const REVOKE_POLL_MS = 50;

export interface AdmissionLimits {
  slots: number;
  /** hard cap per client network (IPv4 address, IPv6 /64), whatever the contention */
  perAddress: number;
  /** hard cap per token, whatever the contention */
  perToken: number;
}

export type AdmissionRefusal = 'host' | 'address' | 'token';

/** A slot held by one call. */
export interface AdmissionSlot {
  /** gives the slot back (idempotent; a no-op once the slot was revoked) */
  release(): void;
  /** the upload is complete: from now on the slot cannot be revoked. False when it already
   * was (the call must then be answered as refused). */
  uploaded(): boolean;
}

/** Creates the shared table (main thread). */
export function createAdmissionTable(slots: number): SharedArrayBuffer {
  return new SharedArrayBuffer((HEADER + slots * ENTRY) * Int32Array.BYTES_PER_ELEMENT);
}

/** The network a client address is counted by: an IPv6 address by its /64 (what one host or
 * one customer line is given, and what a privacy-extension host rotates within), anything
 * else as it is. */
export function addressKey(address: string): string {
  if (!isIPv6(address)) return address;
  const bare = address.split('%')[0]!.toLowerCase();
  const [head, tail] = bare.includes('::') ? bare.split('::') as [string, string] : [bare, null];
  const left = head === '' ? [] : head.split(':');
  let groups: string[];
  if (tail === null) groups = left;
  else {
    const right = tail === '' ? [] : tail.split(':');
    // an embedded IPv4 tail (::ffff:1.2.3.4, 64:ff9b::1.2.3.4) stands for two groups
    const rightGroups = right.length > 0 && right[right.length - 1]!.includes('.') ? right.length + 1 : right.length;
    groups = [...left, ...Array<string>(Math.max(0, 8 - left.length - rightGroups)).fill('0'), ...right];
  }
  return `${groups.slice(0, 4).map((g) => g.replace(/^0+(?=.)/, '')).join(':')}::/64`;
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

interface Held {
  slot: number;
  ticket: number;
  uploading: boolean;
  /** still counted in this worker's gauge */
  counted: boolean;
  onRevoke: (() => void) | undefined;
}

export class HostAdmission {
  private readonly table: Int32Array;
  private readonly slots: number;
  private readonly key = new Int32Array(4);
  /** slots this worker holds, for the per-worker gauge (the main thread sums the gauges) */
  private mine = 0;
  /** this worker's calls that are still uploading, which another worker may revoke */
  private readonly uploading = new Set<Held>();
  private poll: NodeJS.Timeout | null = null;
  // per-slot loads, reused by every contended admission
  private readonly tokenLoad: Int32Array;
  private readonly addressLoad: Int32Array;

  constructor(
    buffer: SharedArrayBuffer,
    private readonly worker: number,
    private readonly limits: AdmissionLimits,
    private readonly onChange?: (heldByThisWorker: number) => void,
  ) {
    this.table = new Int32Array(buffer);
    this.slots = (this.table.length - HEADER) / ENTRY;
    if (limits.slots !== this.slots) throw new RangeError(`admission table has ${this.slots} slots, config says ${limits.slots}`);
    this.tokenLoad = new Int32Array(this.slots);
    this.addressLoad = new Int32Array(this.slots);
  }

  // A worker that dies with slots held is replaced by the main thread, which first frees its
  // entries (releaseWorkerSlots): no slot outlives its holder.

  /** Slots taken on the whole host. */
  inUse(): number {
    return Atomics.load(this.table, USED);
  }

  /** Slots taken from their holders so far, on the whole host. */
  revocations(): number {
    return Atomics.load(this.table, REVOKED);
  }

  /** Returns an idempotent release function, or why the call is refused (the call's slot is
   * never revoked: nobody would be told). */
  tryAcquire(address: string, tokenId: string): (() => void) | AdmissionRefusal {
    const slot = this.acquire(address, tokenId);
    return typeof slot === 'string' ? slot : () => slot.release();
  }

  /** Takes a slot for a call that is about to upload, or says why not. With `onRevoke`, the
   * slot may be revoked in favour of a caller below its fair share until `uploaded()`;
   * `onRevoke` is then called once, on this worker's thread, to end the upload. */
  acquire(address: string, tokenId: string, onRevoke?: () => void): AdmissionSlot | AdmissionRefusal {
    const t = this.table;
    const k = this.key;
    hash2(addressKey(address), k, 0);
    hash2(tokenId, k, 2);
    let slot = -1;
    let refusal: AdmissionRefusal | null = null;
    let ticket = 0;
    let revoked = false;
    this.lock();
    try {
      let sameAddress = 0;
      let sameToken = 0;
      for (let i = 0; i < this.slots; i++) {
        const e = HEADER + i * ENTRY;
        if (t[e + OWNER] === 0) {
          if (slot < 0) slot = i;
          continue;
        }
        if (t[e + 1] === k[0] && t[e + 2] === k[1]) sameAddress++;
        if (t[e + 3] === k[2] && t[e + 4] === k[3]) sameToken++;
      }
      if (sameAddress >= this.limits.perAddress) refusal = 'address';
      else if (sameToken >= this.limits.perToken) refusal = 'token';
      else if (slot < 0) {
        slot = this.victim(Math.max(sameAddress, sameToken));
        if (slot < 0) refusal = 'host';
        else revoked = true;
      }
      if (refusal === null) {
        const e = HEADER + slot * ENTRY;
        ticket = t[SEQ] = (t[SEQ]! + 1) | 0;
        t[e + 1] = k[0]!;
        t[e + 2] = k[1]!;
        t[e + 3] = k[2]!;
        t[e + 4] = k[3]!;
        t[e + TICKET] = ticket;
        t[e + PHASE] = onRevoke ? UPLOADING : PROCESSING;
        t[e + OWNER] = this.worker + 1;
        // a revoked slot changes hands: the count of slots in use stays
        if (revoked) Atomics.add(t, REVOKED, 1);
        else t[USED]!++;
      }
    } finally {
      this.unlock();
    }
    if (refusal !== null) return refusal;
    this.mine++;
    this.onChange?.(this.mine);
    const held: Held = { slot, ticket, uploading: onRevoke !== undefined, counted: true, onRevoke };
    if (held.uploading) this.watch(held);
    // the revocation may have been of one of this worker's own uploads
    if (revoked) this.checkRevoked();
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        this.uploading.delete(held);
        this.lock();
        try {
          const e = HEADER + slot * ENTRY;
          if (t[e + TICKET] === ticket && t[e + OWNER] === this.worker + 1) {
            t[e + OWNER] = 0;
            t[USED]!--;
          }
        } finally {
          this.unlock();
        }
        this.uncount(held);
      },
      uploaded: () => {
        if (!held.uploading) return !released && held.counted;
        this.uploading.delete(held);
        held.uploading = false;
        let mine: boolean;
        this.lock();
        try {
          const e = HEADER + slot * ENTRY;
          mine = t[e + TICKET] === ticket && t[e + OWNER] === this.worker + 1;
          if (mine) t[e + PHASE] = PROCESSING;
        } finally {
          this.unlock();
        }
        if (!mine) this.uncount(held);
        return mine;
      },
    };
  }

  /** Under the lock, with every slot taken: the slot to give to a newcomer whose load is
   * `load`, or -1. The holders' loads are counted over the whole table; only uploads can be
   * revoked; of the highest load above load + 1, the oldest upload. */
  private victim(load: number): number {
    const t = this.table;
    const tl = this.tokenLoad;
    const al = this.addressLoad;
    tl.fill(0);
    al.fill(0);
    for (let i = 0; i < this.slots; i++) {
      const ei = HEADER + i * ENTRY;
      if (t[ei + OWNER] === 0) continue;
      for (let j = i; j < this.slots; j++) {
        const ej = HEADER + j * ENTRY;
        if (t[ej + OWNER] === 0) continue;
        if (t[ei + 1] === t[ej + 1] && t[ei + 2] === t[ej + 2]) {
          al[i]!++;
          if (j !== i) al[j]!++;
        }
        if (t[ei + 3] === t[ej + 3] && t[ei + 4] === t[ej + 4]) {
          tl[i]!++;
          if (j !== i) tl[j]!++;
        }
      }
    }
    const seq = t[SEQ]!;
    let best = -1;
    let bestLoad = load + 1;
    let bestAge = -1;
    for (let i = 0; i < this.slots; i++) {
      const e = HEADER + i * ENTRY;
      if (t[e + OWNER] === 0 || t[e + PHASE] !== UPLOADING) continue;
      const l = Math.max(tl[i]!, al[i]!);
      // tickets wrap after 2^32 admissions; the difference is right across the wrap
      const age = (seq - t[e + TICKET]!) >>> 0;
      if (l > bestLoad || (l === bestLoad && best >= 0 && age > bestAge)) {
        best = i;
        bestLoad = l;
        bestAge = age;
      }
    }
    return best;
  }

  private watch(held: Held): void {
    this.uploading.add(held);
    // unref: a pending look must not keep a worker alive at shutdown
    this.poll ??= setInterval(() => this.checkRevoked(), REVOKE_POLL_MS).unref();
  }

  /** Ends this worker's uploads whose slots were revoked. A look is one atomic read per
   * upload in flight on this worker, so it is taken whole each time rather than keyed to the
   * revocation counter (which could move between an admission and its first look). */
  private checkRevoked(): void {
    const lost: Held[] = [];
    for (const h of this.uploading) {
      // a ticket is only ever written under the lock; a stale read is caught at the next look
      if (Atomics.load(this.table, HEADER + h.slot * ENTRY + TICKET) !== h.ticket) lost.push(h);
    }
    for (const h of lost) {
      this.uploading.delete(h);
      h.uploading = false;
      this.uncount(h);
      h.onRevoke?.();
    }
    if (this.uploading.size === 0 && this.poll) {
      clearInterval(this.poll);
      this.poll = null;
    }
  }

  private uncount(held: Held): void {
    if (!held.counted) return;
    held.counted = false;
    this.mine--;
    this.onChange?.(this.mine);
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
