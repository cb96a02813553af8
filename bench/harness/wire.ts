// Raw-socket HTTP/1.1 for bodies that fetch cannot send (declared lengths that lie, chunked
// bodies, half bodies, disconnects), bodies at exact sizes and small valid inputs: shared by the
// ingest tests (test/helpers/ingest.ts re-exports them) and the soak runs.

import net from 'node:net';
import { encodePng, type CaptureInput, type FrameInput } from '../../src/client/index.ts';
import { crc32 } from '../../src/images/crc32.ts';
import { EYES, SOURCE_SIZE } from './captures.ts';
// ---------------------------------------------------------------------------------------------
// Raw HTTP/1.1 over a socket

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
  json: any;
  /** the server closed the connection after the answer (FIN or RST seen) */
  closed: boolean;
  /** a write failed (EPIPE / ECONNRESET) because the server stopped reading: expected after an early answer */
  writeError: string | null;
  /** body bytes the writer managed to hand to the socket before the answer or the error */
  bytesWritten: number;
}

export interface RawOptions {
  /** after the answer, how long to wait for the server to close before calling it open (hang detector, not a speed check) */
  closeWaitMs?: number;
  /** give up waiting for an answer after this long (hang detector) */
  answerWaitMs?: number;
}

/** A connection on which a test writes a request by hand and reads one response. */
export class RawConn {
  readonly socket: net.Socket;
  private buf = Buffer.alloc(0);
  private ended = false;
  private waiters: (() => void)[] = [];
  writeError: string | null = null;
  bytesWritten = 0;
  readonly connected: Promise<void>;

  /** `readLater`: read nothing until response() is called, like a client that writes its whole
   * request before it looks at the answer (the answer then waits in the kernel's receive queue). */
  constructor(port: number, opts: { readLater?: boolean } = {}) {
    this.socket = net.connect({ host: '127.0.0.1', port });
    this.socket.setNoDelay(true);
    if (opts.readLater) this.socket.pause();
    this.connected = new Promise((resolve, reject) => {
      this.socket.once('connect', () => resolve());
      this.socket.once('error', reject);
    });
    this.socket.on('data', (d: Buffer) => {
      this.buf = Buffer.concat([this.buf, d]);
      this.wake();
    });
    const onGone = () => {
      this.ended = true;
      this.wake();
    };
    this.socket.on('end', onGone);
    this.socket.on('close', onGone);
    this.socket.on('error', (err: NodeJS.ErrnoException) => {
      // EPIPE / ECONNRESET: the server answered early and closed; the answer may already be in buf
      this.writeError ??= err.code ?? err.message;
      onGone();
    });
  }

  private wake(): void {
    for (const w of this.waiters.splice(0)) w();
  }

  private until(cond: () => boolean, ms: number): Promise<boolean> {
    return new Promise((resolve) => {
      const check = () => {
        if (cond()) {
          clearTimeout(timer);
          resolve(true);
        } else this.waiters.push(check);
      };
      const timer = setTimeout(() => resolve(cond()), ms);
      check();
    });
  }

  get isClosed(): boolean {
    return this.ended;
  }

  /** true once a complete response head has arrived */
  get hasAnswer(): boolean {
    return this.buf.indexOf('\r\n\r\n') >= 0;
  }

  /** Writes, respecting back-pressure; resolves false instead of throwing once the socket is unusable. */
  async write(data: Buffer | string): Promise<boolean> {
    if (this.ended || this.socket.destroyed || this.writeError) return false;
    const ok = this.socket.write(data, (err) => {
      if (err) this.writeError ??= (err as NodeJS.ErrnoException).code ?? err.message;
    });
    this.bytesWritten += typeof data === 'string' ? Buffer.byteLength(data) : data.length;
    if (!ok) {
      await new Promise<void>((resolve) => {
        const done = () => {
          this.socket.off('drain', done);
          this.socket.off('close', done);
          resolve();
        };
        this.socket.on('drain', done);
        this.socket.on('close', done);
      });
    }
    return !(this.ended || this.writeError);
  }

  /** Waits for the next complete response (Content-Length framed, as uWS answers) and consumes
   * it, so a later call reads the next one; with `expectClose`, also waits for the close. */
  async response(opts: RawOptions & { expectClose?: boolean } = {}): Promise<RawResponse> {
    const answerWait = opts.answerWaitMs ?? 30_000;
    if (this.socket.isPaused()) this.socket.resume();
    await this.until(() => this.complete() !== null || this.ended, answerWait);
    const parsed = this.complete();
    if (parsed === null) {
      throw new Error(`no complete HTTP response (closed=${this.ended}, writeError=${this.writeError}, got ${JSON.stringify(this.buf.toString('latin1').slice(0, 300))})`);
    }
    this.buf = this.buf.subarray(parsed.length);
    if (opts.expectClose) await this.until(() => this.ended, opts.closeWaitMs ?? 10_000);
    return { status: parsed.status, headers: parsed.headers, body: parsed.body, json: parsed.json, closed: this.ended, writeError: this.writeError, bytesWritten: this.bytesWritten };
  }

  /** Waits (bounded) for the server to close the connection; true when it did. */
  waitClosed(ms = 15_000): Promise<boolean> {
    return this.until(() => this.ended, ms);
  }

  private complete(): (Omit<RawResponse, 'closed' | 'writeError' | 'bytesWritten'> & { length: number }) | null {
    const end = this.buf.indexOf('\r\n\r\n');
    if (end < 0) return null;
    const lines = this.buf.subarray(0, end).toString('latin1').split('\r\n');
    const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(lines[0]!)?.[1]);
    const headers: Record<string, string> = {};
    for (const l of lines.slice(1)) {
      const i = l.indexOf(':');
      headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
    }
    const len = Number(headers['content-length'] ?? 0);
    if (this.buf.length < end + 4 + len) return null;
    const body = this.buf.subarray(end + 4, end + 4 + len).toString('utf8');
    let json: unknown;
    try {
      json = JSON.parse(body);
    } catch {
      json = undefined;
    }
    return { status, headers, body, json, length: end + 4 + len };
  }

  close(): void {
    this.socket.destroy();
  }
}

/**
 * After an early answer the connection must be left clean (the rest of the body drained, the
 * next request on it answered) or closed, never hung (issue 3, Transport). `rest`: the part of
 * the request the client had not sent yet, which it now sends as a client that ignores early
 * answers would. Then a follow-up request goes on the same connection: it must be answered,
 * or the server must have closed the connection. Either is accepted; silence is a failure.
 */
export function verifyHead(opts: {
  module?: string;
  token: string;
  contentType?: string | null;
  contentLength?: number | string | null;
  chunked?: boolean;
  extra?: Record<string, string>;
}): string {
  const lines = [`POST /v1/modules/${opts.module ?? 'rgb_liveness'}/verify HTTP/1.1`, 'Host: 127.0.0.1', `Authorization: Bearer ${opts.token}`];
  if (opts.contentType !== null && opts.contentType !== undefined) lines.push(`Content-Type: ${opts.contentType}`);
  if (opts.contentLength !== null && opts.contentLength !== undefined) lines.push(`Content-Length: ${opts.contentLength}`);
  if (opts.chunked) lines.push('Transfer-Encoding: chunked');
  for (const [k, v] of Object.entries(opts.extra ?? {})) lines.push(`${k}: ${v}`);
  return `${lines.join('\r\n')}\r\n\r\n`;
}

/** Sends `body` as chunked transfer coding, `chunkBytes` at a time, stopping as soon as the
 * server answers or the socket breaks. */
export async function writeChunked(conn: RawConn, body: Buffer, chunkBytes = 64 * 1024): Promise<void> {
  for (let at = 0; at < body.length; at += chunkBytes) {
    if (conn.hasAnswer) return;
    const end = Math.min(body.length, at + chunkBytes);
    const piece = body.subarray(at, end);
    // the last chunk goes out with the terminating zero chunk, so nothing trails an early answer
    const last = end === body.length ? '\r\n0\r\n\r\n' : '\r\n';
    if (!(await conn.write(Buffer.concat([Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from(last)])))) return;
  }
}

/** Sends `body` with Content-Length framing, `chunkBytes` per write, stopping at an answer or a broken socket. */
export async function writeBody(conn: RawConn, body: Buffer, chunkBytes = 256 * 1024): Promise<void> {
  for (let at = 0; at < body.length; at += chunkBytes) {
    if (conn.hasAnswer) return;
    if (!(await conn.write(body.subarray(at, Math.min(body.length, at + chunkBytes))))) return;
  }
}

// ---------------------------------------------------------------------------------------------
// Bodies at exact sizes

const plainPngs = new WeakMap<Uint8Array, Buffer>();

/** A valid 320x320 RGB PNG padded with an ancillary tEXt chunk (before IEND) to exactly `size`
 * bytes. The plain encoding is cached per pixel array, so padding many copies is cheap. */
export function pngOfSize(pixels: Uint8Array, size: number): Buffer {
  let plain = plainPngs.get(pixels);
  if (!plain) {
    plain = encodePng(pixels);
    plainPngs.set(pixels, plain);
  }
  const extra = size - plain.length - 12; // one more chunk: length + type + data + crc
  if (extra < 8) throw new RangeError(`pngOfSize: ${size} is below ${plain.length + 20}`);
  const chunk = Buffer.alloc(12 + extra, 0x20);
  chunk.writeUInt32BE(extra, 0);
  chunk.write('tEXt', 4, 'latin1');
  chunk.write('Comment\0', 8, 'latin1');
  chunk.writeUInt32BE(crc32(chunk.subarray(4, 8 + extra)), 8 + extra);
  const iend = plain.length - 12;
  return Buffer.concat([plain.subarray(0, iend), chunk, plain.subarray(iend)]);
}

/** A hand-made multipart body (for parts the client library refuses to build). */
export function multipart(parts: { name: string; filename?: string | null; type?: string; data: Buffer | string }[], epilogue = ''): { body: Buffer; contentType: string } {
  const boundary = '----ingestTestBoundary7d1f0a';
  const chunks: Buffer[] = [];
  for (const p of parts) {
    const disp = p.filename === undefined || p.filename === null ? `form-data; name="${p.name}"` : `form-data; name="${p.name}"; filename="${p.filename}"`;
    const type = p.type ? `\r\nContent-Type: ${p.type}` : '';
    chunks.push(Buffer.from(`--${boundary}\r\nContent-Disposition: ${disp}${type}\r\n\r\n`, 'utf8'));
    chunks.push(Buffer.isBuffer(p.data) ? p.data : Buffer.from(p.data, 'utf8'));
    chunks.push(Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n${epilogue}`, 'latin1'));
  return { body: Buffer.concat(chunks), contentType: `multipart/form-data; boundary=${boundary}` };
}

// ---------------------------------------------------------------------------------------------
// Small valid inputs: where the pixels do not matter, a flat crop encodes to about 1 KB

const FLAT = new Uint8Array(320 * 320 * 3).fill(90);
let flatPng: Buffer | undefined;
export function smallPng(): Buffer {
  return (flatPng ??= encodePng(FLAT));
}
export function flatPixels(): Uint8Array {
  return FLAT;
}

export { SOURCE_SIZE, EYES };

export function okFrame(i: number, bytes: Uint8Array = smallPng(), extra: Partial<FrameInput> = {}): FrameInput {
  return { timestamp_us: 1_000_000 + i * 33_333, source_size: SOURCE_SIZE, eyes_xy: EYES, image: { bytes }, ...extra };
}

export function smallSingle(id?: string, bytes?: Uint8Array): CaptureInput {
  return { capture_id: id, mode: 'rgb_single', frames: [okFrame(0, bytes)] };
}

/** An rgb_sequence of `n` events: `failed` dropped events then ok frames with small images. */
export function smallSequence(n: number, opts: { id?: string; okFrames?: number } = {}): CaptureInput {
  const ok = Math.min(n, opts.okFrames ?? 1);
  return {
    capture_id: opts.id,
    mode: 'rgb_sequence',
    frames: Array.from({ length: n }, (_, i): FrameInput => (i < n - ok ? { timestamp_us: 1_000_000 + i * 33_333, status: 'dropped' } : okFrame(i))),
  };
}

export function smallColor(id?: string): CaptureInput {
  return {
    capture_id: id,
    mode: 'color',
    frames: (['white', 'red', 'green', 'blue'] as const).map((phase, i) => ({ ...okFrame(i), phase, display_time_us: 1_000_000 + i * 33_333 - 5_000 })),
  };
}
