import path from 'node:path';
import { isMainThread, receiveMessageOnPort, threadId, workerData, type MessagePort } from 'node:worker_threads';
import type { ReserveInput } from '../backend.ts';
import type { AuditRecord, Reservation } from '../records.ts';

// What an API worker and the process's metering writer say to each other, and the worker's end
// of their channel (writer.ts says what the writer is for; writer-thread.ts is the writer).

/** The settlement's test faults (src/store/faults.ts): `fail` throws in its transaction, `hold`
 * stops inside it for good; `fail-commit` (in-process tests only) makes the metering writer's
 * whole batch fail as a commit that cannot be written does, with an ENOSPC error
 * (writer-thread.ts). */
export type SettleFault = 'fail' | 'hold' | 'fail-commit' | null;

/** A metering write as data: what the writer runs in its batch (writer-thread.ts runOp). */
export type WriterOp =
  | { op: 'reserve'; input: ReserveInput; thread: number }
  | { op: 'settle'; reservation: Reservation; at: number; body: string; results: unknown; fault: SettleFault }
  | { op: 'mark'; id: string; body: string | null }
  | { op: 'refund'; id: string; at: number };

/** `op` null: only audit lines (the audit queue's own commit). */
export interface WriterRequest {
  id: number;
  op: WriterOp | null;
  lines: AuditRecord[];
}

/** `committed`: whether the batch's commit holds the request's audit lines (an op whose checks
 * threw, writer-thread.ts runOne, left the batch whole). A reservation is answered as soon as
 * its writes have run, before its batch commits (writer-thread.ts says why); every other answer
 * after the batch's commit and sync. */
export type WriterReply = { id: number; ok: true; value: unknown } | { id: number; ok: false; committed: boolean; error: WireError };

/** An error as it crosses threads: what isStorageFailure and the logs read of it (name,
 * message, code, cause, errors), nothing else survives structured cloning of an Error anyway. */
export interface WireError {
  name: string;
  message: string;
  code?: string | number;
  cause?: WireError;
  errors?: WireError[];
}

export function toWire(err: unknown, depth = 0): WireError {
  const e = (err ?? {}) as { name?: unknown; message?: unknown; code?: unknown; cause?: unknown; errors?: unknown };
  const out: WireError = { name: typeof e.name === 'string' ? e.name : 'Error', message: typeof e.message === 'string' ? e.message : String(err) };
  if (typeof e.code === 'string' || typeof e.code === 'number') out.code = e.code;
  if (depth < 4 && e.cause !== undefined) out.cause = toWire(e.cause, depth + 1);
  if (depth < 4 && Array.isArray(e.errors)) out.errors = e.errors.map((x) => toWire(x, depth + 1));
  return out;
}

/** The error a worker hears: callers read it by its code and message (isStorageFailure, the
 * logs), never by its class. */
export function fromWire(w: WireError): Error {
  const err = new Error(w.message) as Error & { code?: string | number; errors?: Error[] };
  err.name = w.name;
  if (w.code !== undefined) err.code = w.code;
  if (w.cause) err.cause = fromWire(w.cause);
  if (w.errors) err.errors = w.errors.map((x) => fromWire(x));
  return err;
}

/** The writer thread has ended (a bug, or the process is stopping): what was in flight has an
 * unknown outcome; later writes commit on the calling thread. Known by its name once it has
 * crossed the channel (fromWire). */
export const WRITER_LOST = 'WriterLostError';
export class WriterLostError extends Error {
  override name = WRITER_LOST;
}

/** A reservation the writer answered before its batch's commit, whose commit then failed (a
 * full disk): nothing of it is stored, its key is not bound. The writer answers this to the
 * reservation's settlement, refund or mark (writer-thread.ts), with the commit's failure as the
 * cause; known by its name once it has crossed the channel. */
export const RESERVATION_LOST = 'ReservationLostError';

/** How long the writer keeps a batch of early-answered reservations open for a settlement,
 * refund or mark to share its commit and sync (writer-thread.ts holdForCompany): bounded,
 * because the batch holds LMDB's write lock meanwhile. */
export const RESERVATION_HOLD_MS = 20;

/** How long the writer keeps a batch whose answers wait for its sync open for the settlements
 * of the reservations it answered and nobody has settled yet (writer-thread.ts
 * holdForSettlements): `share` of the mean time from a reservation's answer to its settlement,
 * `maxMs` at most; never while nothing is outstanding, nor when the outstanding are too few
 * for one of them to be expected within that time. A reservation answered `staleMs` ago
 * and still unsettled is not waited for (its worker is stuck or gone: recovery deals with it). */
export interface SettleHold {
  share: number;
  maxMs: number;
  staleMs: number;
}
export const SETTLE_HOLD: SettleHold = { share: 0.15, maxMs: 12, staleMs: 10_000 };

/** How long the settlements' hold may last, in ms, 0 for none (writer-thread.ts
 * holdForSettlements): `answerToSettle`, the writer's moving average of the time from a
 * reservation's answer to its settlement (0 before the first), `outstanding`, the reservations
 * answered and not yet settled. Little's law: those settle at about outstanding /
 * answerToSettle per ms, so outstanding x bound / answerToSettle settlements can be expected
 * within the bound; under one, the hold would mostly delay the batch's answers for nothing
 * (with the service's 15 %: seven outstanding or more, so 2 API workers at concurrency 4 never
 * hold). Here rather than in the thread so that a test can check the arithmetic. */
export function settleHoldMs(hold: SettleHold, answerToSettle: number, outstanding: number): number {
  const bound = Math.min(hold.maxMs, hold.share * answerToSettle);
  if (!(bound > 0) || outstanding <= 0) return 0;
  return (outstanding * bound) / answerToSettle < 1 ? 0 : bound;
}

/** The first message on a new channel: the writer's wake-up word, which the client bumps and
 * notifies after each request, so that a writer holding a batch open (waiting on it with
 * Atomics.wait) takes the request at once; and its busy word (`busy`). */
export interface WriterWake {
  wake: Int32Array;
  busy: BigInt64Array;
}

/** A monotonic clock in ms that every thread of the process reads alike (process.hrtime:
 * CLOCK_MONOTONIC; performance.now() counts from each thread's own start), for a length of time
 * one thread starts and another measures: on the wall clock, a step forward made a commit just
 * begun look stalled, and a step back hid a stuck one for the length of the step. */
export const monotonicMs = (): number => Number(process.hrtime.bigint() / 1_000_000n);

/** The writer's busy words: the moment (monotonicMs) at which the commit it is in began, 0
 * between commits, then the same moment on the wall clock (epoch ms, for a person); the
 * writer (writer-thread.ts) sets them around each transaction, the length first; any thread
 * reads them (stalled writes, lmdb/open.ts). */
export function writerBusyWord(): BigInt64Array {
  return new BigInt64Array(new SharedArrayBuffer(16));
}

/** An API worker's end of its channel to the writer. */
export class WriterClient {
  private nextId = 1;
  private readonly waiting = new Map<number, (r: WriterReply) => void>();
  private lost: WireError | null = null;
  private readonly wake: Int32Array | null;
  private readonly busy: BigInt64Array | null;

  constructor(private readonly port: MessagePort) {
    // MeteringWriter.connect posted it before handing the port over: it is already queued
    const first = receiveMessageOnPort(port)?.message as Partial<WriterWake> | undefined;
    this.wake = first?.wake instanceof Int32Array ? first.wake : null;
    this.busy = first?.busy instanceof BigInt64Array ? first.busy : null;
    port.on('message', (r: WriterReply) => {
      const answer = this.waiting.get(r.id);
      if (!answer) return;
      this.waiting.delete(r.id);
      // the port keeps the thread alive only while an answer is due
      if (this.waiting.size === 0) port.unref();
      answer(r);
    });
    // the writer's thread ended: its port closes after every message it had posted
    port.on('close', () => {
      this.lost = toWire(new WriterLostError('the metering writer thread has ended; the outcome of this write is unknown'));
      for (const [id, answer] of this.waiting) answer({ id, ok: false, committed: false, error: this.lost });
      this.waiting.clear();
    });
    port.unref();
    // which API worker this channel is, for the recovery of what it held once it is gone
    // (writer-thread.ts recoverWorker)
    port.postMessage({ hello: threadId });
  }

  get alive(): boolean {
    return this.lost === null;
  }

  /** How long the commit the writer is in has run (ms) and when it began (epoch ms), or null:
   * between commits, or gone. */
  commitRunning(): { ms: number; since: number } | null {
    if (!this.busy || this.lost) return null;
    const began = Number(Atomics.load(this.busy, 0));
    if (began === 0) return null;
    // the date is written after the length's moment (a read between the two is a commit
    // just begun, far under any bound): read as that moment if it is not there yet
    const ms = Math.max(0, monotonicMs() - began);
    const since = Number(Atomics.load(this.busy, 1));
    return { ms, since: since === 0 ? Date.now() - ms : since };
  }

  send(op: WriterOp | null, lines: AuditRecord[]): Promise<WriterReply> {
    const id = this.nextId++;
    if (this.lost) return Promise.resolve({ id, ok: false, committed: false, error: this.lost });
    return new Promise((resolve) => {
      if (this.waiting.size === 0) this.port.ref();
      this.waiting.set(id, resolve);
      this.port.postMessage({ id, op, lines } satisfies WriterRequest);
      if (this.wake) {
        Atomics.add(this.wake, 0, 1);
        Atomics.notify(this.wake, 0);
      }
    });
  }
}

/** One client per port: a thread that opens the store twice shares the one channel. */
const clients = new WeakMap<MessagePort, WriterClient>();

/** The writer's channel this API worker was started with (Cluster.spawn puts it in workerData
 * as `lmdbWriter`), for a store opened on the same directory; null anywhere else. */
export function writerClientFor(storeDir: string): WriterClient | null {
  if (isMainThread) return null;
  const given = (workerData as { lmdbWriter?: { port?: unknown; storeDir?: unknown } } | null)?.lmdbWriter;
  if (!given || typeof given.storeDir !== 'string' || path.resolve(given.storeDir) !== path.resolve(storeDir)) return null;
  const port = given.port as MessagePort;
  let client = clients.get(port);
  if (!client) {
    client = new WriterClient(port);
    clients.set(port, client);
  }
  return client;
}

/** The audit queue's own commit through the writer (open.ts). */
export async function writeAuditLines(client: WriterClient, records: AuditRecord[]): Promise<void> {
  const reply = await client.send(null, records);
  if (!reply.ok) throw fromWire(reply.error);
}

