// One part's bytes as they arrive: hashed slice by slice and kept as views into the written
// chunks, so nothing is copied until a consumer asks for the contiguous bytes.

import { createHash, type Hash } from 'node:crypto';
import { MultipartError } from './errors.ts';
import type { PartHeaders } from './headers.ts';

export interface ReceivedPart {
  name: string;
  filename: string | null;
  contentType: string | null;
  size: number;
  /** Lowercase hex SHA-256 of exactly the part's bytes. */
  sha256: string;
  /**
   * The part's bytes, concatenated on first call and cached. The Buffer owns its ArrayBuffer
   * outright (offset 0, not the shared Buffer pool) so it can be transferred to a worker.
   */
  data(): Buffer;
}

// A client that trickles its upload (or a proxy that forwards tiny segments) would otherwise
// leave one Buffer view, about a hundred bytes of heap, per few bytes of data: 32 MiB sent a byte
// at a time would pin gigabytes. Small slices are therefore copied into a staging block, and
// hashed a block at a time for the same reason. Blocks start small and double: a part read in
// 64 KiB chunks stages only its first and last slice, a trickled one soon uses the largest block.
const COALESCE_BELOW = 4 * 1024;
const FIRST_STAGE_BYTES = 512;
const MAX_STAGE_BYTES = 64 * 1024;

export class PartAccumulator {
  readonly headers: PartHeaders;
  private readonly maxBytes: number;
  private readonly hash: Hash = createHash('sha256');
  private readonly slices: Buffer[] = [];
  private size = 0;
  /** Free room of the current staging block; bytes before `staged` await flushing. */
  private stage: Buffer | null = null;
  private staged = 0;
  private nextStageBytes = FIRST_STAGE_BYTES;

  constructor(headers: PartHeaders, maxBytes: number) {
    this.headers = headers;
    this.maxBytes = maxBytes;
  }

  append(slice: Buffer): void {
    if (slice.length === 0) return;
    if (this.size + slice.length > this.maxBytes) {
      throw new MultipartError(
        'part_too_large',
        `part "${this.headers.name}" exceeds the limit of ${this.maxBytes} bytes`,
        this.headers.name,
      );
    }
    this.size += slice.length;
    if (slice.length >= COALESCE_BELOW) {
      this.flushStage();
      this.hash.update(slice);
      this.slices.push(slice);
      return;
    }
    if (this.stage === null || this.staged + slice.length > this.stage.length) {
      this.flushStage();
      this.stage = Buffer.allocUnsafe(Math.max(this.nextStageBytes, slice.length));
      this.nextStageBytes = Math.min(2 * this.nextStageBytes, MAX_STAGE_BYTES);
    }
    this.staged += slice.copy(this.stage, this.staged);
  }

  finish(): ReceivedPart {
    this.flushStage();
    return new BufferedPart(this.headers, this.size, this.hash.digest('hex'), this.slices);
  }

  private flushStage(): void {
    if (this.stage === null || this.staged === 0) return;
    const filled = this.stage.subarray(0, this.staged);
    this.hash.update(filled);
    this.slices.push(filled);
    // Keep the block's unused room for the next small slices rather than allocating anew.
    this.stage = this.stage.length > this.staged ? this.stage.subarray(this.staged) : null;
    this.staged = 0;
  }
}

class BufferedPart implements ReceivedPart {
  readonly name: string;
  readonly filename: string | null;
  readonly contentType: string | null;
  readonly size: number;
  readonly sha256: string;
  private slices: Buffer[];
  private joined: Buffer | null = null;

  constructor(headers: PartHeaders, size: number, sha256: string, slices: Buffer[]) {
    this.name = headers.name;
    this.filename = headers.filename;
    this.contentType = headers.contentType;
    this.size = size;
    this.sha256 = sha256;
    this.slices = slices;
  }

  data(): Buffer {
    if (this.joined === null) {
      // allocUnsafeSlow: an ArrayBuffer of exactly this size, never a pool slab, and no zero-fill
      // since every byte is overwritten below.
      const out = Buffer.allocUnsafeSlow(this.size);
      let at = 0;
      for (const s of this.slices) at += s.copy(out, at);
      this.joined = out;
      // The slices pin whole 64 KiB request chunks; let them go once the copy exists.
      this.slices = [];
    }
    return this.joined;
  }
}
