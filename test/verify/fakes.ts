// Fakes for the verify use case's ports (src/verify/ports.ts), so that its rules run in
// process: no server, no CLI, no engine. The fake store keeps the store's contract as
// src/store/lmdb/reserve.ts and settle.ts keep it (idempotency, quota, the token read
// again inside the reservation); the contract suite holds the real stores to the same rules.
// Every port call is written to `world.calls`, in order, so a test can assert the check order.

import { generateToken, hashToken } from '../../src/auth/business-token.ts';
import { ServiceError } from '../../src/errors/index.ts';
import { MultipartParser, parseMultipartBoundary } from '../../src/http/multipart/index.ts';
import { InferenceFailedError, type ResultRecord } from '../../src/inference/types.ts';
import type { ReserveInput } from '../../src/store/backend.ts';
import type { AuditRecord, Grant, Reservation, TokenRecord } from '../../src/store/records.ts';
import { UnrecordedCallError } from '../../src/verify/store-outcomes.ts';
import { ANSWERS, verify, type VerifyAnswer, type VerifyDeps, type VerifyRequest } from '../../src/verify/index.ts';
import type { ReceivedPart } from '../../src/verify/ports.ts';

export const RETRY_AFTER_SECONDS = 7;
const T0 = Date.parse('2026-03-01T10:00:00Z');

interface KeyRecord {
  fingerprint: string | null;
  state: 'pending' | 'done';
  reservationId: string;
  status: number | null;
  body: string | null;
}

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

export class FakeStore {
  readonly tokens = new Map<string, TokenRecord>();
  readonly disabledModules = new Set<string>();
  /** units used, by token and module (one window: the tests do not cross one) */
  readonly used = new Map<string, number>();
  readonly reservations = new Map<string, Reservation>();
  readonly keys = new Map<string, KeyRecord>();
  /** the ledger: one line per charge and per refund */
  readonly ledger: { kind: 'charge' | 'refund'; reservation: string; units: number }[] = [];
  readonly audits: AuditRecord[] = [];
  /** the next settlement fails: held for the operator, or not written at all (a full disk) */
  settleFault: 'settlement_failed' | 'not_written' | null = null;
  /** the next refund cannot be written */
  refundFault = false;
  writesFailing = false;
  private nextId = 1;

  usedBy(token: TokenRecord, moduleId = 'rgb_liveness'): number {
    return this.used.get(`${token.id}/${moduleId}`) ?? 0;
  }

  charges(): number {
    return this.ledger.filter((e) => e.kind === 'charge').length;
  }

  reserve(input: ReserveInput & { retryAfterSeconds: number }): { kind: 'reserved'; reservation: Reservation } | { kind: 'replay'; status: number; body: string } {
    const { token, moduleId, units, idempotencyKey: key, fingerprint, at } = input;
    if (key !== null) {
      const rec = this.keys.get(`${token.id}/${key}`);
      if (rec) {
        if (rec.fingerprint !== fingerprint) throw new ServiceError('idempotency_conflict');
        if (rec.state === 'pending') {
          if (this.reservations.get(rec.reservationId)?.state === 'settlement_failed') throw new ServiceError('settlement_failed');
          throw new ServiceError('request_in_progress', undefined, { 'Retry-After': String(input.retryAfterSeconds) });
        }
        return { kind: 'replay', status: rec.status ?? 200, body: rec.body ?? '' };
      }
    }
    const fresh = this.tokens.get(token.id);
    if (!fresh || !fresh.enabled || fresh.revoked || (fresh.expires_at !== null && Date.parse(fresh.expires_at) <= at)) throw new ServiceError('invalid_token');
    const grant = fresh.grants.find((g) => g.module_id === moduleId);
    if (!grant) throw new ServiceError('module_forbidden');
    const used = this.usedBy(fresh, moduleId);
    if (grant.limit !== null && used + units > grant.limit) {
      throw new ServiceError('quota_exceeded', `${grant.limit - used} unit(s) left; this request needs ${units}`, { 'Retry-After': '3600' });
    }
    const reservation = {
      id: `rsv_${this.nextId++}`, request_id: input.requestId, token_id: token.id, module_id: moduleId, units, state: 'pending',
      windows: { day: '', month: '' }, created_at: new Date(at).toISOString(), settled_at: null, pid: process.pid, idempotency_key: key, unsaved_body: null,
    } satisfies Reservation;
    this.used.set(`${token.id}/${moduleId}`, used + units);
    this.ledger.push({ kind: 'charge', reservation: reservation.id, units });
    this.reservations.set(reservation.id, reservation);
    if (key !== null) this.keys.set(`${token.id}/${key}`, { fingerprint, state: 'pending', reservationId: reservation.id, status: null, body: null });
    return { kind: 'reserved', reservation };
  }

  settle(reservation: Reservation, render: () => string): string {
    const held = this.reservations.get(reservation.id)!;
    const body = render();
    const fault = this.settleFault;
    this.settleFault = null;
    if (fault === 'settlement_failed') {
      // the units stay held and the key pending, for the operator
      held.state = 'settlement_failed';
      throw new ServiceError('settlement_failed');
    }
    if (fault === 'not_written') {
      this.refund(reservation.id);
      throw new UnrecordedCallError('refunded', new Error('ENOSPC: no space left on device'));
    }
    held.state = 'charged';
    if (held.idempotency_key !== null) {
      const rec = this.keys.get(`${held.token_id}/${held.idempotency_key}`)!;
      Object.assign(rec, { state: 'done', status: 200, body });
    }
    return body;
  }

  refund(id: string): void {
    if (this.refundFault) {
      this.refundFault = false;
      throw new UnrecordedCallError('refund_deferred', new Error('ENOSPC: no space left on device'));
    }
    const held = this.reservations.get(id);
    if (!held || held.state !== 'pending') return;
    held.state = 'refunded';
    const counter = `${held.token_id}/${held.module_id}`;
    this.used.set(counter, (this.used.get(counter) ?? 0) - held.units);
    this.ledger.push({ kind: 'refund', reservation: id, units: held.units });
    if (held.idempotency_key !== null) this.keys.delete(`${held.token_id}/${held.idempotency_key}`);
  }
}

export class FakeInference {
  /** how the next call ends */
  fault: 'inference_failed' | 'crash' | null = null;
  /** the next call waits here until the test opens it */
  hold: ReturnType<typeof gate> | null = null;
  ready = true;
  calls = 0;

  async infer(captures: number): Promise<ResultRecord[]> {
    this.calls++;
    const hold = this.hold;
    this.hold = null;
    if (hold) await hold.wait();
    const fault = this.fault;
    this.fault = null;
    if (fault === 'inference_failed') throw new InferenceFailedError('the engine failed');
    if (fault === 'crash') throw new Error('engine thread gone');
    return Array.from({ length: captures }, (_, i) => ({ capture_id: `c${i}`, mode: 'single', status: 'ok', alive: true, score: 0.97 }) as unknown as ResultRecord);
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
  store: FakeStore;
  inference: FakeInference;
  /** every port call, in order */
  calls: string[];
  logs: { msg: string; obj: Record<string, unknown> }[];
  facts: Facts[];
  deps: VerifyDeps;
}

export function world(): World {
  const w = { clock: { at: T0 }, calls: [] as string[], logs: [] as World['logs'], facts: [] as Facts[] } as World;
  const store = new FakeStore();
  const inference = new FakeInference();
  const seen = (name: string) => w.calls.push(name);
  const log = (msg: string, obj: Record<string, unknown>) => w.logs.push({ msg, obj });
  w.store = store;
  w.inference = inference;
  w.deps = {
    config: { DATA_DIR: '/nonexistent', RETRY_AFTER_SECONDS },
    store: {
      moduleEnabled: async (m: string) => (seen('moduleEnabled'), !store.disabledModules.has(m)),
      writeAudit: async (r: AuditRecord) => void (seen('audit'), store.audits.push(r)),
      // the token is read through `tokens` below, and these tests make no device session
      getToken: async (id: string) => store.tokens.get(id),
      getTokenByHash: async (hash: string) => [...store.tokens.values()].find((t) => t.hash === hash),
      getDeviceSessionByHash: async () => undefined,
    },
    tokens: async (hash) => (seen('token'), [...store.tokens.values()].find((t) => t.hash === hash)),
    now: () => w.clock.at,
    sign: async () => (seen('sign'), 'header..signature'),
    admission: {
      tryAcquire: () => (seen('slot'), () => void seen('slot released')),
    },
    metering: {
      writesFailing: () => (seen('writesFailing'), store.writesFailing),
      reserve: async (input) => (seen('reserve'), store.reserve(input)),
      settle: async (reservation, _at, render) => (seen('settle'), store.settle(reservation, () => render([]))),
      refund: async (id) => (seen('refund'), store.refund(id)),
      archiveDemoUpload: async () => void seen('archive'),
    },
    inference: {
      readiness: () => (seen('readiness'), [{ module_id: 'rgb_liveness', ready: inference.ready }, { module_id: 'color_liveness', ready: inference.ready }]) as never,
      infer: (job) => (seen('infer'), inference.infer(job.captures.length)),
    },
    metrics: { busy: () => {}, inferenceSeconds: () => {}, stepSeconds: () => {} },
    log: {
      error: (obj: Record<string, unknown>, msg: string) => log(msg, obj),
      warn: (obj: Record<string, unknown>, msg: string) => log(msg, obj),
      info: () => {},
    } as unknown as VerifyDeps['log'],
  };
  return w;
}

/** A live token in the fake store, and its plaintext. */
export function addToken(w: World, grants: Partial<Grant>[] = [{ module_id: 'rgb_liveness', limit: 10 }]): { token: TokenRecord; plaintext: string } {
  const plaintext = generateToken();
  const token: TokenRecord = {
    id: `tok_${w.store.tokens.size + 1}`, name: 't', token_prefix: plaintext.slice(0, 8), hash: hashToken(plaintext), enabled: true, expires_at: null,
    demo: false, revoked: false, created_at: new Date(w.clock.at).toISOString(),
    grants: grants.map((g) => ({ module_id: 'rgb_liveness', limit: null, period: 'day', ...g }) as Grant),
  };
  w.store.tokens.set(token.id, token);
  return { token, plaintext };
}

export interface CallOptions {
  module?: string;
  authorization?: string;
  idempotencyKey?: string;
  /** the upload waits here, its parts not yet delivered, until the test opens it */
  upload?: Gate & { wait(): Promise<void> };
  requestId?: string;
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
  const req: VerifyRequest = {
    requestId: o.requestId ?? `req-${++requests}`, moduleParam: o.module ?? 'rgb_liveness', authorization: o.authorization ?? `Bearer ${plaintext}`,
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
