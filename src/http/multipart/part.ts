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

export class PartAccumulator {
  readonly headers: PartHeaders;
  private readonly maxBytes: number;
  private readonly hash: Hash = createHash('sha256');
  private readonly slices: Buffer[] = [];
  private size = 0;

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
    this.hash.update(slice);
    this.slices.push(slice);
  }

  finish(): ReceivedPart {
    return new BufferedPart(this.headers, this.size, this.hash.digest('hex'), this.slices);
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
      const out = Buffer.from(new ArrayBuffer(this.size));
      let at = 0;
      for (const s of this.slices) at += s.copy(out, at);
      this.joined = out;
      // The slices pin whole 64 KiB request chunks; let them go once the copy exists.
      this.slices = [];
    }
    return this.joined;
  }
}
