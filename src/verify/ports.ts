import type { SessionLookup } from '../auth/index.ts';
import type { Config } from '../config/index.ts';
import type { InferenceService } from '../inference/index.ts';
import type { CallTrace, Logger, VerifyFacts } from '../observability/index.ts';
import type { AuditWrites, CallerReads, ModuleReads, TokenRecord } from '../store/index.ts';
import type { Metering } from './metering.ts';
import type { EarlyInference } from './early-inference.ts';

/** One multipart part as the transport received it, hashed as its bytes arrived. */
export interface ReceivedPart {
  name: string;
  filename: string | null;
  contentType: string | null;
  size: number;
  /** Lowercase hex SHA-256 of exactly the part's bytes. */
  sha256: string;
  /**
   * The part's bytes: a view of a frame-slab slot (shared memory, which inference threads read
   * in place; src/images/frame-slab.ts), or a Buffer covering the whole of its own ArrayBuffer.
   */
  data(): Buffer;
  /** Gives the part's storage back now rather than at the next garbage collection; data() is
   * empty afterwards. The use case calls it once the call no longer needs the bytes. */
  release?(): void;
}

/** Not an HTTP error: the client went away mid-upload, so there is nobody left to answer; the
 * call is only logged (a 499 on its audit line and request log line) and released. This is how
 * `openBody` rejects then. */
export class ClientGoneError extends Error {}

/** What the verify use case needs from the transport: the request's values, copied before the
 * first await, its body, and where the facts of its answer go. */
export interface VerifyRequest {
  requestId: string;
  /** path parameter, not yet known to be a module */
  moduleParam: string;
  authorization: string | undefined;
  idempotencyKey: string | undefined;
  /** the client by the audit's rule (the peer, or X-Forwarded-For from a trusted proxy) */
  clientAddress: string;
  /** monotonic ms when the request arrived, for the audit's latency */
  startedAt: number;
  /** Checks the body's framing headers (400 invalid_content_length, 413, 415: thrown at once)
   * and starts streaming the body; `onPartEnd` sees each part as it completes. Called in the
   * same tick as the request arrived: the transport delivers no body to a reader set later. */
  openBody(onPartEnd: (part: ReceivedPart) => void): Promise<ReceivedPart[]>;
  /** the client went away before the answer */
  aborted(): boolean;
  /** The answer as decided, before it is signed: the metrics and the request log line
   * (src/observability/request-facts.ts), which the transport keeps beside its request. */
  record(facts: VerifyFacts, status: number, errorCode: string | undefined, replayed: boolean): void;
}

/** Why admission refused a call (see src/http/capacity.ts). */
export type AdmissionRefusal = 'host' | 'address' | 'token';

export interface Admission {
  /** an idempotent release, or why not */
  tryAcquire(address: string, tokenId: string): (() => void) | AdmissionRefusal;
}

export interface VerifyDeps {
  config: Pick<Config, 'DATA_DIR' | 'RETRY_AFTER_SECONDS'>;
  /** the caller's token or device session (when `tokens` or `sessions` do not answer), whether
   * the module is on, the audit line */
  store: CallerReads & ModuleReads & AuditWrites;
  /** token reads for accept, read through a short cache or not as the composition root chose
   * for its store (the reservation re-checks the token either way) */
  tokens: (hash: string) => Promise<TokenRecord | undefined>;
  /** device-session reads (session and parent token) for accept, cached or not likewise
   * (absent: straight from the store); the reservation re-checks both */
  sessions?: SessionLookup;
  /** the clock of quota windows, token expiry and record times (src/clock.ts) */
  now(): number;
  /** the detached JWS of an answer's exact body bytes (src/signing) */
  sign(body: string): Promise<string>;
  admission: Admission;
  metering: Metering;
  inference: InferenceService;
  metrics: {
    busy(): void;
    inferenceSeconds(moduleId: string, seconds: number): void;
    /** time a call spent in one step (verify.ts), whatever the step's outcome */
    stepSeconds(step: VerifyStep, seconds: number): void;
  };
  log: Logger;
  /** the call's trace when tracing is on and the call sampled or not (one span per step) */
  trace?: CallTrace | null;
  /** which callers may have their inference started beside their reservation
   * (early-inference.ts): absent, this API worker's own memory; null, every call serial */
  earlyInference?: EarlyInference | null;
}

/** The timed steps of a verify call: `receive` runs from the slot to the last body byte
 * (the client's upload speed), `respond` is the audit hand-off and the signature. */
export type VerifyStep = 'accept' | 'receive' | 'validate' | 'reserve' | 'infer' | 'settle' | 'respond';

/** An answer of the use case (every one is listed in outcomes.ts); the transport renders it. */
export interface VerifyAnswer {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
  contentType?: string;
  /** the refusal's code, for the audit line and the request log; absent on a 200 */
  errorCode?: string;
}
