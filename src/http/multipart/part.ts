// One part's bytes as they arrive, copied once, straight from the transport's chunk into the
// part's own storage, and hashed a block at a time.
//
// Why one copy: the transport's chunk (uWS onData) is only valid during its callback. Keeping a
// copy of every chunk and joining a part's slices later copied every body byte twice, and with
// large allocations mapped on their own (README "Memory") each copy also faults its pages in
// anew. The storage is a resizable ArrayBuffer reserved up to the part limit and committed as
// the part grows, so it never moves and the finished part is exactly its bytes: an ArrayBuffer
// of its own (offset 0) that can be transferred to another thread.

import { createHash, type Hash } from 'node:crypto';
import { MultipartError } from './errors.ts';
import type { ReceivedPart } from '../../verify/ports.ts';
import type { PartHeaders } from './headers.ts';

// What a finished part is belongs to the verify use case (its port); this reader provides it.
export type { ReceivedPart } from '../../verify/ports.ts';

// Growth by doubling keeps a trickled part (a byte per write) to a few dozen resizes, and the
// hash runs over blocks, not over each few-byte slice (one hash update per byte would cost more
// than the bytes).
const FIRST_BYTES = 16 * 1024;
const HASH_BLOCK_BYTES = 64 * 1024;

type ResizableArrayBuffer = ArrayBuffer & { resize(byteLength: number): void };

export class PartAccumulator {
  readonly headers: PartHeaders;
  private readonly maxBytes: number;
  private readonly hash: Hash = createHash('sha256');
  private readonly store: ResizableArrayBuffer;
  private size = 0;
  private hashed = 0;

  constructor(headers: PartHeaders, maxBytes: number) {
    this.headers = headers;
    this.maxBytes = maxBytes;
    this.store = new (ArrayBuffer as unknown as new (n: number, o: { maxByteLength: number }) => ResizableArrayBuffer)(0, { maxByteLength: maxBytes });
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
    if (end > this.store.byteLength) this.store.resize(Math.min(this.maxBytes, Math.max(end, FIRST_BYTES, 2 * this.store.byteLength)));
    new Uint8Array(this.store, this.size, slice.length).set(slice);
    this.size = end;
    if (this.size - this.hashed >= HASH_BLOCK_BYTES) this.hashUpTo(this.size);
  }

  finish(): ReceivedPart {
    this.hashUpTo(this.size);
    this.store.resize(this.size);
    return new BufferedPart(this.headers, this.size, this.hash.digest('hex'), this.store);
  }

  private hashUpTo(end: number): void {
    if (end > this.hashed) this.hash.update(new Uint8Array(this.store, this.hashed, end - this.hashed));
    this.hashed = end;
  }
}

class BufferedPart implements ReceivedPart {
  readonly name: string;
  readonly filename: string | null;
  readonly contentType: string | null;

  private readonly bytes: Buffer;

  constructor(
    headers: PartHeaders,
    readonly size: number,
    readonly sha256: string,
    private readonly store: ResizableArrayBuffer,
  ) {
    this.name = headers.name;
    this.filename = headers.filename;
    this.contentType = headers.contentType;
    this.bytes = Buffer.from(store, 0, size);
  }

  data(): Buffer {
    return this.store.byteLength === 0 ? Buffer.alloc(0) : this.bytes;
  }

  // Shrinking a resizable buffer to nothing hands its pages back at once (and takes them off
  // V8's external-memory count), where a dropped part would hold them until a full GC; with
  // 64 uploads in flight that was the difference between parts freed as calls end and parts
  // piling up between collections.
  release(): void {
    // a transferred (detached) buffer has nothing left to give back
    if (this.store.byteLength > 0) this.store.resize(0);
  }
}
