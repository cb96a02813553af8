import { authenticateCaller } from '../auth/device-session.ts';
import { now } from '../clock.ts';
import { retryAfter as retryAfterHeader, ServiceError } from '../errors/index.ts';
import { InferenceFailedError, type ResultRecord } from '../inference/types.ts';
import { countryOf, outcomeOfBody, outcomeOfResults, requestFingerprint } from '../metering/index.ts';
import { MODULE_IDS, type ModuleId } from '../packets/types.ts';
import { signBody, signerOf } from '../signing/index.ts';
import type { AuditOutcome, Reservation, TokenRecord } from '../store/records.ts';
import type { DeviceSession } from '../store/device-sessions.ts';
import { UnrecordedCallError } from './store-outcomes.ts';
import { earlyMetadata } from './early-metadata.ts';
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
// accept awaits the store (token, module enabled: PostgreSQL answers asynchronously); meanwhile
// the transport holds the body, its socket paused (HttpContext.holdUnclaimedBody), so no body
// byte is read before the capacity slot is taken.

/** What the audit line of a call needs, filled in as the steps get that far. */
export interface CallTrace {
  /** the business token charged: the caller's, or the parent of the caller's session */
  token: TokenRecord | null;
  /** a call made with a device session token */
  session?: DeviceSession | null;
  moduleId: ModuleId | null;
  captures: number;
  charged: number;
  /** for the metrics and the request log line (recordVerify) */
  reserved: number;
  refunded: number;
  results: ResultRecord[] | null;
  /** for the audit: set once the call has an answer with results (a first answer or a replay) */
  outcome?: AuditOutcome | null;
  replayed?: boolean;
}

/** Runs the call up to its answer. Rejects with the step's error (ServiceError,
 * ValidationFailure, or the transport's client-gone error); the slot is released either way. */
export async function verify(req: VerifyRequest, deps: VerifyDeps, trace: CallTrace): Promise<VerifyAnswer> {
  const { token, moduleId } = await timed(deps, 'accept', () => accept(req, deps, trace));
  const release = admit(req, deps, token);
  try {
    const upload = receive(req, moduleId);
    return afterUpload(req, deps, trace, token, moduleId, upload)
      .catch((err: unknown) => {
        // a write the store could not make: the client waits as for a busy server
        if (err instanceof UnrecordedCallError) err.headers['Retry-After'] ??= retryAfter(deps)['Retry-After'];
        throw err;
      })
      .finally(release);
  } catch (err) {
    release();
    throw err;
  }
}

async function afterUpload(req: VerifyRequest, deps: VerifyDeps, trace: CallTrace, token: TokenRecord, moduleId: ModuleId, upload: Upload): Promise<VerifyAnswer> {
  const parts = await timed(deps, 'receive', () => upload.parts);
  try {
    return await afterReceive(req, deps, trace, token, moduleId, parts, upload.early());
  } finally {
    // every outcome gives the storage back (release is idempotent)
    for (const part of parts) part.release?.();
  }
}

async function afterReceive(req: VerifyRequest, deps: VerifyDeps, trace: CallTrace, token: TokenRecord, moduleId: ModuleId, parts: ReceivedPart[], early: ReturnType<Upload['early']>): Promise<VerifyAnswer> {
  // From validation on, the call needs the parts' names and hashes (fingerprint) and the
  // decoded pixels, not the body: validation gives the storage back as it goes, rather than
  // after inference, so calls queued for the engine do not hold their uploads too. A demo
  // call keeps the bytes for its archive.
  const prepared = timed(deps, 'validate', () => validate(moduleId, parts, early, !token.demo));
  trace.captures = prepared.captures.length;
  const at = now();
  const booked = await timed(deps, 'reserve', () => reserve(req, deps, token, moduleId, prepared, at, trace.session?.id ?? null));
  if (booked.kind === 'replay') {
    trace.replayed = true;
    trace.outcome = outcomeOfBody(booked.answer.status, booked.answer.body as string);
    return booked.answer;
  }
  trace.reserved = booked.reservation.units;
  const results = await timed(deps, 'infer', () => infer(req, deps, trace, token, moduleId, prepared, booked.reservation, at));
  trace.results = results;
  trace.outcome = outcomeOfResults(results);
  const body = await timed(deps, 'settle', () => settle(req, deps, moduleId, booked.reservation, results)).catch((err: unknown) => {
    if (err instanceof UnrecordedCallError && err.outcome === 'refunded') trace.refunded = booked.reservation.units;
    throw err;
  });
  trace.charged = booked.reservation.units;
  return { status: 200, body, contentType: 'application/json' };
}

// ---------------------------------------------------------------------------------------------
// The steps

async function accept(req: VerifyRequest, deps: VerifyDeps, trace: CallTrace): Promise<{ token: TokenRecord; moduleId: ModuleId }> {
  const { token, session } = await authenticateCaller(deps.store, req.authorization, now(), deps.tokens);
  trace.token = token;
  trace.session = session;
  if (!(MODULE_IDS as readonly string[]).includes(req.moduleParam)) {
    throw new ServiceError('module_not_found', `Unknown module ${JSON.stringify(req.moduleParam.slice(0, 64))}`);
  }
  const moduleId = req.moduleParam as ModuleId;
  trace.moduleId = moduleId;
  if (session && session.module_id !== moduleId) throw new ServiceError('session_not_allowed', `This session verifies with ${session.module_id} only`);
  if (!token.grants.some((g) => g.module_id === moduleId)) throw new ServiceError('module_forbidden');
  if (!(await deps.store.moduleEnabled(moduleId))) throw new ServiceError('module_disabled');
  if (!deps.inference.readiness().find((m) => m.module_id === moduleId)?.ready) {
    throw new ServiceError('module_unavailable', 'The module\'s models are not loaded yet', retryAfter(deps));
  }
  // the call could be neither reserved nor settled: refused before its upload, charging
  // nothing (the store's probe lifts this once writes work again)
  if (deps.metering.writesFailing?.()) throw new ServiceError('store_unavailable', undefined, retryAfter(deps));
  return { token, moduleId };
}

const BUSY_MESSAGES: Record<AdmissionRefusal, string> = {
  host: 'No capacity slot available; retry after the indicated delay',
  address: 'Too many concurrent verify calls from this client address; retry after the indicated delay',
  token: 'Too many concurrent verify calls with this token; retry after the indicated delay',
};

function admit(req: VerifyRequest, deps: VerifyDeps, token: TokenRecord): () => void {
  const release = deps.admission.tryAcquire(req.clientAddress, token.id);
  if (typeof release === 'string') {
    deps.metrics.busy();
    throw new ServiceError('server_busy', BUSY_MESSAGES[release], retryAfter(deps));
  }
  return release;
}

const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,200}$/;

interface Upload {
  parts: Promise<ReceivedPart[]>;
  /** the metadata as parsed the moment its part ended, if it did */
  early(): ReturnType<ReturnType<typeof earlyMetadata>['parsed']>;
}

function receive(req: VerifyRequest, moduleId: ModuleId): Upload {
  if (req.idempotencyKey !== undefined && !IDEMPOTENCY_KEY.test(req.idempotencyKey)) throw new ServiceError('invalid_idempotency_key');
  const metadata = earlyMetadata(moduleId);
  return { parts: req.openBody(metadata.onPartEnd), early: metadata.parsed };
}

function validate(moduleId: ModuleId, parts: Awaited<Upload['parts']>, early: ReturnType<Upload['early']>, releaseParts: boolean): PreparedRequest {
  return prepareRequest(moduleId, parts, early, releaseParts);
}

type Booking = { kind: 'reserved'; reservation: Reservation } | { kind: 'replay'; answer: VerifyAnswer };

async function reserve(req: VerifyRequest, deps: VerifyDeps, token: TokenRecord, moduleId: ModuleId, prepared: PreparedRequest, at: number, sessionId: string | null): Promise<Booking> {
  const key = req.idempotencyKey ?? null;
  // parseMetadata returns the parsed objects themselves, so the metadata is not parsed again
  const { batch, captures } = prepared.parsed;
  const fingerprint = key === null ? null : requestFingerprint(moduleId, batch ? { captures } : captures[0], prepared.files);
  const outcome = await deps.metering.reserve({
    token, moduleId, units: prepared.captures.length, requestId: req.requestId, idempotencyKey: key, fingerprint, at, retryAfterSeconds: deps.config.RETRY_AFTER_SECONDS, sessionId,
  });
  if (outcome.kind === 'replay') {
    return { kind: 'replay', answer: { status: outcome.status, body: outcome.body, contentType: 'application/json', headers: { 'Idempotency-Replayed': 'true' } } };
  }
  return outcome;
}

async function infer(req: VerifyRequest, deps: VerifyDeps, trace: CallTrace, token: TokenRecord, moduleId: ModuleId, prepared: PreparedRequest, reservation: Reservation, at: number): Promise<ResultRecord[]> {
  try {
    if (token.demo) await deps.metering.archiveDemoUpload(deps.config.DATA_DIR, at, req.requestId, prepared.metadataText, prepared.files);
    const started = performance.now();
    const results = await deps.inference.infer({ module_id: moduleId, captures: prepared.captures });
    deps.metrics.inferenceSeconds(moduleId, (performance.now() - started) / 1000);
    return results;
  } catch (err) {
    await deps.metering.refund(reservation.id, now());
    trace.refunded = reservation.units;
    if (err instanceof InferenceFailedError) throw new ServiceError('inference_failed');
    throw err;
  }
}

function settle(req: VerifyRequest, deps: VerifyDeps, moduleId: ModuleId, reservation: Reservation, results: ResultRecord[]): Promise<string> {
  return deps.metering.settle(
    reservation,
    now(),
    (usage) => JSON.stringify({ request_id: req.requestId, module_id: moduleId, charged_units: reservation.units, results, usage }),
    results,
  );
}

/** Every answer, errors included, is audited and carries a detached JWS over its exact body
 * bytes, so a backend can tell whether a device forwarded the service's verdict unchanged. */
export function respond(req: VerifyRequest, deps: VerifyDeps, trace: CallTrace, answer: VerifyAnswer, errorCode: string | null): Promise<VerifyAnswer> {
  return timed(deps, 'respond', () => auditAndSign(req, deps, trace, answer, errorCode));
}

async function auditAndSign(req: VerifyRequest, deps: VerifyDeps, trace: CallTrace, answer: VerifyAnswer, errorCode: string | null): Promise<VerifyAnswer> {
  audit(req, deps, trace, answer.status, errorCode);
  // a client that went away gets nothing, so there is nothing to sign
  if (answer.body === undefined) return answer;
  const body = typeof answer.body === 'string' ? answer.body : JSON.stringify(answer.body);
  try {
    const signature = await signBody(signerOf(deps.store, deps.config.DATA_DIR), body);
    return { ...answer, body, contentType: 'application/json', headers: { ...answer.headers, 'X-Verdict-Signature': signature } };
  } catch (err) {
    deps.log.error({ err }, 'verdict signing failed');
    return { ...answer, body, contentType: 'application/json' };
  }
}

function audit(req: VerifyRequest, deps: VerifyDeps, trace: CallTrace, status: number, errorCode: string | null): void {
  const record = {
    request_id: req.requestId,
    at: new Date(now()).toISOString(),
    token_id: trace.token?.id ?? null,
    module_id: trace.moduleId,
    client_ip: req.clientAddress,
    country: countryOf(req.clientAddress),
    status: req.aborted() ? 499 : status,
    error_code: errorCode,
    captures: trace.captures,
    charged_units: trace.charged,
    latency_ms: Math.round((performance.now() - req.startedAt) * 10) / 10,
    outcome: status === 200 && !req.aborted() && trace.outcome ? trace.outcome : 'error',
    replayed: trace.replayed ?? false,
    ...(trace.session ? { session_id: trace.session.id } : {}),
  } satisfies Parameters<VerifyDeps['store']['writeAudit']>[0];
  // not awaited: off the answer's path. A line the store could not write (a full disk) goes
  // to the log whole, so it is not lost; the store counts the failure (write-health.ts).
  void deps.store.writeAudit(record).catch((err) => deps.log.error({ err, audit: record }, 'audit write failed; the audit line is in this log entry'));
}

// Each step's time goes to lv_verify_step_seconds, so an operator (and bench/side-by-side)
// sees where a call's latency goes: the client's upload, the store's commits, the engine.
// One wrapper for both kinds of step: a synchronous one (validate) is timed without an await,
// an asynchronous one until its promise settles, either way whatever the outcome.
function timed<T>(deps: VerifyDeps, step: VerifyStep, run: () => T): T {
  const started = performance.now();
  const record = () => deps.metrics.stepSeconds(step, (performance.now() - started) / 1000);
  let out: T;
  try {
    out = run();
  } catch (err) {
    record();
    throw err;
  }
  if (out instanceof Promise) return out.finally(record) as T;
  record();
  return out;
}

function retryAfter(deps: VerifyDeps): Record<string, string> {
  return retryAfterHeader(deps.config.RETRY_AFTER_SECONDS);
}
