// Incremental multipart/form-data parser (RFC 2046 section 5.1.1, RFC 7578) fed by the
// request's chunks as uWS delivers them. Limits are checked on the bytes of the current write,
// so an oversized part or an endless header fails in the write that crosses the limit instead
// of after the whole body has been buffered. (Up to delimiter-length bytes at a chunk's end
// that could start a delimiter are held back, so a part that overflows by exactly such bytes
// fails in the next write, the first one that shows they are data.)
//
// The whole stream is treated as if it began with CRLF: then every delimiter, the first one
// included, is the same byte string `CRLF--boundary`, and the preamble is just bytes before it.

import { isUtf8 } from 'node:buffer';
import { isValidBoundary } from './content-type.ts';
import { MultipartError } from './errors.ts';
import { parsePartHeaders, type PartHeaders } from './headers.ts';
import { PartAccumulator, type ReceivedPart } from './part.ts';

export interface MultipartLimits {
  /** Largest accepted part body in bytes; a part of exactly this size is accepted. */
  maxPartBytes: number;
  maxParts: number;
  /**
   * Largest header block of one part, blank line included. A buffer of this size is allocated
   * once per parser, so it is meant to be a few KiB.
   */
  maxHeaderBytes: number;
}

export interface MultipartHandlers {
  /** Called once a part's headers are parsed, before its body; throwing aborts the parse. */
  onPartStart?(p: PartHeaders): void;
  /** Called when a part's closing delimiter has been seen; throwing aborts the parse. */
  onPartEnd?(p: ReceivedPart): void;
}

const enum State {
  Preamble,
  /** Just after a delimiter: `--` closes, otherwise padding then CRLF opens a part. */
  AfterDelimiter,
  AfterDelimiterDash,
  AfterDelimiterPadding,
  AfterDelimiterCr,
  Headers,
  Body,
  Epilogue,
  Ended,
}

const CR = 0x0d;
const LF = 0x0a;
const DASH = 0x2d;
const CRLF = Buffer.from('\r\n');
const CRLF2 = Buffer.from('\r\n\r\n');
const EMPTY = Buffer.alloc(0);

export class MultipartParser {
  private readonly delimiter: Buffer;
  private readonly limits: MultipartLimits;
  private readonly handlers: MultipartHandlers;
  private state = State.Preamble;
  /**
   * Bytes at the end of the previous write that are a proper prefix of the delimiter, held back
   * because the next write decides whether they are data or the start of a delimiter.
   */
  private tail: Buffer = CRLF;
  /** Room for the tail plus the head of the next chunk, where a split delimiter is looked for. */
  private readonly window: Buffer;
  /** Header block of the current part, behind a CRLF that stands for the delimiter line's own. */
  private headerBuf: Buffer | null = null;
  private headerLen = 0;
  private padding = 0;
  private current: PartAccumulator | null = null;
  private readonly parts: ReceivedPart[] = [];
  private partCount = 0;
  private failure: unknown = null;

  constructor(boundary: string, limits: MultipartLimits, handlers: MultipartHandlers = {}) {
    if (!isValidBoundary(boundary)) throw new RangeError('multipart boundary must be 1 to 70 RFC 2046 characters');
    for (const k of ['maxPartBytes', 'maxParts', 'maxHeaderBytes'] as const) {
      if (!Number.isSafeInteger(limits[k]) || limits[k] < 0) throw new RangeError(`${k} must be a non-negative integer`);
    }
    this.delimiter = Buffer.from(`\r\n--${boundary}`, 'latin1');
    this.limits = { ...limits };
    this.handlers = handlers;
    this.window = Buffer.allocUnsafe(2 * this.delimiter.length);
  }

  /**
   * Feeds the next chunk. The parser keeps no view into `chunk` once this returns (part data is
   * copied into the part, a held-back tail into its own buffer), so the caller may pass the
   * transport's own buffer, valid only for the duration of the call. After a throw the parser
   * is dead: every later call rethrows the same error.
   */
  write(chunk: Buffer): void {
    this.guard();
    try {
      let pos = 0;
      while (pos < chunk.length) {
        switch (this.state) {
          case State.Preamble:
          case State.Body:
            pos = this.scan(chunk, pos);
            break;
          case State.Headers:
            pos = this.readHeaders(chunk, pos);
            break;
          case State.Epilogue:
            return; // RFC 2046: the epilogue is to be ignored
          default:
            pos = this.afterDelimiter(chunk, pos);
        }
      }
    } catch (err) {
      this.failure = err;
      throw err;
    }
  }

  /** Declares the body complete and returns the parts in the order they arrived. */
  end(): ReceivedPart[] {
    this.guard();
    if (this.state !== State.Epilogue) {
      const name = this.current?.headers.name;
      const where = name === undefined ? '' : ` (inside part "${name}")`;
      this.failure = new MultipartError('malformed', `body ended before the closing boundary${where}`, name ?? null);
      throw this.failure;
    }
    this.state = State.Ended;
    return this.parts;
  }

  /** Gives back the storage of every part read so far, finished or not: for an upload that
   * failed or was abandoned, whose parts nobody will release. The parser is dead afterwards. */
  discard(): void {
    this.current?.discard();
    this.current = null;
    for (const part of this.parts) part.release?.();
    this.parts.length = 0;
    this.failure ??= new Error('MultipartParser discarded');
  }

  private guard(): void {
    if (this.failure !== null) throw this.failure;
    if (this.state === State.Ended) throw new Error('MultipartParser used after end()');
  }

  /** Looks for the delimiter from `pos`; returns where parsing continues in `chunk`. */
  private scan(chunk: Buffer, pos: number): number {
    const d = this.delimiter;
    if (this.tail.length > 0) {
      // Only a delimiter that starts inside the tail can be missed by searching the chunk alone,
      // and it ends within d.length - 1 bytes of the chunk: search just that small window.
      const tail = this.tail;
      const head = Math.min(chunk.length - pos, d.length - 1);
      tail.copy(this.window, 0);
      chunk.copy(this.window, tail.length, pos, pos + head);
      const win = this.window.subarray(0, tail.length + head);
      const at = win.indexOf(d);
      if (at >= 0) {
        this.tail = EMPTY;
        this.emit(tail.subarray(0, at));
        return this.onDelimiter(pos + at + d.length - tail.length);
      }
      if (head === chunk.length - pos) {
        // The chunk is too short to settle the tail; keep whatever could still begin a delimiter.
        const keep = this.heldFrom(win, 0);
        if (keep < tail.length) {
          this.emit(tail.subarray(0, keep));
          this.tail = Buffer.from(win.subarray(keep)); // spans two writes, so it needs its own copy
        } else {
          this.emit(tail);
          this.emit(chunk.subarray(pos, pos + keep - tail.length));
          this.tail = Buffer.from(chunk.subarray(pos + keep - tail.length));
        }
        return chunk.length;
      }
      this.tail = EMPTY;
      this.emit(tail);
    }
    const at = chunk.indexOf(d, pos);
    if (at >= 0) {
      this.emit(chunk.subarray(pos, at));
      return this.onDelimiter(at + d.length);
    }
    const keep = this.heldFrom(chunk, pos);
    this.emit(chunk.subarray(pos, keep));
    this.tail = Buffer.from(chunk.subarray(keep)); // shorter than the delimiter; outlives the chunk
    return chunk.length;
  }

  /** Start of the longest suffix of buf[from..] that is a proper prefix of the delimiter. */
  private heldFrom(buf: Buffer, from: number): number {
    const d = this.delimiter;
    // The delimiter's only CR is its first byte, so candidates are the CRs near the end.
    let i = buf.indexOf(CR, Math.max(from, buf.length - (d.length - 1)));
    while (i >= 0) {
      if (buf.compare(d, 0, buf.length - i, i, buf.length) === 0) return i;
      i = buf.indexOf(CR, i + 1);
    }
    return buf.length;
  }

  private emit(slice: Buffer): void {
    if (this.state === State.Body && slice.length > 0) this.current!.append(slice);
  }

  private onDelimiter(pos: number): number {
    if (this.state === State.Body) {
      const part = this.current!.finish();
      this.current = null;
      this.parts.push(part);
      this.handlers.onPartEnd?.(part);
    }
    this.state = State.AfterDelimiter;
    this.padding = 0;
    return pos;
  }

  /** Byte-wise: what follows a delimiter is at most a few bytes, so no search pays off here. */
  private afterDelimiter(chunk: Buffer, pos: number): number {
    while (pos < chunk.length) {
      const b = chunk[pos++]!;
      switch (this.state) {
        case State.AfterDelimiter:
          if (b === DASH) this.state = State.AfterDelimiterDash;
          else if (b === CR) this.state = State.AfterDelimiterCr;
          else if (b === 0x20 || b === 0x09) this.state = State.AfterDelimiterPadding;
          else throw new MultipartError('malformed', 'boundary delimiter followed by other data');
          break;
        case State.AfterDelimiterDash:
          if (b !== DASH) throw new MultipartError('malformed', 'boundary delimiter followed by a single "-"');
          this.state = State.Epilogue;
          return pos;
        case State.AfterDelimiterPadding:
          if (b === CR) this.state = State.AfterDelimiterCr;
          else if (b !== 0x20 && b !== 0x09) throw new MultipartError('malformed', 'boundary line has trailing data');
          else if (++this.padding > this.limits.maxHeaderBytes) {
            throw new MultipartError('header_too_large', 'boundary line padding exceeds the header limit');
          }
          break;
        case State.AfterDelimiterCr:
          if (b !== LF) throw new MultipartError('malformed', 'boundary line not terminated by CRLF');
          if (++this.partCount > this.limits.maxParts) {
            throw new MultipartError('too_many_parts', `more than ${this.limits.maxParts} parts`);
          }
          this.state = State.Headers;
          this.headerLen = CRLF.length;
          return pos;
      }
    }
    return pos;
  }

  private readHeaders(chunk: Buffer, pos: number): number {
    if (this.headerBuf === null) {
      this.headerBuf = Buffer.allocUnsafe(CRLF.length + this.limits.maxHeaderBytes);
      CRLF.copy(this.headerBuf, 0);
    }
    const buf = this.headerBuf;
    const before = this.headerLen;
    const n = Math.min(buf.length - before, chunk.length - pos);
    chunk.copy(buf, before, pos, pos + n);
    this.headerLen += n;
    const at = buf.subarray(0, this.headerLen).indexOf(CRLF2, Math.max(0, before - 3));
    if (at < 0) {
      if (this.headerLen === buf.length) {
        throw new MultipartError('header_too_large', `part ${this.partCount} has more than ${this.limits.maxHeaderBytes} header bytes`);
      }
      return pos + n;
    }
    const headers = headersOf(buf.subarray(CRLF.length, Math.max(CRLF.length, at)), this.partCount);
    this.handlers.onPartStart?.(headers);
    this.current = new PartAccumulator(headers, this.limits.maxPartBytes);
    this.state = State.Body;
    return pos + (at + CRLF2.length - before);
  }
}

/** Header lines are UTF-8 as WHATWG FormData encodes field and file names. A part name that
 * is not UTF-8 is refused: no image.part could name it (the metadata is strict UTF-8 text), and
 * decoded to U+FFFD it answered a confusing part_missing + part_unreferenced pair (review 3,
 * F6). Elsewhere (a file name, which identifies nothing) invalid bytes still become U+FFFD. */
function headersOf(block: Buffer, partNumber: number): PartHeaders {
  if (isUtf8(block)) return parsePartHeaders(block.toString('utf8'));
  // read one character per byte to find the name's own bytes (quotes, backslashes and
  // separators are ASCII, and no byte of a UTF-8 multi-byte sequence is)
  const { name } = parsePartHeaders(block.toString('latin1'));
  if (!isUtf8(Buffer.from(name, 'latin1'))) {
    throw new MultipartError('malformed', `part ${partNumber} has a name (Content-Disposition name=) that is not valid UTF-8; part names are UTF-8 text, as image.part in the metadata is`);
  }
  return parsePartHeaders(block.toString('utf8'));
}
