import { MAX_BODY_BYTES, MAX_HEADER_BYTES, MAX_PART_BYTES, MAX_PARTS } from '../../contract/index.ts';
import { now } from '../../clock.ts';
import { ServiceError } from '../../errors/index.ts';
import { recordVerify } from '../../observability/index.ts';
import { signBody, signerOf } from '../../signing/index.ts';
import { storeMetering, verify, type VerifyDeps, type VerifyRequest } from '../../verify/index.ts';
import { checkContentLength } from '../body.ts';
import { clientAddress } from '../client-address.ts';
import type { HttpContext } from '../context.ts';
import { parseMultipartBoundary } from '../multipart/index.ts';
import type { Reply } from '../respond.ts';
import type { Router } from '../router.ts';
import type { Services } from '../services.ts';
import { receiveMultipart } from '../upload.ts';
import { CallSlot } from '../verify-slot.ts';

// interface-spec.md Limits, as the multipart reader takes them
export const LIMITS = {
  maxBodyBytes: MAX_BODY_BYTES,
  maxPartBytes: MAX_PART_BYTES,
  maxParts: MAX_PARTS,
  maxHeaderBytes: MAX_HEADER_BYTES,
} as const;

/** POST /v1/modules/{module_id}/verify: the HTTP side of the use case in src/verify/ (what a
 * request is, how its body streams, how an answer is sent). */
export function verifyRoutes(router: Router, s: Services): void {
  const deps: VerifyDeps = {
    config: s.config,
    store: s.store,
    // s.store read at the call: routes are registered before (and without) a store in some tests
    tokens: s.tokens ?? ((hash) => s.store.getTokenByHash(hash)),
    sessions: s.sessions,
    now,
    sign: (body) => signBody(signerOf(s.store, s.config.DATA_DIR), body),
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
    return verify(verifyRequest(ctx, params.module_id!, s, slot), { ...deps, admission: slot }).then(({ errorCode, ...reply }): Reply => {
      ctx.errorCode = errorCode;
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
    record: (facts, status, errorCode, replayed) => recordVerify(ctx, s.metrics, facts, status, errorCode, replayed),
    openBody(onPartEnd) {
      checkContentLength(ctx, LIMITS.maxBodyBytes);
      const boundary = parseMultipartBoundary(ctx.headers['content-type']);
      if (boundary === null) throw new ServiceError('unsupported_media_type');
      return slot.upload(receiveMultipart(ctx, boundary, LIMITS, onPartEnd, s.uploadPacer));
    },
  };
}
