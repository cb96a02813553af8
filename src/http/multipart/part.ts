// One part's bytes as they arrive, copied once, straight from the transport's chunk into the
// part's own storage, and hashed a block at a time.
//
// Why one copy: the transport's chunk (uWS onData) is only valid during its callback. Keeping a
// copy of every chunk and joining a part's slices later copied every body byte twice, and with
// large allocations mapped on their own (docs/capacity.md, "Memory") each copy also faults its pages in
// anew. The storage is a slot of the thread's frame slab (src/images/frame-slab.ts: mapped
// once, reused, readable by the inference threads without a transfer) while one is free and
// the part fits in it. Otherwise, or once the part outgrows its slot, it is a resizable
// ArrayBuffer reserved up to the part limit and committed as the part grows, so it never
// moves and the finished part is exactly its bytes.

import { createHash, type Hash } from 'node:crypto';
import { frameSlab, type FrameSlab, type SlabSlot } from '../../images/index.ts';
import { MultipartError } from './errors.ts';
import type { ReceivedPart } from '../../verify/index.ts';
import type { PartHeaders } from './headers.ts';

// What a finished part is belongs to the verify use case (its port); this reader provides it.
export type { ReceivedPart } from '../../verify/index.ts';

// Growth by doubling keeps a trickled part (a byte per write) to a few dozen resizes, and the
// hash runs over blocks, not over each few-byte slice (one hash update per byte would cost more
// than the bytes).
const FIRST_BYTES = 16 * 1024;
const HASH_BLOCK_BYTES = 64 * 1024;
const EMPTY = Buffer.alloc(0);

type ResizableArrayBuffer = ArrayBuffer & { resize(byteLength: number): void };

export class PartAccumulator {
  readonly headers: PartHeaders;
  private readonly maxBytes: number;
  private readonly hash: Hash = createHash('sha256');
  /** the slab slot holding the bytes, until the part outgrows it */
  private slot: SlabSlot | null;
  /** the part's own buffer when it has no slot */
  private store: ResizableArrayBuffer | null = null;
  /** where the bytes are: the slot's or the store's first byte */
  private bytes: Uint8Array;
  private size = 0;
  private hashed = 0;

  constructor(headers: PartHeaders, maxBytes: number, slab: FrameSlab = frameSlab()) {
    this.headers = headers;
    this.maxBytes = maxBytes;
    this.slot = maxBytes > 0 ? slab.take() : null;
    this.bytes = this.slot ? this.slot.bytes : this.ownStore(0);
  }

  /** Copies `slice` (a view the caller may reuse once this returns). */
  append(slice: Uint8Array): void {
    if (slice.length === 0) return;
    const end = this.size + slice.length;
    if (end > this.maxBytes) {
      throw new MultipartError(
        'part_too_large',
        `part "${this.headers.name}" exceeds the limit of ${this.maxBytes} bytes`,
        this.headers.name,
      );
    }
    if (end > this.bytes.length) this.grow(end);
    this.bytes.set(slice, this.size);
    this.slot?.wrote(end);
    this.size = end;
    if (this.size - this.hashed >= HASH_BLOCK_BYTES) this.hashUpTo(this.size);
  }

  finish(): ReceivedPart {
    this.hashUpTo(this.size);
    const sha256 = this.hash.digest('hex');
    if (this.slot) {
      const slot = this.slot;
      return new BufferedPart(this.headers, this.size, sha256, Buffer.from(slot.bytes.buffer, slot.bytes.byteOffset, this.size), slot.give);
    }
    const store = this.store!;
    store.resize(this.size);
    // Shrinking a resizable buffer to nothing hands its pages back at once (and takes them off
    // V8's external-memory count), where a dropped part would hold them until a full GC; with
    // 64 uploads in flight that was the difference between parts freed as calls end and parts
    // piling up between collections.
    return new BufferedPart(this.headers, this.size, sha256, Buffer.from(store, 0, this.size), () => giveBackOwn(store));
  }

  /** Gives the storage of an unfinished part back (an upload that failed or was abandoned). */
  discard(): void {
    this.slot?.give();
    this.slot = null;
    if (this.store) giveBackOwn(this.store);
  }

  private grow(end: number): void {
    const capacity = Math.min(this.maxBytes, Math.max(end, FIRST_BYTES, 2 * this.bytes.length));
    if (this.slot) {
      // outgrew its slot: move to a buffer of its own, once
      const bytes = this.ownStore(capacity);
      bytes.set(this.slot.bytes.subarray(0, this.size));
      this.slot.give();
      this.slot = null;
      this.bytes = bytes;
      return;
    }
    this.store!.resize(capacity);
    this.bytes = new Uint8Array(this.store!);
  }

  private ownStore(bytes: number): Uint8Array {
    this.store = new (ArrayBuffer as unknown as new (n: number, o: { maxByteLength: number }) => ResizableArrayBuffer)(bytes, { maxByteLength: this.maxBytes });
    return new Uint8Array(this.store);
  }

  private hashUpTo(end: number): void {
    if (end > this.hashed) this.hash.update(this.bytes.subarray(this.hashed, end));
    this.hashed = end;
  }
}

// a transferred (detached) buffer has nothing left to give back
function giveBackOwn(store: ResizableArrayBuffer): void {
  if (store.byteLength > 0) store.resize(0);
}

class BufferedPart implements ReceivedPart {
  readonly name: string;
  readonly filename: string | null;
  readonly contentType: string | null;
  private released = false;

  constructor(
    headers: PartHeaders,
    readonly size: number,
    readonly sha256: string,
    private readonly bytes: Buffer,
    private readonly giveBack: () => void,
  ) {
    this.name = headers.name;
    this.filename = headers.filename;
    this.contentType = headers.contentType;
  }

  data(): Buffer {
    return this.released || this.size === 0 ? EMPTY : this.bytes;
  }

  release(): void {
    if (this.released) return;
    this.released = true;
    this.giveBack();
  }
}
