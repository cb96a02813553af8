// Shared by the ingest tests (test/http/, and test/metering/mid-upload.ts): the "charged
// nothing, stored nothing but its audit line" check, connection-state assertions and requests
// at exact sizes. The raw-socket HTTP client, body builders and small valid inputs live in
// bench/harness/wire.ts (the soak runs use them too) and are re-exported here.

import type { Test } from 'tap';
import { buildBatch, buildVerifyBody } from '../../src/client/index.ts';
import type { ServerHandle } from './server.ts';

/** What these helpers use of a server: a started one (startServer) or the app in process
 * (startApi, whose own LMDB handle they read through: a second handle on the same store in the
 * same process, opened and closed around each read while the app commits, was seen to stall). */
type Served = Pick<ServerHandle, 'dataDir' | 'baseUrl'> & { lmdb?: { db: Omit<ReturnType<typeof lmdbOpen>, 'close'> } | null };

/** `fn` on the server's LMDB databases: the in-process app's own, or a handle opened for it. */
async function withDbs<T>(server: Served, fn: (db: Omit<ReturnType<typeof lmdbOpen>, 'close'>) => T | Promise<T>): Promise<T> {
  if (server.lmdb) return fn(server.lmdb.db);
  const store = lmdbOpen(server.dataDir);
  try {
    return await fn(store);
  } finally {
    await store.close();
  }
}
import { lmdbOpen } from './lmdb.ts';
import { postVerify } from './captures.ts';
import { waitFor, WaitTimeout } from './wait.ts';
import { RawConn, pngOfSize, smallSingle, verifyHead, writeBody, type RawResponse } from '../../bench/harness/wire.ts';
import { request as captureBody } from './captures.ts';

export * from '../../bench/harness/wire.ts';

export const MiB = 1024 * 1024;
export const BODY_LIMIT = 32 * MiB;
export const PART_LIMIT = MiB;

export async function expectCleanOrClosed(t: Test, conn: RawConn, rest?: Buffer): Promise<'closed' | 'clean'> {
  if (rest && rest.length > 0 && !conn.isClosed) await writeBody(conn, rest);
  if (!conn.isClosed) await conn.write('GET /health/live HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
  let next: RawResponse | null = null;
  try {
    next = await conn.response({ answerWaitMs: 15_000 });
  } catch {
    next = null;
  }
  if (next) {
    t.equal(next.status, 200, 'connection clean: the next request on it is answered');
    return 'clean';
  }
  t.ok(conn.isClosed, 'connection closed by the server (not hung)');
  return 'closed';
}

/** For a request the client left unfinished: the server must close the connection (bounded). */
export async function expectClosed(t: Test, conn: RawConn, why = 'unfinished request: the server closes the connection (not hung)'): Promise<void> {
  t.ok(await conn.waitClosed(20_000), why);
}

// ---------------------------------------------------------------------------------------------
// Nothing charged, nothing stored but the audit line

const CHARGED_DBS = ['ledger', 'counters', 'reservations', 'idempotency', 'results'] as const;

export interface StoreSnapshot {
  dbs: Record<(typeof CHARGED_DBS)[number], string>;
  usage: unknown;
}

function dump(db: any): string {
  db.resetReadTxn?.();
  return JSON.stringify([...db.getRange({})].map((e: { key: unknown; value: unknown }) => [e.key, e.value]));
}

export async function usageOf(baseUrl: string, token: string): Promise<unknown> {
  const r = await fetch(`${baseUrl}/v1/me`, { headers: { authorization: `Bearer ${token}` } });
  if (r.status !== 200) throw new Error(`/v1/me answered ${r.status}`);
  return (await r.json()).usage;
}

export async function snapshot(server: Served, token: string): Promise<StoreSnapshot> {
  return withDbs(server, async (store) => {
    const dbs = {} as StoreSnapshot['dbs'];
    for (const name of CHARGED_DBS) dbs[name] = dump(store[name]);
    return { dbs, usage: await usageOf(server.baseUrl, token) };
  });
}

/** The audit record of a request, polled: the server writes it without awaiting. The bound is a
 * hang detector (5 s was missed on a host at load 40: fair-capacity failed), and no caller
 * expects a record to be absent, so a longer bound costs nothing when all is well. */
export async function auditOf(server: Served, requestId: string, waitMs = 20_000): Promise<any | undefined> {
  const find = () => withDbs(server, (store) => {
    store.audit.resetReadTxn?.();
    for (const { value } of store.audit.getRange({ reverse: true, limit: 500 })) {
      if ((value as { request_id: string }).request_id === requestId) return value as object;
    }
    return undefined;
  });
  // undefined when it never comes: the caller asserts on it
  return waitFor(find, { timeoutMs: waitMs, intervalMs: 50, what: `the audit record of ${requestId}` }).catch((err: unknown) => {
    if (err instanceof WaitTimeout) return undefined;
    throw err;
  });
}

/** Count of audit records (to find those of requests whose answer carried no request id). */
export async function auditRecords(server: Served): Promise<any[]> {
  return withDbs(server, (store) => {
    store.audit.resetReadTxn?.();
    return [...store.audit.getRange({})].map((e: { value: unknown }) => e.value);
  });
}

export interface Answer {
  status: number;
  json: any;
  /** X-Request-ID of the answer */
  requestId: string | null;
}

/** Runs a request that must be rejected, then checks that it charged and stored nothing
 * (usage on /v1/me, ledger, counters, reservations, idempotency records, results unchanged)
 * and that its audit line records the status and error code. */
export async function expectRejected(
  t: Test,
  server: Served,
  token: { id: string; token: string },
  send: () => Promise<Answer>,
  want: { status: number; code: string },
): Promise<Answer> {
  const before = await snapshot(server, token.token);
  const answer = await send();
  t.equal(answer.status, want.status, `answered ${want.status}`);
  const code = answer.status === 422 ? 'invalid_input' : answer.json?.error?.code;
  t.equal(code, want.code, `error code ${want.code}`);
  if (answer.status === 422) {
    t.ok(Array.isArray(answer.json?.detail) && answer.json.detail.length > 0, '422 carries a detail list');
    for (const d of answer.json?.detail ?? []) t.ok(Array.isArray(d.loc) && typeof d.msg === 'string' && typeof d.type === 'string', `detail item has loc/msg/type: ${JSON.stringify(d).slice(0, 200)}`);
  } else {
    t.equal(answer.json?.request_id, answer.requestId, 'error body carries the request id');
  }
  t.ok(answer.requestId, 'X-Request-ID present');
  const audit = answer.requestId ? await auditOf(server, answer.requestId) : undefined;
  t.ok(audit, 'an audit line exists');
  if (audit) {
    t.equal(audit.status, want.status, 'audit status');
    t.equal(audit.error_code, want.code, 'audit error code');
    t.equal(audit.charged_units, 0, 'audit: nothing charged');
    t.equal(audit.token_id, token.id, 'audit: token');
  }
  const after = await snapshot(server, token.token);
  t.same(after.usage, before.usage, 'usage on /v1/me unchanged');
  for (const name of CHARGED_DBS) t.equal(after.dbs[name], before.dbs[name], `${name} unchanged`);
  return answer;
}

/** fetch-based POST to verify, as an Answer. */
export async function post(
  baseUrl: string,
  token: string,
  body: { body: Uint8Array; contentType: string },
  opts: { module?: string; headers?: Record<string, string> } = {},
): Promise<Answer> {
  const r = await postVerify(baseUrl, token, opts.module ?? 'rgb_liveness', body, opts.headers);
  return { status: r.status, json: r.json, requestId: r.headers.get('x-request-id') };
}

export function rawAnswer(r: RawResponse): Answer {
  return { status: r.status, json: r.json, requestId: r.headers['x-request-id'] ?? null };
}

/** A valid request of `n` rgb_single captures whose body is exactly `total` bytes: each PNG is
 * padded (ancillary chunk) so that the whole multipart body, overhead included, hits the size. */
export function requestOfSize(total: number, n: number, pixels: (i: number) => Uint8Array): { body: Buffer; contentType: string; imageSizes: number[] } {
  const build = (sizes: number[]) => {
    const built = buildBatch(sizes.map((size, i) => ({
      capture_id: `exact-${i}`,
      mode: 'rgb_single' as const,
      frames: [{ timestamp_us: 1000, source_size: [640, 480] as [number, number], eyes_xy: [[280, 200], [360, 202]] as [[number, number], [number, number]], image: { bytes: pngOfSize(pixels(i), size) } }],
    })));
    return buildVerifyBody(built.metadata, built.files);
  };
  let sizes = Array.from({ length: n }, () => Math.floor((total - 64 * 1024) / n));
  const first = build(sizes);
  let missing = total - first.body.length;
  sizes = sizes.map((s) => {
    const add = Math.min(missing, PART_LIMIT - s);
    missing -= add;
    return s + add;
  });
  if (missing !== 0) throw new RangeError(`requestOfSize: ${total} bytes do not fit in ${n} images of at most 1 MiB`);
  const out = build(sizes);
  if (out.body.length !== total) throw new Error(`requestOfSize: built ${out.body.length}, wanted ${total}`);
  return { ...out, imageSizes: sizes };
}

/** metadata + files -> a verify body (one packet, or an envelope with `batch`). */
export { request as body } from './captures.ts';

/** A verify call holding a capacity slot: its head and half of a valid body sent, the rest kept. */
export interface HeldSlot {
  conn: RawConn;
  rest: Buffer;
}

/** Sends a verify head and half of a valid body on `conn`, from `address` (X-Forwarded-For,
 * believed from a loopback proxy), then stops: the call holds a slot until `finishHeld`. No
 * timing decides who holds what. */
export async function holdSlot(conn: RawConn, token: string, address: string): Promise<HeldSlot> {
  const b = captureBody([smallSingle()]);
  const half = Math.floor(b.body.length / 2);
  await conn.write(verifyHead({ token, contentType: b.contentType, contentLength: b.body.length, extra: { 'X-Forwarded-For': address } }));
  await conn.write(b.body.subarray(0, half));
  return { conn, rest: b.body.subarray(half) };
}

/** Sends the rest of a held call's body; its answer's status. */
export async function finishHeld(h: HeldSlot): Promise<number> {
  await writeBody(h.conn, h.rest);
  const r = await h.conn.response();
  h.conn.close();
  return r.status;
}

/** A verify head alone from `address` on a new connection, and the answer it gets before any
 * body (an admission refusal). */
export async function headOnly(port: number, token: string, address: string): Promise<Answer> {
  const b = captureBody([smallSingle()]);
  const conn = new RawConn(port);
  await conn.connected;
  await conn.write(verifyHead({ token, contentType: b.contentType, contentLength: b.body.length, extra: { 'X-Forwarded-For': address } }));
  const r = await conn.response();
  conn.close();
  return rawAnswer(r);
}
