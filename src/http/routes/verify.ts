import { now } from '../../clock.ts';
import { InferenceFailedError } from '../../cluster/remote-inference.ts';
import { ServiceError, ValidationFailure } from '../../errors/index.ts';
import type { ResultRecord } from '../../inference/types.ts';
import { archiveDemoUpload, countryOf, refund, requestFingerprint, reserve, settle, writeAudit, type Reservation } from '../../metering/index.ts';
import { MODULE_IDS, type ModuleId, type ParsedMetadata } from '../../packets/types.ts';
import { signBody } from '../../signing/index.ts';
import { moduleEnabled } from '../../store/modules.ts';
import type { TokenRecord } from '../../store/records.ts';
import { earlyMetadata, prepareRequest } from '../../verify/index.ts';
import { clientAddress } from '../client-address.ts';
import type { HttpContext } from '../context.ts';
import { parseMultipartBoundary, type ReceivedPart } from '../multipart/index.ts';
import { errorReply, type Reply } from '../respond.ts';
import type { Router } from '../router.ts';
import type { Services } from '../services.ts';
import { checkContentLength } from '../body.ts';
import { ClientGoneError, receiveMultipart } from '../upload.ts';
import { requireToken } from './business.ts';

// interface-spec.md Limits
export const LIMITS = {
  maxBodyBytes: 32 * 1024 * 1024,
  maxPartBytes: 1024 * 1024,
  // 256 events at most, each with at most one image, plus metadata
  maxParts: 257,
  maxHeaderBytes: 8 * 1024,
} as const;

const BUSY_MESSAGES = {
  host: 'No capacity slot available; retry after the indicated delay',
  address: 'Too many concurrent verify calls from this client address; retry after the indicated delay',
  token: 'Too many concurrent verify calls with this token; retry after the indicated delay',
} as const;

const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,200}$/;

/** What the audit line of a verify call needs to know, filled in as the call progresses. */
interface CallState {
  token: TokenRecord | null;
  moduleId: string | null;
  captures: number;
  charged: number;
}

export function verifyRoutes(router: Router, s: Services): void {
  router.add('POST', '/v1/modules/:module_id/verify', (ctx, params) => {
    const state: CallState = { token: null, moduleId: null, captures: 0, charged: 0 };
    let pending: Promise<Reply>;
    try {
      pending = verify(ctx, params.module_id!, s, state);
    } catch (err) {
      pending = Promise.reject(err);
    }
    return pending
      .catch((err): Reply => {
        if (err instanceof ClientGoneError) {
          // Nobody is listening; the code is for the audit line and the request log.
          ctx.errorCode = 'client_disconnected';
          return { status: 499 };
        }
        if (!(err instanceof ServiceError || err instanceof ValidationFailure) || (err instanceof ServiceError && err.cause !== undefined)) {
          const cause = (err as Error).cause;
          s.log.error({ err, cause: cause instanceof Error ? cause.message : cause, request_id: ctx.requestId }, 'verify failed');
        }
        return errorReply(ctx, err);
      })
      .then(async (reply) => {
        audit(ctx, s, state, reply.status);
        return signed(s, reply);
      });
  });
}

/** The checks before the body, in the contract's order, run synchronously so that the body
 * reader is attached before uWS delivers the first chunk. */
function verify(ctx: HttpContext, moduleParam: string, s: Services, state: CallState): Promise<Reply> {
  const token = requireToken(ctx, s);
  state.token = token;
  if (!(MODULE_IDS as readonly string[]).includes(moduleParam)) throw new ServiceError('module_not_found', `Unknown module ${JSON.stringify(moduleParam.slice(0, 64))}`);
  const moduleId = moduleParam as ModuleId;
  state.moduleId = moduleId;
  if (!token.grants.some((g) => g.module_id === moduleId)) throw new ServiceError('module_forbidden');
  if (!moduleEnabled(s.store, moduleId)) throw new ServiceError('module_disabled');
  if (!s.inference.readiness().find((m) => m.module_id === moduleId)?.ready) {
    throw new ServiceError('module_unavailable', 'The module\'s models are not loaded yet', { 'Retry-After': String(s.config.RETRY_AFTER_SECONDS) });
  }
  const release = s.admission.tryAcquire(clientAddress(s.config, ctx.peerAddress, ctx.headers['x-forwarded-for']), token.id);
  if (typeof release === 'string') {
    s.metrics.busyRejections.inc();
    throw new ServiceError('server_busy', BUSY_MESSAGES[release], { 'Retry-After': String(s.config.RETRY_AFTER_SECONDS) });
  }
  try {
    const key = ctx.headers['idempotency-key'];
    if (key !== undefined && !IDEMPOTENCY_KEY.test(key)) throw new ServiceError('invalid_idempotency_key');
    checkContentLength(ctx, LIMITS.maxBodyBytes);
    const boundary = parseMultipartBoundary(ctx.headers['content-type']);
    if (boundary === null) throw new ServiceError('unsupported_media_type');
    const metadata = earlyMetadata(moduleId);
    const upload = receiveMultipart(ctx, boundary, LIMITS, metadata.onPartEnd, s.uploadPacer);
    return run(ctx, s, token, moduleId, key ?? null, upload, metadata.parsed, state).finally(release);
  } catch (err) {
    release();
    throw err;
  }
}

async function run(
  ctx: HttpContext,
  s: Services,
  token: TokenRecord,
  moduleId: ModuleId,
  key: string | null,
  upload: Promise<ReceivedPart[]>,
  early: () => ParsedMetadata | undefined,
  state: CallState,
): Promise<Reply> {
  const parts = await upload;
  const prepared = prepareRequest(moduleId, parts, early());
  state.captures = prepared.captures.length;
  // parseMetadata returns the parsed objects themselves, so the metadata is not parsed again
  const { batch, captures } = prepared.parsed;
  const fingerprint = key === null ? null : requestFingerprint(moduleId, batch ? { captures } : captures[0], prepared.files);

  const at = now();
  const outcome = await reserve(s.store, {
    token, moduleId, units: prepared.captures.length, requestId: ctx.requestId, idempotencyKey: key, fingerprint, at, retryAfterSeconds: s.config.RETRY_AFTER_SECONDS,
  });
  if (outcome.kind === 'replay') {
    return { status: outcome.status, body: outcome.body, contentType: 'application/json', headers: { 'Idempotency-Replayed': 'true' } };
  }
  const reservation = outcome.reservation;

  let results: ResultRecord[];
  try {
    if (token.demo) await archiveDemoUpload(s.config.DATA_DIR, at, ctx.requestId, prepared.metadataText, prepared.files);
    const started = performance.now();
    results = await s.inference.infer({ module_id: moduleId, captures: prepared.captures });
    s.metrics.inferenceSeconds.observe({ module: moduleId }, (performance.now() - started) / 1000);
  } catch (err) {
    await refund(s.store, reservation.id, now());
    if (err instanceof InferenceFailedError) throw new ServiceError('inference_failed');
    throw err;
  }
  const body = await settleCall(s, ctx, reservation, moduleId, results);
  state.charged = reservation.units;
  return { status: 200, body, contentType: 'application/json' };
}

function settleCall(s: Services, ctx: HttpContext, reservation: Reservation, moduleId: ModuleId, results: ResultRecord[]): Promise<string> {
  const failPrefix = s.config.TEST_SETTLEMENT_FAIL_PREFIX;
  const inject = failPrefix !== undefined && results.some((r) => r.capture_id.startsWith(failPrefix));
  return settle(
    s.store,
    reservation,
    now(),
    (usage) => JSON.stringify({ request_id: ctx.requestId, module_id: moduleId, charged_units: reservation.units, results, usage }),
    results,
    inject,
  );
}

/** Every verify answer carries a detached JWS over its exact body bytes, so a backend can tell
 * whether a device forwarded the service's verdict unchanged (see README, Signed verdicts). */
async function signed(s: Services, reply: Reply): Promise<Reply> {
  // a client that went away gets nothing, so there is nothing to sign
  if (reply.body === undefined) return reply;
  const body = typeof reply.body === 'string' ? reply.body : JSON.stringify(reply.body);
  try {
    const signature = await signBody(s.config.DATA_DIR, body);
    return { ...reply, body, contentType: 'application/json', headers: { ...reply.headers, 'X-Verdict-Signature': signature } };
  } catch (err) {
    s.log.error({ err }, 'verdict signing failed');
    return { ...reply, body, contentType: 'application/json' };
  }
}

function audit(ctx: HttpContext, s: Services, state: CallState, status: number): void {
  const ip = clientAddress(s.config, ctx.peerAddress, ctx.headers['x-forwarded-for']);
  void writeAudit(s.store, {
    request_id: ctx.requestId,
    at: new Date(now()).toISOString(),
    token_id: state.token?.id ?? null,
    module_id: state.moduleId,
    client_ip: ip,
    country: countryOf(ip),
    status: ctx.aborted ? 499 : status,
    error_code: ctx.errorCode ?? null,
    captures: state.captures,
    charged_units: state.charged,
    latency_ms: Math.round((performance.now() - ctx.startedAt) * 10) / 10,
  }).catch((err) => s.log.error({ err }, 'audit write failed'));
}

