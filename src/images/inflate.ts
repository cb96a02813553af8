// The zlib stage of the PNG decoder: one native inflater per thread, reused for every image,
// writing into memory the caller gives (the decoder's scratch, reused from image to image).
//
// Why not zlib.inflateSync: every call builds a whole Transform stream and a new native zlib
// context (its 32 KiB window is mapped and unmapped on its own under npm start's
// MALLOC_MMAP_THRESHOLD_=32768) and returns a new 300 KB output buffer per frame: mapped,
// page-faulted in, counted as external memory that drives the API worker's full collections,
// then unmapped. node:zlib has no public call that inflates into a given buffer; this drives
// the call its own inflateSync is built on (the handle's writeSync, which reports through the
// stream's two-number write state), on a zlib.Inflate made once per thread and reset()
// (public) between images. Where a Node release lacks that shape, inflateInto falls back to
// zlib.inflateSync and a copy: the same results at the old cost
// (test/images/png-decode.test.ts checks that this Node takes the reused path;
// inflate-fallback.test.ts runs the fallback, with the same hostile streams: hostile-pngs.ts).
import * as zlib from 'node:zlib';

interface NativeHandle {
  writeSync(flush: number, input: Uint8Array, inOff: number, inLen: number, out: Uint8Array, outOff: number, outLen: number): void;
}

type InternalInflate = zlib.Inflate & { _handle?: NativeHandle | null; _writeState?: unknown };

interface Reusable {
  stream: zlib.Inflate;
  handle: NativeHandle;
  /** [avail_out, avail_in] after each write */
  state: Uint32Array;
}

/** What zlib made of the stream: bytes written into `out` (all of `out` when the data did not
 * fit), and the input bytes left after the end of the zlib stream. */
export interface Inflated {
  written: number;
  trailing: number;
}

/** A zlib error (bad header, bad block, wrong checksum, stream cut short), with zlib's message. */
export class ZlibError extends Error {}

let reusable: Reusable | null | undefined;

function make(): Reusable | null {
  const stream = zlib.createInflate() as InternalInflate;
  const handle = stream._handle;
  const state = stream._writeState;
  if (!handle || typeof handle.writeSync !== 'function' || !(state instanceof Uint32Array) || state.length !== 2) {
    stream.close();
    return null;
  }
  // A zlib error destroys the stream with it (asynchronously emitted as 'error'): heard here so
  // it is not an uncaught error, and read synchronously from stream.errored.
  stream.on('error', () => {});
  return { stream, handle, state };
}

/** Whether this thread inflates through the reused native handle (false: zlib.inflateSync). */
export function reusesInflater(): boolean {
  if (reusable === undefined) reusable = make();
  return reusable !== null;
}

/** Inflates the zlib stream that `chunks` hold, in order, into `out`, stopping when `out` is
 * full (the caller gives one byte more room than it accepts, so "full" means too long).
 * Throws ZlibError. */
export function inflateInto(chunks: readonly Uint8Array[], out: Uint8Array): Inflated {
  if (reusable === undefined) reusable = make();
  if (reusable === null) return inflateCopy(chunks, out);
  const { stream, handle, state } = reusable;
  let written = 0;
  let trailing = 0;
  let failed = true;
  try {
    for (let i = 0; i < chunks.length; i++) {
      if (written === out.length) break; // full: the data is too long, whatever follows
      const input = chunks[i];
      // Z_FINISH on the last piece: zlib then reports a stream cut short ("unexpected end of
      // file"); before it, Z_NO_FLUSH lets the stream continue into the next chunk.
      const flush = i === chunks.length - 1 ? zlib.constants.Z_FINISH : zlib.constants.Z_NO_FLUSH;
      handle.writeSync(flush, input, 0, input.length, out, written, out.length - written);
      const err = stream.errored;
      if (err) throw new ZlibError(err.message);
      written = out.length - state[0];
      const left = state[1];
      if (left > 0 && written < out.length) {
        // the zlib stream ended inside this chunk: the rest of it and every later chunk follow it
        trailing = left;
        for (let j = i + 1; j < chunks.length; j++) trailing += chunks[j].length;
        break;
      }
    }
    failed = false;
    return { written, trailing };
  } finally {
    // after an error the stream is destroyed (its handle closed): the next image makes a new one
    if (failed && stream.errored) reusable = undefined;
    else stream.reset();
  }
}

/** The same through zlib.inflateSync (a Node without the reused handle). */
function inflateCopy(chunks: readonly Uint8Array[], out: Uint8Array): Inflated {
  const data = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
  let result: { buffer: Buffer; engine: zlib.Inflate };
  try {
    result = zlib.inflateSync(data, { info: true, maxOutputLength: out.length, chunkSize: out.length }) as unknown as
      { buffer: Buffer; engine: zlib.Inflate };
  } catch (err) {
    if ((err as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE') return { written: out.length, trailing: 0 };
    throw new ZlibError((err as Error).message);
  }
  out.set(result.buffer);
  return { written: result.buffer.length, trailing: data.length - result.engine.bytesWritten };
}
