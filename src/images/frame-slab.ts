// Upload storage that is mapped once and reused: a thread's arena of fixed-size slots in one
// SharedArrayBuffer, for the bytes of multipart parts (an rgb8 part's bytes are its frame's
// pixels as they are).
//
// Why: a part in a buffer of its own cost the API thread, per part, a mapping (V8 reserves a
// resizable buffer's whole limit and commits pages as it grows), a page fault for every 4 KiB
// first touched, a plain copy for the inference thread (rgb8), and, when that thread freed
// the transferred pixels, an unmapping that interrupts the other CPU to flush its TLB. At
// about 600 rgb8 calls a second that was over a fifth of an API thread's time (perf, docs/capacity.md
// "Upload storage"). A slot's pages stay mapped and warm from one call to the next (LIFO reuse), and
// a shared buffer reaches the inference threads by reference: no transfer, no copy.
//
// A slab belongs to one thread (the one that takes and gives back slots), so it needs no
// locking; other threads only read slot views they were handed. When every slot is taken a
// part falls back to a buffer of its own, so the slab bounds its memory, never a request.

/** Slot size: an rgb8 frame (307200 bytes) fits, and so do the PNGs this service sees. */
export const SLOT_BYTES = 320 * 1024;
/** Slots per thread: the image parts of the 2 verify calls an API worker serves at once
 * (interface-spec.md Limits), each up to a 32-capture batch. An image part's slot holds its
 * frame's pixels until the call's inference is over (rgb8 as it arrived, PNG decoded over its
 * bytes), so with 32 slots the second of two concurrent batches found none free and each of
 * its parts and frames took memory of its own: at WORKERS=2 a batch32 capture then cost more
 * CPU than before PNGs were decoded into their slots, and 12-31 % less with 64 slots
 * (bench/results/png-decode-cpu.md). 64 slots reserve 20 MiB of address space; a slot's pages
 * become resident only once a part has used them, and stay so. */
export const THREAD_SLAB_SLOTS = 64;

/** A slot on loan: `bytes` is the whole slot. give() is idempotent. */
export interface SlabSlot {
  readonly bytes: Uint8Array;
  /** Its holder has written the slot's bytes [0, end): they are resident from now on. */
  wrote(end: number): void;
  give(): void;
}

/** The page a slot's bytes become resident by: Linux's 4 KiB base page (x86-64, most arm64
 * kernels; a 16 or 64 KiB arm64 kernel, or transparent huge pages set to `always`, makes the
 * count below understate). */
const PAGE_BYTES = 4096;

/** every slab's memory -> its slab (slotOf, slotWritten) */
const slabs = new WeakMap<SharedArrayBuffer, FrameSlab>();

export class FrameSlab {
  private readonly memory: SharedArrayBuffer;
  /** free slot indexes, most recently given back last (taken first: its pages are warm) */
  private readonly free: number[] = [];
  /** per slot, the bytes from its start ever written, to the page: what the kernel keeps resident
   * of it (a written page stays so until the process ends) */
  private readonly written: Uint32Array;

  constructor(readonly slots: number, readonly slotBytes: number = SLOT_BYTES) {
    if (!Number.isSafeInteger(slots) || slots < 0 || !Number.isSafeInteger(slotBytes) || slotBytes <= 0) {
      throw new RangeError('a slab needs a whole number of slots of a positive size');
    }
    this.memory = new SharedArrayBuffer(slots * slotBytes);
    this.written = new Uint32Array(slots);
    slabs.set(this.memory, this);
    for (let i = slots - 1; i >= 0; i--) this.free.push(i);
  }

  /** A free slot, or null when all are on loan (the caller uses memory of its own). */
  take(): SlabSlot | null {
    const index = this.free.pop();
    if (index === undefined) return null;
    let given = false;
    return {
      bytes: new Uint8Array(this.memory, index * this.slotBytes, this.slotBytes),
      wrote: (end) => this.wrote(index, end),
      give: () => {
        if (given) return;
        given = true;
        this.free.push(index);
      },
    };
  }

  /** slots on loan now */
  get taken(): number {
    return this.slots - this.free.length;
  }

  /** Bytes of this slab that have been written, and so are resident, to the page (to within a
   * page a slot: the memory itself need not start on a page). What a slab costs in RSS is its
   * high-water mark, not its size: it grows as deeper slots see their first parts (a burst of
   * batches) and stops at `slots` x `slotBytes`. The soak subtracts it before judging whether
   * memory grows without bound (bench/soak/long.ts). */
  get residentBytes(): number {
    // summed when read (a scrape), not kept as a running total beside `written`
    return this.written.reduce((a, b) => a + b, 0);
  }

  /** Slot `index` had its bytes [0, end) written. */
  wrote(index: number, end: number): void {
    if (!(index >= 0 && index < this.slots)) return;
    const pages = Math.min(this.slotBytes, Math.ceil(end / PAGE_BYTES) * PAGE_BYTES);
    if (pages > this.written[index]!) this.written[index] = pages;
  }
}

/** Pixels in shared memory: an rgb8 part in its API worker's slot, which every hop posts as
 * it is and the inference thread reads in place; never in a transfer list. */
export function isSharedPixels(pixels: Uint8Array): boolean {
  return pixels.buffer instanceof SharedArrayBuffer;
}

/** The whole slot that `view` starts at, when it starts at one (a part written into its slot,
 * src/http/multipart/part.ts); else null. For a PNG part whose bytes are not needed once
 * decoded: its pixels go over them, into the slot the part already holds, and reach the
 * inference thread by reference like an rgb8 part's. Only the slot's holder may write there. */
export function slotOf(view: Uint8Array): Uint8Array | null {
  const at = locate(view);
  return at && new Uint8Array(view.buffer, view.byteOffset, at.slab.slotBytes);
}

/** Notes that `view`'s first `end` bytes were written, when `view` starts at a slot (slotOf):
 * for a writer that holds the slot's bytes but not the SlabSlot (a PNG decoded over its part). */
export function slotWritten(view: Uint8Array, end: number): void {
  const at = locate(view);
  at?.slab.wrote(at.index, end);
}

/** The slab and slot `view` starts at, if it starts at one. */
function locate(view: Uint8Array): { slab: FrameSlab; index: number } | null {
  const buffer = view.buffer;
  const slab = buffer instanceof SharedArrayBuffer ? slabs.get(buffer) : undefined;
  if (slab === undefined || view.byteOffset % slab.slotBytes !== 0) return null;
  const index = view.byteOffset / slab.slotBytes;
  return index < slab.slots ? { slab, index } : null;
}

let threadSlab: FrameSlab | undefined;

/** This thread's slab, created on first use (a thread that never receives an upload, such as
 * an inference thread, reserves nothing). */
export function frameSlab(): FrameSlab {
  threadSlab ??= new FrameSlab(THREAD_SLAB_SLOTS);
  return threadSlab;
}
