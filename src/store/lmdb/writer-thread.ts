// The process's LMDB metering writer thread (writer.ts says why). Each API worker has a
// MessagePort to it; the main thread sends it those ports and, at the end, `close`.
import { parentPort, receiveMessageOnPort, workerData, type MessagePort } from 'node:worker_threads';
import { plantDiskFull } from '../faults.ts';
import { syncCommitFlags } from './atomic.ts';
import { putAuditLines } from './audit-queue.ts';
import { openStore, type Store } from './open.ts';
import type { ReserveOutcome } from '../backend.ts';
import type { AuditRecord, Reservation } from '../records.ts';
import { planReserve } from './reserve.ts';
import { planMark, planRefund, planSettle, refundHeld } from './settle.ts';
import { monotonicMs, RESERVATION_LOST, settleHoldMs, toWire, type SettleHold, type WireError, type WriterOp, type WriterReply, type WriterRequest } from './writer-client.ts';

const { dataDir, wake, busy, holdMs, settleHold, mapGiB } = workerData as { dataDir: string; wake?: Int32Array; busy?: BigInt64Array; holdMs: number; settleHold: SettleHold; mapGiB?: number };
const store = openStore(dataDir, { commits: 'sync', mapGiB });

/** Every API worker's peer, for the held batch to take their requests from (holdForCompany). */
const peers = new Set<Peer>();

/** One API worker's channel, and the reservations this writer committed for it that no
 * later request of its has settled, refunded or marked (recoverWorker). */
interface Peer {
  port: MessagePort;
  open: Set<string>;
  /** the API worker's threadId, from its first message */
  thread: number | null;
  /** once its port closed and what it held was refunded: those reservations */
  refunded: Reservation[] | null;
  /** the main thread's `drain` requests waiting for that */
  drains: number[];
}

/** Peers by API worker thread, for the main thread's `drain` (MeteringWriter.drained). */
const byThread = new Map<number, Peer>();

/** A request and the worker asking; `gone`: that worker's port closed. */
type Item = { peer: Peer; req: WriterRequest } | { gone: Peer };

let queue: Item[] = [];
let scheduled = false;
let closing = false;

function enqueue(item: Item): void {
  queue.push(item);
  if (scheduled) return;
  scheduled = true;
  // setImmediate: after every message of this turn (from every worker) has been queued. While
  // a batch's commit syncs, this thread is blocked and the workers' messages wait in their
  // ports, so the next batch takes all of them: the busier the process, the bigger the batch.
  setImmediate(commitBatch);
}

/** Runs a request's checks, which only read (a throw there has written nothing), and returns
 * its writes, to run once they passed (runOne says why the two are apart). */
export function planOp(s: Store, op: WriterOp): () => unknown {
  switch (op.op) {
    case 'reserve':
      return planReserve(s, op.input, op.thread);
    case 'settle':
      return planSettle(s, op.reservation, op.at, op.body, op.results, op.fault);
    case 'mark':
      return planMark(s, op.id, op.body);
    case 'refund':
      return planRefund(s, op.id, op.at);
  }
}

function commitBatch(): void {
  scheduled = false;
  const batch = queue;
  queue = [];
  const requests: Entry[] = [];
  for (const i of batch) if ('req' in i) requests.push({ peer: i.peer, req: i.req, out: null, early: false });
  if (requests.length > 0) commitRequests(requests);
  for (const item of batch) if ('gone' in item) recoverWorker(item.gone);
  if (closing && queue.length === 0) void finish();
}

/** A request in the batch: its outcome once run, and whether it was answered before the commit. */
interface Entry {
  peer: Peer;
  req: WriterRequest;
  out: { ok: true; value: unknown } | { ok: false; err: unknown } | null;
  early: boolean;
}

// Reservations answered before their commit. The durability rule needs a sync only before an
// answer that reports a charge; a reservation reports none (if the power fails before its
// commit is synced, it is gone, nobody was answered a charge, its key is unbound), and lmdb-js
// 3.5.6 has no commit without its sync (docs/metering.md). So the writer answers a reservation
// as soon as its writes have run inside the batch's open transaction (the quota check and the
// key's binding are as atomic as before: every later write sees them, in this transaction or
// after its commit), and keeps that transaction open, holding LMDB's write lock,
// until a write whose answer waits for the sync (a settlement, refund, mark or replay) joins
// it, RESERVATION_HOLD_MS at most: the reservation then costs no sync of its own, usually
// riding in the commit of its own call's settlement. Everything else is answered after the
// batch's commit and sync, as before, so a settlement's sync covers its reservation.
// If the batch's commit fails (a full disk) the early-answered reservations are gone: the
// writer remembers them (`lost`) and answers their settlement, refund or mark with
// RESERVATION_LOST, so that the call is answered 503 store_unavailable, charged nothing, its
// key free (settle.ts). A kill -9 before the commit loses them with the process: unanswered
// calls, nothing charged, as the rule allows.

/** Early-answered reservations whose batch failed to commit, by id: the commit's failure.
 * Bounded: the oldest go first (a worker that died before its settlement never asks). */
const lost = new Map<string, WireError>();
const LOST_MAX = 10_000;

/** How often the held batch looks at the ports without being woken (a channel whose sender
 * does not bump the word: a test's raw port). */
const HOLD_POLL_MS = 1;
/** A batch held open this big commits anyway. */
const HOLD_MAX_REQUESTS = 256;

/** The reservation a settlement, refund or mark is about. */
function targetOf(op: WriterOp): string | null {
  if (op.op === 'reserve') return null;
  return op.op === 'settle' ? op.reservation.id : op.id;
}

function lostReply(id: number, cause: WireError, committed: boolean): WriterReply {
  return { id, ok: false, committed, error: { name: RESERVATION_LOST, message: 'the reservation of this call was answered before its commit, and that commit failed: nothing of it was stored', ...(cause.code !== undefined ? { code: cause.code } : {}), cause } };
}

/** Runs one request in the batch's transaction; answers a reservation at once. */
function runOne(e: Entry): void {
  const op = e.req.op;
  if (op === null) {
    e.out = { ok: true, value: undefined };
    return;
  }
  const target = targetOf(op);
  if (target !== null) settledAfter(target);
  if (target !== null && lost.has(target)) return;
  // Straight in the batch's transaction, not in a child transaction of its own. A request's
  // checks (planOp: the reads, the refusals, a settlement of a reservation no longer pending)
  // run before its writes and write nothing, so a throw there (a refusal, a record that cannot
  // be read) has nothing to undo: that request alone fails and the others go on. A throw in
  // its writes (the store failing, after which LMDB fails the commit anyway; the test's
  // 'fail-commit'; a bug) may come after a write: it fails the whole batch, as a commit that
  // cannot be written does (below), so no half-run request is ever committed. Why no child
  // transaction: LMDB mallocs a child's dirty list (2 MiB) and free-page list (1 MiB) at its
  // start, and under MALLOC_MMAP_THRESHOLD_=32768 (npm start, docs/capacity.md "Memory") each
  // is mapped and unmapped again, two children a call: 0.10-0.13 ms of the writer's CPU a
  // capture, and the unmapping flushes the TLBs of the cores running the other threads (the
  // process used 5-6 % more CPU a capture: bench/results/writer-children.md).
  let writes: () => unknown;
  try {
    writes = planOp(store, op);
  } catch (err) {
    e.out = { ok: false, err };
    return;
  }
  e.out = { ok: true, value: writes() };
  if (op.op === 'reserve' && e.out.ok && (e.out.value as ReserveOutcome).kind !== 'replay') {
    // a replay reports a charge, which may be this batch's own settlement: it waits for the sync
    e.early = true;
    e.peer.port.postMessage({ id: e.req.id, ok: true, value: e.out.value } satisfies WriterReply);
    const out = e.out.value as ReserveOutcome;
    if (out.kind === 'reserved') answeredAt.set(out.reservation.id, performance.now());
  }
}

/** Whether a request is a reservation answered before the commit. */
const heldReservation = (e: Entry): boolean => e.early && (e.out as { value: ReserveOutcome }).value.kind === 'reserved';

/** Whether a run request's answer waits for the batch's sync. */
const waitsForSync = (e: Entry): boolean => !e.early && e.req.op !== null;

/** Runs `commit` (one transactionSync: the write lock, the batch, the commit and its sync) with
 * the busy word saying since when: a commit that neither ends nor fails (a stuck disk) is seen
 * by every API worker (stalled writes, lmdb/open.ts). */
function timed(commit: () => void): void {
  if (busy) {
    Atomics.store(busy, 1, 0n);
    Atomics.store(busy, 0, BigInt(monotonicMs()));
    Atomics.store(busy, 1, BigInt(Date.now()));
  }
  try {
    commit();
  } finally {
    if (busy) Atomics.store(busy, 0, 0n);
  }
}

function commitRequests(batch: Entry[]): void {
  try {
    timed(() => store.root.transactionSync(() => {
      let next = 0;
      const runNew = (): boolean => {
        let urgent = false;
        for (; next < batch.length; next++) {
          const e = batch[next]!;
          runOne(e);
          if (waitsForSync(e)) urgent = true;
        }
        return urgent;
      };
      const urgent = runNew();
      // a batch of answered reservations waits for a write that needs the sync (refusals
      // answered early wrote nothing: no reason to hold theirs)
      if (!urgent && holdMs > 0 && batch.some(heldReservation)) holdForCompany(batch, runNew);
      // and a batch with such a write, for the settlements soon to follow it
      if (batch.some(waitsForSync)) holdForSettlements(batch, runNew);
      for (const { req } of batch) putAuditLines(store.db, req.lines.map((record: AuditRecord) => ({ record, done: () => undefined })));
    }, syncCommitFlags(store.root)));
  } catch (err) {
    // nothing of the batch was committed (a full disk, or a throw in a request's writes,
    // runOne): the reservations answered early are gone, and every other request hears this
    // failure
    const error = toWire(err);
    const gone = new Set<string>();
    for (const e of batch) {
      if (!heldReservation(e)) continue;
      const { reservation } = (e.out as { value: Extract<ReserveOutcome, { kind: 'reserved' }> }).value;
      gone.add(reservation.id);
      answeredAt.delete(reservation.id);
      lost.set(reservation.id, error);
      if (lost.size > LOST_MAX) lost.delete(lost.keys().next().value!);
    }
    for (const { peer, req, early } of batch) {
      if (early) continue;
      const target = req.op === null ? null : targetOf(req.op);
      const lostWith = target === null ? undefined : gone.has(target) ? error : lost.get(target);
      peer.port.postMessage(lostWith !== undefined ? lostReply(req.id, lostWith, false) : ({ id: req.id, ok: false, committed: false, error } satisfies WriterReply));
    }
    return;
  }
  // transactionSync has returned: the commit is on disk, so the other answers may leave
  const answeredLost: string[] = [];
  for (const e of batch) {
    const { peer, req, out } = e;
    if (out === null) {
      // about a reservation lost with an earlier batch (runOne): answered so
      const target = targetOf(req.op!)!;
      answeredLost.push(target);
      peer.port.postMessage(lostReply(req.id, lost.get(target)!, true));
      continue;
    }
    if (out.ok) track(peer, req.op, out.value);
    if (e.early) continue;
    peer.port.postMessage((out.ok ? { id: req.id, ok: true, value: out.value } : { id: req.id, ok: false, committed: true, error: toWire(out.err) }) satisfies WriterReply);
  }
  for (const id of answeredLost) lost.delete(id);
}

/** Keeps the open batch, whose reservations were answered, waiting for a request whose answer
 * needs the sync, RESERVATION_HOLD_MS at most: it takes the API workers' requests from their
 * ports itself (this thread's event loop is blocked inside the transaction), woken by the
 * word each client bumps after posting (WriterClient.send). */
function holdForCompany(batch: Entry[], runNew: () => boolean): void {
  holdOpen(batch, performance.now() + holdMs, (took) => took && runNew());
}

/** Keeps the open batch taking the API workers' requests until `until` (performance.now()),
 * HOLD_MAX_REQUESTS, or `done` (told whether this look took any) says it is enough. */
function holdOpen(batch: Entry[], until: number, done: (took: boolean) => boolean): void {
  while (batch.length < HOLD_MAX_REQUESTS) {
    // read before looking: a request posted after the look changes it, so the wait returns
    const seen = wake ? Atomics.load(wake, 0) : 0;
    const took = takeWaiting(batch);
    if (done(took)) return;
    const left = until - performance.now();
    if (left <= 0) return;
    // woken by a client's bump; a channel without one (a test's raw port) is looked at again
    // after HOLD_POLL_MS
    if (!took) Atomics.wait(wake ?? idle, 0, seen, Math.min(left, HOLD_POLL_MS));
  }
}

// The settlements' hold (issue 42). At concurrency 32 the writer is never idle, and each batch
// took what reached it during the previous commit's sync: about two settlements a sync, as
// settlements now arrive spread between the reservations answered early. A batch whose answers
// wait for its sync therefore stays open a little longer when reservations are outstanding
// (answered, their settlement, refund or mark not yet run): their settlements will come, and
// each one that joins shares the sync instead of paying one. The hold is bounded by a share of
// what a call waits anyway between its reservation's answer and its settlement (measured here,
// a moving average: a few ms at concurrency 4, tens at 32), at most SettleHold.maxMs, and it
// ends at once when nothing is outstanding any more (every answered reservation's settlement is
// in this batch): a lone call, or an idle process, never waits; nor does a batch whose hold
// could expect less than one more settlement (few calls in flight). The answers still leave only
// after the batch's sync (only the moment of that sync moves), and the reservations that reach a
// held batch are answered at once, as before.

/** Reservations answered early whose settlement, refund or mark has not run: when each was
 * answered (performance.now()), in that order. */
const answeredAt = new Map<string, number>();
/** Moving average of the time from a reservation's answer to its settlement (refund, mark), ms. */
let answerToSettle = 0;

/** A write about reservation `id` has run: it is no longer outstanding. */
function settledAfter(id: string): void {
  const at = answeredAt.get(id);
  if (at === undefined) return;
  answeredAt.delete(id);
  const took = performance.now() - at;
  answerToSettle = answerToSettle === 0 ? took : answerToSettle + (took - answerToSettle) / 16;
}

/** How many answered reservations still wait for their settlement (the stale ones dropped). */
function outstanding(): number {
  const stale = performance.now() - settleHold.staleMs;
  for (const [id, at] of answeredAt) {
    if (at >= stale) break;
    answeredAt.delete(id);
  }
  return answeredAt.size;
}

/** Keeps the open batch, some of whose answers wait for its sync, open for the settlements of
 * the reservations outstanding, as long as the hold's bound allows (above). */
function holdForSettlements(batch: Entry[], runNew: () => boolean): void {
  // none before the first measurement, nor where Little's law expects under one settlement
  // within it (settleHoldMs): at 2 API workers / concurrency 4 it never holds, as before
  const bound = settleHoldMs(settleHold, answerToSettle, outstanding());
  if (bound === 0) return;
  // until every reservation answered has its settlement in (or the bound)
  holdOpen(batch, performance.now() + bound, (took) => {
    if (took) runNew();
    return outstanding() === 0;
  });
}

/** Waited on when there is no wake-up word: nobody bumps it. */
const idle = new Int32Array(new SharedArrayBuffer(4));

/** The requests waiting in every API worker's port, added to the batch. */
function takeWaiting(batch: Entry[]): boolean {
  let took = false;
  for (const peer of peers) {
    for (;;) {
      let m: { message: unknown } | undefined;
      try {
        m = receiveMessageOnPort(peer.port);
      } catch {
        break;
      }
      if (!m) break;
      const msg = m.message as WriterRequest | { hello: number };
      if ('hello' in msg) hello(peer, msg.hello);
      else {
        batch.push({ peer, req: msg, out: null, early: false });
        took = true;
      }
    }
  }
  return took;
}

/** What a committed request changed of the worker's held reservations. */
function track(peer: Peer, op: WriterOp | null, value: unknown): void {
  if (op === null) return;
  if (op.op === 'reserve') {
    const out = value as ReserveOutcome;
    if (out.kind === 'reserved') peer.open.add(out.reservation.id);
  } else peer.open.delete(op.op === 'settle' ? op.reservation.id : op.id);
}

/** An API worker's port closed: its thread has ended, after every message it posted (a
 * MessagePort's close comes after its messages, so they have all been committed above). What
 * the writer reserved for it and no later request settled, refunded or marked is refunded now,
 * each refund checking the state inside the transaction. The main thread's recovery of the
 * dead worker (LmdbBackend.recoverThread) first waits for this (`drain`) and reports these with
 * its own: so a reservation the writer committed after the main thread saw the exit is not
 * left pending until the next start. */
function recoverWorker(peer: Peer): void {
  const refunded: Reservation[] = [];
  // their settlements will not come: no batch waits for them
  for (const id of peer.open) answeredAt.delete(id);
  if (peer.open.size > 0) {
    try {
      const at = Date.now();
      timed(() => store.root.transactionSync(() => {
        for (const id of peer.open) {
          const current = store.db.reservations.get(id);
          if (current?.state !== 'pending') continue;
          refundHeld(store, current, at);
          refunded.push(current);
        }
      }, syncCommitFlags(store.root)));
    } catch (err) {
      // the main thread's scan, or start-up recovery, refunds them instead
      refunded.length = 0;
      process.stderr.write(`${JSON.stringify({ level: 50, msg: 'metering writer: refunding what a dead API worker held failed; its recovery scan or start-up recovery refunds it', err: { message: (err as Error).message } })}\n`);
    }
    peer.open.clear();
  }
  peer.refunded = refunded;
  // kept until the main thread asks (once, when it sees the exit), unless it already has
  if (peer.drains.length > 0 && peer.thread !== null) byThread.delete(peer.thread);
  for (const id of peer.drains) drained(id, refunded);
  peer.drains = [];
}

function drained(id: number, refunded: Reservation[]): void {
  parentPort!.postMessage({ type: 'drained', id, refunded });
}

function hello(peer: Peer, thread: number): void {
  peer.thread = thread;
  byThread.set(thread, peer);
}

function attach(port: MessagePort): void {
  const peer: Peer = { port, open: new Set(), thread: null, refunded: null, drains: [] };
  peers.add(peer);
  port.on('message', (req: WriterRequest | { hello: number }) => {
    if ('hello' in req) hello(peer, req.hello);
    else enqueue({ peer, req });
  });
  port.on('close', () => {
    peers.delete(peer);
    enqueue({ gone: peer });
  });
}

let finished = false;
async function finish(): Promise<void> {
  if (finished) return;
  finished = true;
  await store.close();
  process.exit(0);
}

/** Undoes the test's full disk (MeteringWriter.diskFull); null while there is none. */
let freeDisk: (() => void) | null = null;

parentPort!.on('message', (m: { type: 'connect'; port: MessagePort } | { type: 'drain'; id: number; thread: number } | { type: 'disk-full'; id: number; commits: number | null } | { type: 'close' }) => {
  if (m.type === 'connect') attach(m.port);
  else if (m.type === 'disk-full') {
    // Testing only (MeteringWriter.diskFull). Taken here, on this thread's event loop, so
    // always between two commits: the one under way (its batch held open) ends as it would
    // have, and the count starts with the next. It replaces this store's transactionSync and
    // probe (plantDiskFull): the commits above run no code of it while none is planted.
    freeDisk?.();
    freeDisk = m.commits === null ? null : plantDiskFull(store, m.commits);
    parentPort!.postMessage({ type: 'disk-full', id: m.id });
  } else if (m.type === 'drain') {
    // the main thread saw API worker `thread` exit: answer once its port has closed and what
    // it held is refunded (recoverWorker); a thread that never said hello posted nothing
    const peer = byThread.get(m.thread);
    if (!peer) drained(m.id, []);
    else if (peer.refunded !== null) {
      byThread.delete(m.thread);
      drained(m.id, peer.refunded);
    } else peer.drains.push(m.id);
  } else {
    closing = true;
    // what is queued is committed first (commitBatch finishes after it)
    if (!scheduled) void finish();
  }
});
