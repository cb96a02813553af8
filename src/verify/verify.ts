import { authenticateCaller } from '../auth/index.ts';
import { retryAfter as retryAfterHeader, ServiceError } from '../errors/index.ts';
import { InferenceFailedError, type ResultRecord } from '../inference/index.ts';
import { countryOf, outcomeOfBody, outcomeOfResults, requestFingerprint } from '../metering/index.ts';
import { type ParsedMetadata } from '../packets/index.ts';
import { MODULE_IDS, type ModuleId } from '../contract/index.ts';
import { StoreUnavailableError, type AuditOutcome, type Reservation, type TokenRecord, type DeviceSession } from '../store/index.ts';
import { UnrecordedCallError } from './store-outcomes.ts';
import { earlyMetadata } from './early-metadata.ts';
import { refusal, replayed, verdict, worthLogging } from './outcomes.ts';
import type { AdmissionRefusal, ReceivedPart, VerifyAnswer, VerifyDeps, VerifyRequest, VerifyStep } from './ports.ts';
import { prepareRequest, type PreparedRequest } from './prepare.ts';

// POST /v1/modules/{module_id}/verify as the contract orders it:
//   accept   token (401), module (404), grant (403), enabled (403), models ready (503),
//            store writing (503 store_unavailable while it fails writes: a full disk)
//   admit    a host-wide capacity slot (503 server_busy), before any byte of the body
//   receive  Idempotency-Key (400), body headers (400/413/415), the streamed body (413/422)
//   validate metadata, parts, hashes and every image (422)
//   reserve  idempotency (409, or a replay) and quota (429), in one transaction
//   infer    the module's networks (500 inference_failed, units refunded)
//   settle   charge, save the answer on the key, store the results (500 settlement_failed;
//            503 store_unavailable when the store could not write it: units given back)
//   respond  audit line and detached signature on every answer, errors included
// Every answer a call can get is listed in outcomes.ts.
// accept awaits the store (token, module enabled: PostgreSQL answers asynchronously); meanwhile
// the transport holds the body, its socket paused (HttpContext.holdUnclaimedBody), so no body
// byte is read before the capacity slot is taken.

/** One verify call: what its steps have learnt so far and what it holds until it is over.
 * The audit line, the metrics and the request log line read it as far as the call got. */
export interface VerifyCall {
  readonly req: VerifyRequest;
  /** the business token charged: the caller's, or the parent of the caller's device session */
  token: TokenRecord | null;
  /** the device session the call was made with, if any */
  session: DeviceSession | null;
  moduleId: ModuleId | null;
  /** the capacity slot, given back when the call is over */
  releaseSlot: (() => void) | null;
  /** the body's parts once all arrived, given back when the call is over */
  parts: ReceivedPart[];
  /** the metadata as parsed the moment its part ended, if it did */
  early: () => ParsedMetadata | undefined;
  prepared: PreparedRequest | null;
  /** the call's time: its quota window, its records and the demo archive's name */
  at: number;
  reservation: Reservation | null;
  captures: number;
  /** units held by the reservation, for the metrics and the request log line */
  reserved: number;
  charged: number;
  refunded: number;
  results: ResultRecord[] | null;
  /** set once the call has an answer with results (a first answer or a replay) */
  outcome: AuditOutcome | null;
  replayed: boolean;
}

/** Runs the call to its signed answer, whatever the outcome (every answer is in
 * outcomes.ts); the slot and the parts are given back before the answer is audited and
 * signed. Rejects only if the audit hand-off itself throws. */
export async function verify(req: VerifyRequest, deps: VerifyDeps): Promise<VerifyAnswer> {
  const call = openCall(req);
  let answer: VerifyAnswer;
  try {
    await timed(deps, 'accept', () => accept(call, deps));
    traced(deps, 'admit', () => admit(call, deps));
    // in the same tick as admit: no await between the slot and the body's reader
    const upload = receive(call);
    call.parts = await timed(deps, 'receive', () => upload);
    timed(deps, 'validate', () => validate(call));
    const replay = await timed(deps, 'reserve', () => reserve(call, deps));
    if (replay) {
      answer = replay;
    } else {
      await timed(deps, 'infer', () => infer(call, deps));
      answer = await timed(deps, 'settle', () => settle(call, deps));
    }
  } catch (err) {
    answer = refused(call, deps, err);
  } finally {
    release(call);
  }
  return respond(call, deps, answer);
}

function openCall(req: VerifyRequest): VerifyCall {
  return {
    req, token: null, session: null, moduleId: null, releaseSlot: null, parts: [], early: () => undefined, prepared: null, at: 0, reservation: null,
    captures: 0, reserved: 0, charged: 0, refunded: 0, results: null, outcome: null, replayed: false,
  };
}

// ---------------------------------------------------------------------------------------------
// The steps

async function accept(call: VerifyCall, deps: VerifyDeps): Promise<void> {
  ({ token: call.token, session: call.session } = await authenticate(call.req, deps));
  if (!(MODULE_IDS as readonly string[]).includes(call.req.moduleParam)) {
    throw new ServiceError('module_not_found', `Unknown module ${JSON.stringify(call.req.moduleParam.slice(0, 64))}`);
  }
  const moduleId = call.req.moduleParam as ModuleId;
  call.moduleId = moduleId;
  if (call.session && call.session.module_id !== moduleId) throw new ServiceError('session_not_allowed', `This session verifies with ${call.session.module_id} only`);
  if (!call.token.grants.some((g) => g.module_id === moduleId)) throw new ServiceError('module_forbidden');
  if (!(await deps.store.moduleEnabled(moduleId))) throw new ServiceError('module_disabled');
  if (!deps.inference.readiness().find((m) => m.module_id === moduleId)?.ready) {
    throw new ServiceError('module_unavailable', 'The module\'s models are not loaded yet', retryAfter(deps));
  }
  // the call could be neither reserved nor settled: refused before its upload, charging
  // nothing (the store's probe lifts this once writes work again)
  if (deps.metering.writesFailing?.()) throw new ServiceError('store_unavailable', undefined, retryAfter(deps));
}

/** Who is calling: the live business token the request's credential resolves to, itself or
 * as the parent of a live device session (401 otherwise). */
function authenticate(req: VerifyRequest, deps: VerifyDeps): Promise<{ token: TokenRecord; session: DeviceSession | null }> {
  return authenticateCaller(deps.store, req.authorization, deps.now(), deps.tokens, deps.sessions);
}

const BUSY_MESSAGES: Record<AdmissionRefusal, string> = {
  host: 'No capacity slot available; retry after the indicated delay',
  address: 'Too many concurrent verify calls from this client address; retry after the indicated delay',
  token: 'Too many concurrent verify calls with this token; retry after the indicated delay',
};

function admit(call: VerifyCall, deps: VerifyDeps): void {
  const release = deps.admission.tryAcquire(call.req.clientAddress, call.token!.id);
  if (typeof release === 'string') {
    deps.metrics.busy();
    throw new ServiceError('server_busy', BUSY_MESSAGES[release], retryAfter(deps));
  }
  call.releaseSlot = release;
}

const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,200}$/;

function receive(call: VerifyCall): Promise<ReceivedPart[]> {
  const { req } = call;
  if (req.idempotencyKey !== undefined && !IDEMPOTENCY_KEY.test(req.idempotencyKey)) throw new ServiceError('invalid_idempotency_key');
  const metadata = earlyMetadata(call.moduleId!);
  call.early = metadata.parsed;
  return req.openBody(metadata.onPartEnd);
}

// From validation on, the call needs the parts' names and hashes (fingerprint) and the
// decoded pixels, not the body: validation gives the storage back as it goes, rather than
// after inference, so calls queued for the engine do not hold their uploads too. A demo
// call keeps the bytes for its archive.
function validate(call: VerifyCall): void {
  const prepared = prepareRequest(call.moduleId!, call.parts, call.early(), !call.token!.demo);
  call.prepared = prepared;
  call.captures = prepared.captures.length;
}

/** Idempotency and quota in one store transaction: a reservation, or the key's stored answer. */
async function reserve(call: VerifyCall, deps: VerifyDeps): Promise<VerifyAnswer | null> {
  const { req } = call;
  const moduleId = call.moduleId!;
  const prepared = call.prepared!;
  call.at = deps.now();
  const key = req.idempotencyKey ?? null;
  // parseMetadata returns the parsed objects themselves, so the metadata is not parsed again
  const { batch, captures } = prepared.parsed;
  const fingerprint = key === null ? null : requestFingerprint(moduleId, batch ? { captures } : captures[0], prepared.files);
  const booked = await deps.metering.reserve({
    token: call.token!, moduleId, units: prepared.captures.length, requestId: req.requestId, idempotencyKey: key, fingerprint, at: call.at, retryAfterSeconds: deps.config.RETRY_AFTER_SECONDS, sessionId: call.session?.id ?? null,
  });
  if (booked.kind === 'replay') {
    call.replayed = true;
    call.outcome = outcomeOfBody(booked.status, booked.body);
    return replayed(booked.status, booked.body);
  }
  call.reservation = booked.reservation;
  call.reserved = booked.reservation.units;
  return null;
}

/** The module's networks; any failure refunds the reservation before it is answered. */
async function infer(call: VerifyCall, deps: VerifyDeps): Promise<void> {
  const reservation = call.reservation!;
  const prepared = call.prepared!;
  try {
    if (call.token!.demo) await deps.metering.archiveDemoUpload(deps.config.DATA_DIR, call.at, call.req.requestId, prepared.metadataText, prepared.files);
    const started = performance.now();
    const results = await deps.inference.infer({ module_id: call.moduleId!, captures: prepared.captures });
    deps.metrics.inferenceSeconds(call.moduleId!, (performance.now() - started) / 1000);
    call.results = results;
    call.outcome = outcomeOfResults(results);
  } catch (err) {
    await deps.metering.refund(reservation.id, deps.now());
    call.refunded = reservation.units;
    if (err instanceof InferenceFailedError) throw new ServiceError('inference_failed');
    throw err;
  }
}

/** The charge, the answer saved on the key and the results, in one store write. */
async function settle(call: VerifyCall, deps: VerifyDeps): Promise<VerifyAnswer> {
  const reservation = call.reservation!;
  const { req, moduleId, results } = call;
  const body = await deps.metering.settle(
    reservation,
    deps.now(),
    (usage) => JSON.stringify({ request_id: req.requestId, module_id: moduleId, charged_units: reservation.units, results, usage }),
    results,
  ).catch((err: unknown) => {
    if (err instanceof UnrecordedCallError && err.outcome === 'refunded') call.refunded = reservation.units;
    throw err;
  });
  call.charged = reservation.units;
  return verdict(body);
}

/** A step's failure as the call's answer; the operator hears of what the client did not cause. */
function refused(call: VerifyCall, deps: VerifyDeps, err: unknown): VerifyAnswer {
  // a verify call meets the database away (restarting, failing over): what it held is given
  // back by the node, and the client is told to retry the same key (503 with Retry-After)
  if (err instanceof StoreUnavailableError) err = new UnrecordedCallError('not_answering', err);
  const answer = refusal(err, call.req.requestId, deps.config.RETRY_AFTER_SECONDS);
  if (worthLogging(err)) {
    const cause = (err as Error).cause;
    deps.log.error({ err, cause: cause instanceof Error ? cause.message : cause, request_id: call.req.requestId }, 'verify failed');
  }
  return answer;
}

// Every outcome gives the storage and the slot back (both releases are idempotent), before
// the answer is audited and signed, so a client's next call finds its slot free.
function release(call: VerifyCall): void {
  for (const part of call.parts) part.release?.();
  call.releaseSlot?.();
}

/** Every answer, errors included, is audited and carries a detached JWS over its exact body
 * bytes, so a backend can tell whether a device forwarded the service's verdict unchanged.
 * The metrics and the request log line describe the answer as decided, before signing. */
function respond(call: VerifyCall, deps: VerifyDeps, answer: VerifyAnswer): Promise<VerifyAnswer> {
  call.req.record(call, answer.status, answer.errorCode, call.replayed);
  return timed(deps, 'respond', () => auditAndSign(call, deps, answer));
}

async function auditAndSign(call: VerifyCall, deps: VerifyDeps, answer: VerifyAnswer): Promise<VerifyAnswer> {
  audit(call, deps, answer.status, answer.errorCode ?? null);
  // a client that went away gets nothing, so there is nothing to sign
  if (answer.body === undefined) return answer;
  const body = typeof answer.body === 'string' ? answer.body : JSON.stringify(answer.body);
  try {
    const signature = await deps.sign(body);
    return { ...answer, body, contentType: 'application/json', headers: { ...answer.headers, 'X-Verdict-Signature': signature } };
  } catch (err) {
    deps.log.error({ err }, 'verdict signing failed');
    return { ...answer, body, contentType: 'application/json' };
  }
}

function audit(call: VerifyCall, deps: VerifyDeps, status: number, errorCode: string | null): void {
  const { req } = call;
  const record = {
    request_id: req.requestId,
    at: new Date(deps.now()).toISOString(),
    token_id: call.token?.id ?? null,
    module_id: call.moduleId,
    client_ip: req.clientAddress,
    country: countryOf(req.clientAddress),
    status: req.aborted() ? 499 : status,
    error_code: errorCode,
    captures: call.captures,
    charged_units: call.charged,
    latency_ms: Math.round((performance.now() - req.startedAt) * 10) / 10,
    outcome: status === 200 && !req.aborted() && call.outcome ? call.outcome : 'error',
    replayed: call.replayed,
    ...(call.session ? { session_id: call.session.id } : {}),
  } satisfies Parameters<VerifyDeps['store']['writeAudit']>[0];
  // not awaited: off the answer's path. A line the store could not write (a full disk) goes
  // to the log whole, so it is not lost; the store counts the failure (write-health.ts).
  void deps.store.writeAudit(record).catch((err) => deps.log.error({ err, audit: record }, 'audit write failed; the audit line is in this log entry'));
}

// Each step's time goes to lv_verify_step_seconds, so an operator (and bench/side-by-side)
// sees where a call's latency goes: the client's upload, the store's commits, the engine.
// The same wrapper opens the step's span when the call is traced (src/observability/tracing.ts).
// One wrapper for both kinds of step: a synchronous one (validate) is timed without an await,
// an asynchronous one until its promise settles, either way whatever the outcome.
function timed<T>(deps: VerifyDeps, step: VerifyStep, run: () => T): T {
  const started = performance.now();
  const record = () => deps.metrics.stepSeconds(step, (performance.now() - started) / 1000);
  let out: T;
  try {
    out = deps.trace ? deps.trace.step(step, run) : run();
  } catch (err) {
    record();
    throw err;
  }
  if (out instanceof Promise) return out.finally(record) as T;
  record();
  return out;
}

/** A step in the call's trace only (no metric of its own): admission, which never waits. */
function traced<T>(deps: VerifyDeps, step: string, run: () => T): T {
  return deps.trace ? deps.trace.step(step, run) : run();
}

function retryAfter(deps: VerifyDeps): Record<string, string> {
  return retryAfterHeader(deps.config.RETRY_AFTER_SECONDS);
}
