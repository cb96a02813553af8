// The process's LMDB metering writer thread (writer.ts says why). Each API worker has a
// MessagePort to it; the main thread sends it those ports and, at the end, `close`.
import { parentPort, workerData, type MessagePort } from 'node:worker_threads';
import { syncCommitFlags } from './atomic.ts';
import { putAuditLines } from './audit-queue.ts';
import { openStore, type Store } from './open.ts';
import type { ReserveOutcome } from '../backend.ts';
import type { AuditRecord, Reservation } from '../records.ts';
import { reserveWrites } from './reserve.ts';
import { markFailedWrites, refundHeld, refundWrites, settleWrites } from './settle.ts';
import { toWire, type WriterOp, type WriterReply, type WriterRequest } from './writer-client.ts';

const { dataDir } = workerData as { dataDir: string };
const store = openStore(dataDir, { commits: 'sync' });

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

export function runOp(s: Store, op: WriterOp): unknown {
  switch (op.op) {
    case 'reserve':
      return reserveWrites(s, op.input, op.thread);
    case 'settle':
      return settleWrites(s, op.reservation, op.at, op.body, op.results, op.fault);
    case 'mark':
      return markFailedWrites(s, op.id, op.body);
    case 'refund':
      return refundWrites(s, op.id, op.at);
  }
}

function commitBatch(): void {
  scheduled = false;
  const batch = queue;
  queue = [];
  const requests = batch.filter((i): i is { peer: Peer; req: WriterRequest } => 'req' in i);
  if (requests.length > 0) commitRequests(requests);
  for (const item of batch) if ('gone' in item) recoverWorker(item.gone);
  if (closing && queue.length === 0) void finish();
}

function commitRequests(batch: { peer: Peer; req: WriterRequest }[]): void {
  const outcomes: ({ ok: true; value: unknown } | { ok: false; err: unknown })[] = [];
  try {
    store.root.transactionSync(() => {
      for (const { req } of batch) {
        if (req.op === null) {
          outcomes.push({ ok: true, value: undefined });
          continue;
        }
        // each in a child transaction: a throw (a settlement of a reservation no longer
        // pending, a test fault) undoes its own writes only
        try {
          const op = req.op;
          outcomes.push({ ok: true, value: store.root.childTransaction(() => runOp(store, op)) });
        } catch (err) {
          outcomes.push({ ok: false, err });
        }
      }
      for (const { req } of batch) putAuditLines(store.db, req.lines.map((record: AuditRecord) => ({ record, done: () => undefined })));
    }, syncCommitFlags(store.root));
  } catch (err) {
    // nothing of the batch was committed: every request hears this failure (a full disk)
    const error = toWire(err);
    for (const { peer, req } of batch) peer.port.postMessage({ id: req.id, ok: false, committed: false, error } satisfies WriterReply);
    return;
  }
  // transactionSync has returned: the commit is on disk, so the answers may leave
  batch.forEach(({ peer, req }, i) => {
    const out = outcomes[i]!;
    if (out.ok) track(peer, req.op, out.value);
    peer.port.postMessage((out.ok ? { id: req.id, ok: true, value: out.value } : { id: req.id, ok: false, committed: true, error: toWire(out.err) }) satisfies WriterReply);
  });
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
  if (peer.open.size > 0) {
    try {
      const at = Date.now();
      store.root.transactionSync(() => {
        for (const id of peer.open) {
          const current = store.db.reservations.get(id);
          if (current?.state !== 'pending') continue;
          refundHeld(store, current, at);
          refunded.push(current);
        }
      }, syncCommitFlags(store.root));
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

function attach(port: MessagePort): void {
  const peer: Peer = { port, open: new Set(), thread: null, refunded: null, drains: [] };
  port.on('message', (req: WriterRequest | { hello: number }) => {
    if ('hello' in req) {
      peer.thread = req.hello;
      byThread.set(req.hello, peer);
    } else enqueue({ peer, req });
  });
  port.on('close', () => enqueue({ gone: peer }));
}

let finished = false;
async function finish(): Promise<void> {
  if (finished) return;
  finished = true;
  await store.close();
  process.exit(0);
}

parentPort!.on('message', (m: { type: 'connect'; port: MessagePort } | { type: 'drain'; id: number; thread: number } | { type: 'close' }) => {
  if (m.type === 'connect') attach(m.port);
  else if (m.type === 'drain') {
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
