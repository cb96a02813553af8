import { authenticateCaller } from '../auth/index.ts';
import { messageOf, retryAfter as retryAfterHeader, ServiceError } from '../errors/index.ts';
import { InferenceFailedError, type ResultRecord } from '../inference/index.ts';
import { countryOf, outcomeOfBody, outcomeOfResults, requestFingerprint } from '../metering/index.ts';
import { type ParsedMetadata } from '../packets/index.ts';
import { MODULE_IDS, type ModuleId } from '../contract/index.ts';
import { StoreUnavailableError, type AuditOutcome, type AuditRecord, type Reservation, type TokenRecord, type DeviceSession, type UsageRecord } from '../store/index.ts';
import { SettlementRefusedError, UnrecordedCallError } from './store-outcomes.ts';
import { earlyMetadata } from './early-metadata.ts';
import { refusal, replayed, verdict, worthLogging } from './outcomes.ts';
import type { ReceivedPart, VerifyAnswer, VerifyDeps, VerifyRequest, VerifyStep } from './ports.ts';
import { prepareRequest, type PreparedRequest } from './prepare.ts';
import { type EarlyClaim, type EarlyInference, workerEarlyInference } from './early-inference.ts';

// POST /v1/modules/{module_id}/verify as the contract orders it:
//   accept   token (401), module (404), grant (403), enabled (403), models ready (503),
//            store writing (503 store_unavailable while it fails writes: a full disk)
//   admit    a host-wide capacity slot (503 server_busy), before any byte of the body
//   receive  Idempotency-Key (400), body headers (400/413/415), the streamed body (413/422)
//   validate metadata, parts, hashes and every image (422)
//   reserve  idempotency (409, or a replay) and quota (429), in one transaction
//   infer    the module's networks (500 inference_failed, units refunded); for a key-less
//            call of a caller whose last reservation on this worker succeeded, for no more
//            images than this one sends, started as validate ends, beside the reservation, its
//            answer used only once the reservation is granted
//            (early-inference.ts says why that caller, and what bounds the engine's waste)
//   settle   charge, save the answer on the key, store the results (500 settlement_failed;
//            503 store_unavailable when the store could not write it: units given back)
//   respond  audit line and detached signature on every answer, errors included
// Every answer a call can get is listed in outcomes.ts.
// Each step takes what the earlier steps returned and returns what it learnt; the audit line,
// the metrics and the request log line are built from those values (factsOf), as far as the
// call got.
// accept awaits the store (token, module enabled: PostgreSQL answers asynchronously); meanwhile
// the transport holds the body, its socket paused (HttpContext.holdUnclaimedBody), so no body
// byte is read before the capacity slot is taken.

/** accept: who is calling, and the module the call names (null: not a module). */
interface Identity {
  /** the business token charged: the caller's, or the parent of the caller's device session */
  token: TokenRecord;
  /** the device session the call was made with, if any */
  session: DeviceSession | null;
  moduleId: ModuleId | null;
}

/** accept's answer: a caller allowed to verify with a module that is ready. */
interface Caller extends Identity {
  moduleId: ModuleId;
}

/** receive: the body's parts once all arrived, and the metadata as parsed the moment its part
 * ended, if it did. */
interface Upload {
  parts: Promise<ReceivedPart[]>;
  early(): ParsedMetadata | undefined;
}

/** reserve: the units held for the call (`at`: the call's time, its quota window, its records
 * and the demo archive's name), or the answer its Idempotency-Key already has. */
type Booking = Reserved | { kind: 'replay'; answer: VerifyAnswer; outcome: AuditOutcome };
interface Reserved {
  kind: 'reserved';
  reservation: Reservation;
  at: number;
}

/** infer: the module's results. */
interface Inferred {
  results: ResultRecord[];
  outcome: AuditOutcome;
}

/** What the call learnt, step by step, as far as it got: each step's value as the use case
 * received it, and what a step told before it refused (accept: the caller it identified;
 * infer and settle: the units given back). Only `verify` below writes it. */
interface Learnt {
  identity?: Identity;
  /** the capacity slot's release */
  slot?: () => void;
  /** the body's parts once all arrived */
  parts?: ReceivedPart[];
  prepared?: PreparedRequest;
  /** the inference started beside the reservation, if it was */
  early?: Promise<EngineAnswer>;
  booking?: Booking;
  inferred?: Inferred;
  /** the reservation's units are back: a failed inference, or a settlement the store could not record */
  refunded?: true;
  /** the reservation's units are charged */
  settled?: true;
}

/** Runs the call to its signed answer, whatever the outcome (every answer is in
 * outcomes.ts); the slot and the parts are given back before the answer is audited and
 * signed. Rejects only if the audit hand-off itself throws. */
export async function verify(req: VerifyRequest, deps: VerifyDeps): Promise<VerifyAnswer> {
  const learnt: Learnt = {};
  const refunded = () => (learnt.refunded = true);
  let answer: VerifyAnswer;
  try {
    const caller = await timed(deps, 'accept', () => accept(req, deps, (identity) => (learnt.identity = identity)));
    learnt.slot = traced(deps, 'admit', () => admit(req, caller, deps));
    // in the same tick as admit: no await between the slot and the body's reader
    const upload = receive(req, caller);
    const parts = (learnt.parts = await timed(deps, 'receive', () => upload.parts));
    const prepared = (learnt.prepared = timed(deps, 'validate', () => validate(caller, parts, upload.early())));
    const early = startedEarly(req, caller, prepared, deps);
    if (early) learnt.early = early.answer;
    const booking = (learnt.booking = await booked(caller, prepared, deps, early?.claim ?? null, () => timed(deps, 'reserve', () => reserve(req, caller, prepared, deps))));
    if (booking.kind === 'replay') {
      answer = booking.answer;
    } else {
      const inferred = (learnt.inferred = await timed(deps, 'infer', () => infer(req, caller, prepared, booking, deps, refunded, learnt.early ?? null)));
      answer = await timed(deps, 'settle', () => settle(req, caller, booking, inferred, deps, refunded));
      learnt.settled = true;
    }
  } catch (err) {
    answer = refused(req, deps, err);
  } finally {
    release(learnt);
  }
  return respond(req, deps, factsOf(learnt), answer);
}

// ---------------------------------------------------------------------------------------------
// The steps

/** Who is calling and whether it may verify with the module now. `identified` is told the
 * caller as soon as its credential resolves: a refusal after that is audited under it. */
async function accept(req: VerifyRequest, deps: VerifyDeps, identified: (identity: Identity) => void): Promise<Caller> {
  const { token, session } = await authenticate(req, deps);
  const moduleId = (MODULE_IDS as readonly string[]).includes(req.moduleParam) ? (req.moduleParam as ModuleId) : null;
  identified({ token, session, moduleId });
  if (moduleId === null) throw new ServiceError('module_not_found', messageOf('module_not_found', 'named', req.moduleParam));
  if (session && session.module_id !== moduleId) throw new ServiceError('session_not_allowed', messageOf('session_not_allowed', 'other_module', session.module_id));
  if (!token.grants.some((g) => g.module_id === moduleId)) throw new ServiceError('module_forbidden');
  if (!(await deps.store.moduleEnabled(moduleId))) throw new ServiceError('module_disabled');
  if (!deps.inference.readiness().find((m) => m.module_id === moduleId)?.ready) {
    throw new ServiceError('module_unavailable', messageOf('module_unavailable', 'models_loading'), retryAfter(deps));
  }
  // the call could be neither reserved nor settled: refused before its upload, charging
  // nothing (the store's probe lifts this once writes work again)
  if (deps.metering.writesFailing?.()) throw new ServiceError('store_unavailable', undefined, retryAfter(deps));
  return { token, session, moduleId };
}

/** Who is calling: the live business token the request's credential resolves to, itself or
 * as the parent of a live device session (401 otherwise). */
function authenticate(req: VerifyRequest, deps: VerifyDeps): Promise<{ token: TokenRecord; session: DeviceSession | null }> {
  return authenticateCaller(deps.store, req.authorization, deps.now(), deps.tokens, deps.sessions);
}

/** The call's capacity slot, as the release that gives it back. */
function admit(req: VerifyRequest, caller: Caller, deps: VerifyDeps): () => void {
  const release = deps.admission.tryAcquire(req.clientAddress, caller.token.id);
  if (typeof release === 'string') {
    deps.metrics.busy();
    throw new ServiceError('server_busy', messageOf('server_busy', release), retryAfter(deps));
  }
  return release;
}

const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,200}$/;

function receive(req: VerifyRequest, caller: Caller): Upload {
  if (req.idempotencyKey !== undefined && !IDEMPOTENCY_KEY.test(req.idempotencyKey)) throw new ServiceError('invalid_idempotency_key');
  const metadata = earlyMetadata(caller.moduleId);
  return { parts: req.openBody(metadata.onPartEnd), early: metadata.parsed };
}

// From validation on, the call needs the parts' names and hashes (fingerprint) and the
// decoded pixels, not the body: validation gives the storage back as it goes, rather than
// after inference, so calls queued for the engine do not hold their uploads too. A demo
// call keeps the bytes for its archive.
function validate(caller: Caller, parts: ReceivedPart[], early: ParsedMetadata | undefined): PreparedRequest {
  return prepareRequest(caller.moduleId, parts, early, !caller.token.demo);
}

/** Idempotency and quota in one store transaction: a reservation, or the key's stored answer. */
async function reserve(req: VerifyRequest, caller: Caller, prepared: PreparedRequest, deps: VerifyDeps): Promise<Booking> {
  const at = deps.now();
  const key = req.idempotencyKey ?? null;
  // parseMetadata returns the parsed objects themselves, so the metadata is not parsed again
  const { batch, captures } = prepared.parsed;
  const fingerprint = key === null ? null : requestFingerprint(caller.moduleId, batch ? { captures } : captures[0], prepared.files);
  const booked = await deps.metering.reserve({
    token: caller.token, moduleId: caller.moduleId, units: prepared.captures.length, requestId: req.requestId, idempotencyKey: key, fingerprint, at, retryAfterSeconds: deps.config.RETRY_AFTER_SECONDS, sessionId: caller.session?.id ?? null,
  });
  if (booked.kind === 'replay') return { kind: 'replay', outcome: outcomeOfBody(booked.status, booked.body), answer: replayed(booked.status, booked.body) };
  return { kind: 'reserved', reservation: booked.reservation, at };
}

/** The engine's answer to a call, kept as a value (an early inference is awaited only once the
 * reservation answers, so it must never be a rejection nobody handles yet). */
type EngineAnswer = { results: ResultRecord[]; seconds: number } | { error: unknown };

/** The call's captures through the engine. */
function runEngine(caller: Caller, prepared: PreparedRequest, deps: VerifyDeps): Promise<EngineAnswer> {
  const started = performance.now();
  let running: Promise<ResultRecord[]>;
  try {
    running = deps.inference.infer({ module_id: caller.moduleId, captures: prepared.captures });
  } catch (error) {
    return Promise.resolve({ error });
  }
  return running.then((results) => ({ results, seconds: (performance.now() - started) / 1000 }), (error: unknown) => ({ error }));
}

/** The inference started as validate ends, beside the reservation, when the caller may have
 * it (early-inference.ts); null: the call is serial. A demo call stays serial: its archive is
 * named by the reservation's time and written before its inference. A call with an
 * Idempotency-Key stays serial: it may be a replay (the spec: no inference) or a key conflict,
 * which only the reservation can tell. Not a step of its own: the call's `infer` step is its
 * wait for the engine once the reservation is granted. */
function startedEarly(req: VerifyRequest, caller: Caller, prepared: PreparedRequest, deps: VerifyDeps): { answer: Promise<EngineAnswer>; claim: EarlyClaim } | null {
  if (req.idempotencyKey !== undefined || caller.token.demo) return null;
  const claim = earlyMemory(deps)?.start(earlyKey(caller), images(prepared), prepared.captures.length);
  return claim ? { answer: runEngine(caller, prepared, deps), claim } : null;
}

/** The reservation's outcome, told to the early-inference memory with the call's claim on
 * its token's bound, if it started early (the reservation is started in here, so the claim is
 * given back however it fails). A call the reservation did not grant (a replay, a refusal, a
 * store failure) drops an early inference's answer and is answered at once; its parts wait for
 * the engine (release below). */
async function booked(caller: Caller, prepared: PreparedRequest, deps: VerifyDeps, claim: EarlyClaim | null, reserve: () => Promise<Booking>): Promise<Booking> {
  let reserved = false;
  try {
    const booking = await reserve();
    reserved = booking.kind === 'reserved';
    return booking;
  } finally {
    if (!caller.token.demo) earlyMemory(deps)?.booked(earlyKey(caller), reserved ? images(prepared) : null, claim);
  }
}

/** What the early-inference memory knows a call by: its token and module (a quota is a
 * token's grant of one module). */
function earlyKey(caller: Caller): string {
  return `${caller.token.id} ${caller.moduleId}`;
}

/** The units the settled answer's usage says the token has left for the call's module: the
 * least over its limits (Infinity: its grants have none; 0: the usage names none, so
 * nothing is assumed), for the early-inference memory. */
function unitsLeft(usage: UsageRecord[], moduleId: ModuleId): number {
  let left: number | null = null;
  for (const u of usage) if (u.module_id === moduleId) left = Math.min(left ?? Infinity, u.remaining ?? Infinity);
  return left ?? 0;
}

/** The usage an answer's body carries (none: an empty list, so no units known left). */
function usageOf(body: string): UsageRecord[] {
  try {
    const usage = (JSON.parse(body) as { usage?: unknown }).usage;
    return Array.isArray(usage) ? (usage as UsageRecord[]) : [];
  } catch {
    return [];
  }
}

/** The early-inference memory a call uses (VerifyDeps.earlyInference). */
function earlyMemory(deps: VerifyDeps): EarlyInference | null {
  return deps.earlyInference === undefined ? workerEarlyInference : deps.earlyInference;
}

/** The images a call's metadata references, each one the engine runs: the measure of an
 * early inference's bound (early-inference.ts). */
function images(prepared: PreparedRequest): number {
  return prepared.parsed.images.length;
}

/** The module's networks (the early inference's answer, when the call has one); any failure
 * refunds the reservation before it is answered. */
async function infer(req: VerifyRequest, caller: Caller, prepared: PreparedRequest, booking: Reserved, deps: VerifyDeps, refunded: () => void, early: Promise<EngineAnswer> | null): Promise<Inferred> {
  try {
    if (caller.token.demo) await deps.metering.archiveDemoUpload(deps.config.DATA_DIR, booking.at, req.requestId, prepared.metadataText, prepared.files);
    const engine = await (early ?? runEngine(caller, prepared, deps));
    if ('error' in engine) throw engine.error;
    deps.metrics.inferenceSeconds(caller.moduleId, engine.seconds);
    return { results: engine.results, outcome: outcomeOfResults(engine.results) };
  } catch (err) {
    await deps.metering.refund(booking.reservation.id, deps.now());
    refunded();
    if (err instanceof InferenceFailedError) throw new ServiceError('inference_failed');
    throw err;
  }
}

/** The charge, the answer saved on the key and the results, in one store write. */
async function settle(req: VerifyRequest, caller: Caller, { reservation }: Reserved, { results }: Inferred, deps: VerifyDeps, refunded: () => void): Promise<VerifyAnswer> {
  let left: number | null = null;
  const body = await deps.metering.settle(
    reservation,
    deps.now(),
    (usage) => {
      // LMDB renders with the usage itself; PostgreSQL with a placeholder its SQL replaces
      if (Array.isArray(usage)) left = unitsLeft(usage, caller.moduleId);
      return JSON.stringify({ request_id: req.requestId, module_id: caller.moduleId, charged_units: reservation.units, results, usage });
    },
    results,
  ).catch((err: unknown) => {
    // the units held are back already: the metrics count them refunded, as the ledger does
    if (err instanceof UnrecordedCallError && err.outcome === 'refunded') refunded();
    if (err instanceof SettlementRefusedError && err.refunded) refunded();
    throw err;
  });
  // the memory learns what the caller has left (a settlement that failed tells it nothing)
  if (!caller.token.demo) earlyMemory(deps)?.settled(earlyKey(caller), left ?? unitsLeft(usageOf(body), caller.moduleId));
  return verdict(body);
}

/** A step's failure as the call's answer; the operator hears of what the client did not cause. */
function refused(req: VerifyRequest, deps: VerifyDeps, err: unknown): VerifyAnswer {
  // a verify call meets the database away (restarting, failing over): what it held is given
  // back by the node, and the client is told to retry the same key (503 with Retry-After)
  if (err instanceof StoreUnavailableError) err = new UnrecordedCallError('not_answering', err);
  const answer = refusal(err, req.requestId, deps.config.RETRY_AFTER_SECONDS);
  if (worthLogging(err)) {
    const cause = (err as Error).cause;
    deps.log.error({ err, cause: cause instanceof Error ? cause.message : cause, request_id: req.requestId }, 'verify failed');
  }
  return answer;
}

// Every outcome gives the storage and the slot back (both releases are idempotent), before
// the answer is audited and signed, so a client's next call finds its slot free. The parts of
// a call whose inference started early go back once the engine has answered: it reads
// frame-slab pixels in place until then, and a call the reservation did not grant is answered
// without waiting for an engine answer it drops (a slow engine must not hold up a 429). The
// slot goes back with the answer all the same: the engine work a dropped inference leaves is
// bounded by early-inference.ts, not by the slots.
function release({ parts, slot, early }: Learnt): void {
  const free = () => {
    for (const part of parts ?? []) part.release?.();
  };
  if (early) void early.then(free);
  else free();
  slot?.();
}

// ---------------------------------------------------------------------------------------------
// The answer's facts

/** What the audit line, the metrics and the request log line say of the call. */
interface CallFacts {
  token: TokenRecord | null;
  session: DeviceSession | null;
  moduleId: ModuleId | null;
  /** the call got a capacity slot */
  admitted: boolean;
  captures: number;
  /** units held by the reservation, for the metrics and the request log line */
  reserved: number;
  charged: number;
  refunded: number;
  results: ResultRecord[] | null;
  /** the call's answer had results (a first answer or a replay) */
  outcome: AuditOutcome | null;
  replayed: boolean;
}

function factsOf({ identity, slot, prepared, booking, inferred, refunded, settled }: Learnt): CallFacts {
  const units = booking?.kind === 'reserved' ? booking.reservation.units : 0;
  return {
    token: identity?.token ?? null,
    session: identity?.session ?? null,
    moduleId: identity?.moduleId ?? null,
    admitted: slot !== undefined,
    captures: prepared?.captures.length ?? 0,
    reserved: units,
    charged: settled ? units : 0,
    refunded: refunded ? units : 0,
    results: inferred?.results ?? null,
    outcome: booking?.kind === 'replay' ? booking.outcome : (inferred?.outcome ?? null),
    replayed: booking?.kind === 'replay',
  };
}

/** Every answer, errors included, is audited and carries a detached JWS over its exact body
 * bytes, so a backend can tell whether a device forwarded the service's verdict unchanged.
 * The metrics and the request log line describe the answer as decided, before signing. */
function respond(req: VerifyRequest, deps: VerifyDeps, facts: CallFacts, answer: VerifyAnswer): Promise<VerifyAnswer> {
  req.record(facts, answer.status, answer.errorCode, facts.replayed);
  return timed(deps, 'respond', () => auditAndSign(req, deps, facts, answer));
}

async function auditAndSign(req: VerifyRequest, deps: VerifyDeps, facts: CallFacts, answer: VerifyAnswer): Promise<VerifyAnswer> {
  audit(req, deps, facts, answer.status, answer.errorCode ?? null);
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

function audit(req: VerifyRequest, deps: VerifyDeps, facts: CallFacts, status: number, errorCode: string | null): void {
  const record = {
    request_id: req.requestId,
    at: new Date(deps.now()).toISOString(),
    token_id: facts.token?.id ?? null,
    module_id: facts.moduleId,
    client_ip: req.clientAddress,
    country: countryOf(req.clientAddress),
    status: req.aborted() ? 499 : status,
    error_code: errorCode,
    captures: facts.captures,
    charged_units: facts.charged,
    latency_ms: Math.round((performance.now() - req.startedAt) * 10) / 10,
    outcome: status === 200 && !req.aborted() && facts.outcome ? facts.outcome : 'error',
    replayed: facts.replayed,
    ...(facts.session ? { session_id: facts.session.id } : {}),
  } satisfies Parameters<VerifyDeps['store']['writeAudit']>[0];
  // not awaited: off the answer's path. A line the store could not write (a full disk) goes
  // to the log whole, so it is not lost; the store counts the failure (write-health.ts).
  const lost = (err: unknown, line: AuditRecord) => deps.log.error({ err, audit: line }, 'audit write failed; the audit line is in this log entry');
  // A call refused before it held a capacity slot (token, module, grant, readiness, a full
  // host) costs the host next to nothing, so nothing bounds how many come: it is counted in a
  // row per minute (store/refusal-tally.ts) rather than a row of its own, so a flood of them
  // cannot grow the store without bound. A call that got a slot keeps its own row.
  const counted = !facts.admitted && status !== 200;
  void deps.store.writeAudit(record, counted ? lost : undefined).catch((err: unknown) => lost(err, record));
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
