import { MAX_BODY_BYTES, MAX_HEADER_BYTES, MAX_PART_BYTES, MAX_PARTS } from '../../contract/index.ts';
import { now } from '../../clock.ts';
import { messageOf, ServiceError } from '../../errors/index.ts';
import { sentSessionToken } from '../../auth/index.ts';
import { recordVerify, threadTracing, tracedMethods, type CallTrace, type Tracing } from '../../observability/index.ts';
import { signBody, signerOf } from '../../signing/index.ts';
import { storeMetering, verify, type VerifyDeps, type VerifyRequest } from '../../verify/index.ts';
import type { InferenceTiming } from '../../inference/index.ts';
import { checkContentLength } from '../body.ts';
import { clientAddress } from '../client-address.ts';
import type { HttpContext } from '../context.ts';
import { readMultipartContentType } from '../multipart/index.ts';
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
  // OpenTelemetry traces when the OTEL_* variables ask for them (src/observability/tracing.ts)
  const tracingOptions = { env: process.env, log: s.log, onDropped: (reason: string, spans: number) => s.metrics.traceSpansDropped.inc({ reason }, spans) };
  const call = (ctx: HttpContext, moduleParam: string, tracing: Tracing | null): Promise<Reply> => {
    // the call's own slot: revocable while its body arrives (fair shares, src/http/capacity.ts)
    const slot = new CallSlot(ctx, s);
    const trace = tracing?.startCall('POST /v1/modules/{module_id}/verify', ctx.headers['traceparent'], ctx.headers['tracestate'], {
      'http.request.method': 'POST', 'http.route': '/v1/modules/{module_id}/verify', 'lv.request_id': ctx.requestId,
    }) ?? null;
    // an unsampled call (the sampler's no) records nothing: its steps run on the plain deps
    return verify(verifyRequest(ctx, moduleParam, s, slot, trace), trace?.recording ? tracedDeps(deps, trace, slot) : { ...deps, admission: slot }).then(({ errorCode, ...answer }): Reply => {
      ctx.errorCode = errorCode;
      trace?.end(answer.status, errorCode);
      // the caller's backend follows the call by the server span's traceparent
      const reply: Reply = trace ? { ...answer, headers: { ...answer.headers, ...trace.headers() } } : answer;
      // a worker with more than its share of the connections closes this one after the
      // answer, so the client's next connection is hashed afresh (src/http/balance.ts);
      // never while the body is still arriving, where a close would reset the upload
      if (s.balance?.answered() && !ctx.bodyUnread() && !ctx.aborted) {
        s.metrics.connectionsShed.inc();
        return { ...reply, close: true };
      }
      return reply;
    }, (err: unknown) => {
      trace?.end(500, 'internal_error');
      throw err;
    });
  };
  router.add('POST', '/v1/modules/:module_id/verify', (ctx, params) => {
    // the first call of a worker with tracing on waits for the SDK to load (the body is held)
    const tracing = threadTracing(tracingOptions);
    if (tracing instanceof Promise) return tracing.then((t) => call(ctx, params.module_id!, t));
    return call(ctx, params.module_id!, tracing);
  });
}

/** A recorded call's collaborators (the route gives them only to a call the sampler took):
 * what the steps ask of the store, the metering, the engine and the signer shows as child
 * spans of the step (method names only, never arguments). */
function tracedDeps(deps: VerifyDeps, trace: CallTrace, slot: CallSlot): VerifyDeps {
  return {
    ...deps,
    admission: slot,
    trace,
    store: tracedMethods(deps.store, trace, 'store'),
    tokens: (hash) => trace.child('store.getTokenByHash', {}, () => deps.tokens(hash)),
    metering: tracedMethods(deps.metering, trace, 'metering', ['reserve', 'settle', 'refund', 'archiveDemoUpload']),
    inference: tracedInference(deps.inference, trace),
    sign: (body) => trace.child('sign', {}, () => deps.sign(body)),
  };
}

/** The engine's call as a child span of the infer step, and under it the two stages the engine
 * timed on its side of the thread hop: the wait for a free pool thread, and the model's run
 * (the pool tasks of the call's captures, first out to last back). What is left of the span
 * around them is the hop itself. */
function tracedInference(inference: VerifyDeps['inference'], trace: CallTrace): VerifyDeps['inference'] {
  return {
    readiness: () => inference.readiness(),
    infer: (job) => trace.child('inference.infer', { 'code.function.name': 'infer' }, async (stages) => {
      const timing: InferenceTiming = {};
      try {
        return await inference.infer(job, timing);
      } finally {
        const { queued, started, ended, tasks } = timing;
        // a job that failed before a pool thread took it waited until it failed
        if (queued !== undefined) stages.record('inference.pool_wait', {}, queued, started ?? performance.timeOrigin + performance.now());
        if (started !== undefined && ended !== undefined) stages.record('inference.model_run', { 'lv.pool_tasks': tasks ?? 1 }, started, ended);
      }
    }),
  };
}

function verifyRequest(ctx: HttpContext, moduleParam: string, s: Services, slot: CallSlot, trace: CallTrace | null): VerifyRequest {
  return {
    requestId: ctx.requestId,
    moduleParam,
    authorization: ctx.headers['authorization'],
    idempotencyKey: ctx.headers['idempotency-key'],
    clientAddress: clientAddress(s.config, ctx.peerAddress, ctx.headers['x-forwarded-for']),
    startedAt: ctx.startedAt,
    aborted: () => ctx.aborted,
    record: (facts, status, errorCode, replayed) => {
      // a session token that did not authenticate is refused 401, first thing: only then is the
      // header read again (not on every call)
      recordVerify(ctx, s.metrics, facts, status, errorCode, replayed, trace?.traceId, status === 401 && sentSessionToken(ctx.headers['authorization']));
      trace?.describe({
        'lv.module': facts.moduleId ?? 'unknown', 'lv.captures': facts.captures ?? 0, 'lv.replayed': replayed, 'lv.charged_units': facts.charged,
        'lv.modes': [...new Set((facts.results ?? []).map((r) => r.mode))],
      });
    },
    openBody(onPartEnd) {
      checkContentLength(ctx, LIMITS.maxBodyBytes);
      const type = readMultipartContentType(ctx.headers['content-type']);
      // 415 for every fault (interface-spec.md "Errors"), its message naming the fault
      if ('fault' in type) throw new ServiceError('unsupported_media_type', messageOf('unsupported_media_type', type.fault));
      return slot.upload(receiveMultipart(ctx, type.boundary, LIMITS, onPartEnd, s.uploadPacer));
    },
  };
}
