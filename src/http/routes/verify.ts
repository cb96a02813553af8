import { TokenCache } from '../../auth/token-cache.ts';
import { MAX_BODY_BYTES, MAX_HEADER_BYTES, MAX_PART_BYTES, MAX_PARTS } from '../../contract/index.ts';
import { ServiceError, ValidationFailure } from '../../errors/index.ts';
import { recordVerify } from '../../observability/request-facts.ts';
import { respond, storeMetering, verify, type CallTrace, type VerifyDeps, type VerifyRequest } from '../../verify/index.ts';
import { checkContentLength } from '../body.ts';
import { clientAddress } from '../client-address.ts';
import type { HttpContext } from '../context.ts';
import { parseMultipartBoundary } from '../multipart/index.ts';
import { errorReply, type Reply } from '../respond.ts';
import type { Router } from '../router.ts';
import type { Services } from '../services.ts';
import { ClientGoneError, receiveMultipart } from '../upload.ts';
import { CallSlot } from '../verify-slot.ts';

// interface-spec.md Limits, as the multipart reader takes them
export const LIMITS = {
  maxBodyBytes: MAX_BODY_BYTES,
  maxPartBytes: MAX_PART_BYTES,
  maxParts: MAX_PARTS,
  maxHeaderBytes: MAX_HEADER_BYTES,
} as const;

/** POST /v1/modules/{module_id}/verify: the HTTP side of the use case in src/verify/ (what a
 * request is, how its body streams, how an error is rendered). */
export function verifyRoutes(router: Router, s: Services): void {
  // PostgreSQL: a token read is a round trip; LMDB reads are local and need no cache. Decided
  // at the first call: routes are registered before (and without) a store in some tests.
  let tokenCache: TokenCache | null | undefined;
  const readToken = (hash: string) => {
    if (tokenCache === undefined) {
      tokenCache = s.store.kind === 'postgres' && s.config.TOKEN_CACHE_SECONDS > 0
        ? new TokenCache((h) => s.store.getTokenByHash(h), s.config.TOKEN_CACHE_SECONDS * 1000)
        : null;
    }
    return tokenCache ? tokenCache.get(hash) : s.store.getTokenByHash(hash);
  };
  const deps: VerifyDeps = {
    config: s.config,
    store: s.store,
    tokens: readToken,
    admission: s.admission,
    metering: storeMetering(s.store),
    inference: s.inference,
    metrics: {
      busy: () => s.metrics.busyRejections.inc(),
      inferenceSeconds: (module, seconds) => s.metrics.inferenceSeconds.observe({ module }, seconds),
      stepSeconds: (step, seconds) => s.metrics.stepSeconds.observe({ step }, seconds),
    },
    log: s.log,
  };
  router.add('POST', '/v1/modules/:module_id/verify', (ctx, params) => {
    // the call's own slot: revocable while its body arrives (fair shares, src/http/capacity.ts)
    const slot = new CallSlot(ctx, s);
    const req = verifyRequest(ctx, params.module_id!, s, slot);
    const trace: CallTrace = { token: null, moduleId: null, captures: 0, charged: 0, reserved: 0, refunded: 0, results: null };
    let answer: Promise<Reply>;
    try {
      answer = verify(req, { ...deps, admission: slot }, trace);
    } catch (err) {
      answer = Promise.reject(err);
    }
    return answer
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
      .then((reply) => {
        // metrics and the request log line describe the answer as decided, before signing
        recordVerify(ctx, s.metrics, trace, reply.status, ctx.errorCode, reply.headers?.['Idempotency-Replayed'] === 'true');
        if (trace.session) s.metrics.sessionCalls.inc({ call: 'verify', status: String(reply.status) });
        return respond(req, deps, trace, reply, ctx.errorCode ?? null);
      })
      .then((reply): Reply => {
        // a worker with more than its share of the connections closes this one after the
        // answer, so the client's next connection is hashed afresh (src/http/balance.ts);
        // never while the body is still arriving, where a close would reset the upload
        if (s.balance?.answered() && !ctx.bodyUnread() && !ctx.aborted) {
          s.metrics.connectionsShed.inc();
          return { ...reply, close: true };
        }
        return reply;
      });
  });
}

function verifyRequest(ctx: HttpContext, moduleParam: string, s: Services, slot: CallSlot): VerifyRequest {
  return {
    requestId: ctx.requestId,
    moduleParam,
    authorization: ctx.headers['authorization'],
    idempotencyKey: ctx.headers['idempotency-key'],
    clientAddress: clientAddress(s.config, ctx.peerAddress, ctx.headers['x-forwarded-for']),
    startedAt: ctx.startedAt,
    aborted: () => ctx.aborted,
    openBody(onPartEnd) {
      checkContentLength(ctx, LIMITS.maxBodyBytes);
      const boundary = parseMultipartBoundary(ctx.headers['content-type']);
      if (boundary === null) throw new ServiceError('unsupported_media_type');
      return slot.upload(receiveMultipart(ctx, boundary, LIMITS, onPartEnd, s.uploadPacer));
    },
  };
}
