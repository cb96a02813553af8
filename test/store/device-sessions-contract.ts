import { randomBytes } from 'node:crypto';
import type { Test } from 'tap';
import type { ReserveInput, ReserveOutcome, StoreBackend } from '../../src/store/backend.ts';
import type { DeviceSession } from '../../src/store/device-sessions.ts';
import type { Grant, RenderAnswer, TokenRecord, UsageRecord } from '../../src/store/records.ts';

// The device-session operations (issue 26) as both stores must keep them; run from
// storeContract (contract.ts) against LMDB and PostgreSQL.

const T0 = Date.parse('2026-05-04T10:00:00Z');
const hex = () => randomBytes(6).toString('hex');
const LIMIT = { limit: 3, windowMs: 60_000 };

function tokenRecord(grants: Grant[]): TokenRecord {
  const id = `tok_${hex()}`;
  return { id, name: id, token_prefix: 'lvk_test', hash: randomBytes(32).toString('hex'), enabled: true, expires_at: null, demo: false, revoked: false, created_at: new Date(T0).toISOString(), grants };
}

function session(tok: TokenRecord, over: Partial<DeviceSession> = {}, at = T0): DeviceSession {
  return {
    id: `ses_${hex()}`, hash: randomBytes(32).toString('hex'), token_id: tok.id, module_id: 'rgb_liveness', created_at: new Date(at).toISOString(),
    expires_at: new Date(at + 300_000).toISOString(), max_captures: 3, captures_used: 0, revoked_at: null, ...over,
  };
}

function input(tok: TokenRecord, s: DeviceSession | null, over: Partial<ReserveInput> = {}): ReserveInput {
  return { token: tok, moduleId: 'rgb_liveness', units: 1, requestId: `req_${hex()}`, idempotencyKey: null, fingerprint: null, at: T0 + 1000, sessionId: s?.id ?? null, ...over };
}

/** What a reservation came to: 'admitted' or the outcome's kind (a refusal). */
async function code(p: Promise<ReserveOutcome>): Promise<string> {
  const out = await p;
  return out.kind === 'reserved' ? 'admitted' : out.kind;
}

async function mint(store: StoreBackend, s: DeviceSession, at = Date.parse(s.created_at)): Promise<DeviceSession> {
  const out = await store.createDeviceSession(s, LIMIT, at);
  if (out.kind !== 'created') throw new Error(`not minted: ${JSON.stringify(out)}`);
  return out.session;
}

const render = (requestId: string): RenderAnswer => (usage) => JSON.stringify({ request_id: requestId, module_id: 'rgb_liveness', charged_units: 1, results: [{ capture_id: 'c', score: 0.25 }], usage });

export function deviceSessionContract(t: Test, store: StoreBackend): void {
  t.test('device sessions: minted, found by id and by hash, revoked once', async (t) => {
    const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: null, period: 'never' }]);
    await store.insertToken(tok);
    const s = await mint(store, session(tok));
    t.same(await store.getDeviceSession(s.id), s);
    t.same(await store.getDeviceSessionByHash(s.hash), s);
    t.equal(await store.getDeviceSessionByHash('0'.repeat(64)), undefined);
    t.equal(await store.getDeviceSession('ses_nope'), undefined);
    const revoked = await store.revokeDeviceSession(s.id, T0 + 5000);
    t.equal(revoked!.revoked_at, new Date(T0 + 5000).toISOString());
    t.equal((await store.revokeDeviceSession(s.id, T0 + 9000))!.revoked_at, new Date(T0 + 5000).toISOString(), 'a second revocation keeps the first time');
    t.equal(await store.revokeDeviceSession('ses_nope', T0), undefined);
  });

  t.test('device sessions: minting is limited per parent token in a sliding window, also when racing', async (t) => {
    const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: null, period: 'never' }]);
    const other = tokenRecord([{ module_id: 'rgb_liveness', limit: null, period: 'never' }]);
    await store.insertToken(tok);
    await store.insertToken(other);
    const outs = await Promise.all(Array.from({ length: 8 }, (_, i) => store.createDeviceSession(session(tok, {}, T0 + i), LIMIT, T0 + i)));
    t.equal(outs.filter((o) => o.kind === 'created').length, 3, 'exactly the limit, whatever the interleaving');
    const refused = await store.createDeviceSession(session(tok, {}, T0 + 20_000), LIMIT, T0 + 20_000);
    t.same(refused, { kind: 'rate_limited', retryAfterSeconds: 40 }, 'until the oldest of the window leaves it');
    t.equal((await store.createDeviceSession(session(other, {}, T0 + 20_000), LIMIT, T0 + 20_000)).kind, 'created', 'another token has its own window');
    t.equal((await store.createDeviceSession(session(tok, {}, T0 + 60_001), LIMIT, T0 + 60_001)).kind, 'created', 'a place freed by time');
  });

  t.test('device sessions: captures are counted in the reservation; a call that would pass max_captures is refused whole', async (t) => {
    const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: 10, period: 'day' }]);
    await store.insertToken(tok);
    const s = await mint(store, session(tok));
    const first = await store.reserve(input(tok, s, { units: 2 }));
    t.equal(first.kind, 'reserved');
    t.equal((await store.getDeviceSession(s.id))!.captures_used, 2);
    t.equal(await code(store.reserve(input(tok, s, { units: 2 }))), 'session_captures_exceeded');
    t.same((await store.usageSnapshot(tok, T0 + 1000)).map((u) => u.used), [2], 'the refused call charged nothing');
    t.equal((await store.getDeviceSession(s.id))!.captures_used, 2);
    // a business call on the same token is not the session's
    t.equal((await store.reserve(input(tok, null, { units: 3 }))).kind, 'reserved');
    t.equal((await store.getDeviceSession(s.id))!.captures_used, 2);
    const last = await store.reserve(input(tok, s, { units: 1, idempotencyKey: 'dev-k', fingerprint: 'fp' }));
    if (last.kind !== 'reserved') throw new Error('not reserved');
    const settled = await store.settle(last.reservation, T0 + 2000, render(last.reservation.request_id), [{ capture_id: 'c', score: 0.25 }]);
    if (settled.kind !== 'settled') throw new Error(`not settled: ${settled.kind}`);
    const body = settled.body;
    t.equal((await store.getDeviceSession(s.id))!.captures_used, 3);
    t.same(await store.reserve(input(tok, s, { units: 1, idempotencyKey: 'dev-k', fingerprint: 'fp' })), { kind: 'replay', status: 200, body }, 'a used-up session still replays its key');
    t.same(await store.reserve(input(tok, null, { units: 1, idempotencyKey: 'dev-k', fingerprint: 'fp' })), { kind: 'replay', status: 200, body }, 'keys belong to the parent token');
    t.equal(await code(store.reserve(input(tok, s))), 'session_captures_exceeded');
    const calls = await store.listDeviceSessionCalls(s.id);
    t.same(calls.map((c) => [c.units, c.refunded]), [[2, false], [1, false]], 'the session\'s calls, in reservation order');
    t.equal(calls[1]!.request_id, last.reservation.request_id);
    t.same((await store.getResults(calls[1]!.request_id))!.results, [{ capture_id: 'c', score: 0.25 }]);
    t.ok((await store.verifyLedger()).ok);
  });

  t.test('device sessions: a refund gives the captures back', async (t) => {
    const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: null, period: 'never' }]);
    await store.insertToken(tok);
    const s = await mint(store, session(tok, { max_captures: 2 }));
    const r = await store.reserve(input(tok, s, { units: 2 }));
    if (r.kind !== 'reserved') throw new Error('not reserved');
    await store.refund(r.reservation.id, T0 + 1500);
    await store.refund(r.reservation.id, T0 + 1600);
    t.equal((await store.getDeviceSession(s.id))!.captures_used, 0, 'given back once');
    t.same((await store.listDeviceSessionCalls(s.id)).map((c) => c.refunded), [true]);
    t.equal((await store.reserve(input(tok, s, { units: 2 }))).kind, 'reserved', 'the device may retry');
  });

  t.test('device sessions: revoked, expired or another token\'s: refused in the reservation, nothing charged', async (t) => {
    const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: null, period: 'never' }]);
    const other = tokenRecord([{ module_id: 'rgb_liveness', limit: null, period: 'never' }]);
    await store.insertToken(tok);
    await store.insertToken(other);
    const s = await mint(store, session(tok));
    t.equal(await code(store.reserve(input(other, s))), 'invalid_session_token', 'a session charges only its parent');
    t.equal(await code(store.reserve(input(tok, s, { at: T0 + 300_000 }))), 'invalid_session_token', 'expired at the reservation time');
    await store.revokeDeviceSession(s.id, T0 + 2000);
    t.equal(await code(store.reserve(input(tok, s, { at: T0 + 3000 }))), 'invalid_session_token', 'revoked during the upload');
    t.same((await store.usageSnapshot(tok, T0)).map((u) => u.used), [0]);
    t.same(await store.listDeviceSessionCalls(s.id), []);
  });

  t.test('device sessions: a dead session is refused before its key: no replay, whatever the key holds', async (t) => {
    const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: null, period: 'never' }]);
    await store.insertToken(tok);
    const s = await mint(store, session(tok));
    const done = await store.reserve(input(tok, s, { idempotencyKey: 'dead-k', fingerprint: 'fp' }));
    if (done.kind !== 'reserved') throw new Error('not reserved');
    const settled = await store.settle(done.reservation, T0 + 1000, render(done.reservation.request_id), []);
    if (settled.kind !== 'settled') throw new Error(`not settled: ${settled.kind}`);
    const held = await store.reserve(input(tok, s, { idempotencyKey: 'held-k', fingerprint: 'fp' }));
    t.equal(held.kind, 'reserved', 'a second call, still in flight');
    t.equal(await code(store.reserve(input(tok, s, { idempotencyKey: 'dead-k', fingerprint: 'fp', at: T0 + 300_000 }))), 'invalid_session_token', 'expired: not replayed');
    await store.revokeDeviceSession(s.id, T0 + 2000);
    t.equal(await code(store.reserve(input(tok, s, { idempotencyKey: 'dead-k', fingerprint: 'fp', at: T0 + 3000 }))), 'invalid_session_token', 'revoked (during the upload): not replayed');
    t.equal(await code(store.reserve(input(tok, s, { idempotencyKey: 'held-k', fingerprint: 'fp', at: T0 + 3000 }))), 'invalid_session_token', 'nor told to wait for a call in flight');
    t.equal(await code(store.reserve(input(tok, s, { idempotencyKey: 'dead-k', fingerprint: 'other', at: T0 + 3000 }))), 'invalid_session_token', 'nor told of a conflict');
    t.same(await store.reserve(input(tok, null, { idempotencyKey: 'dead-k', fingerprint: 'fp', at: T0 + 3000 })), { kind: 'replay', status: 200, body: settled.body }, 'the live parent token still replays its key');
  });

  t.test('device sessions: concurrent calls of one session never pass max_captures', async (t) => {
    const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: null, period: 'never' }]);
    await store.insertToken(tok);
    const s = await mint(store, session(tok, { max_captures: 5 }));
    const codes = await Promise.all(Array.from({ length: 12 }, () => code(store.reserve(input(tok, s)))));
    t.equal(codes.filter((c) => c === 'admitted').length, 5);
    t.ok(codes.every((c) => c === 'admitted' || c === 'session_captures_exceeded'), codes.join(' '));
    t.same((await store.usageSnapshot(tok, T0)).map((u) => u.used), [5]);
  });

  t.test('device sessions: retention removes those expired before the cutoff, with their calls', async (t) => {
    const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: null, period: 'never' }]);
    await store.insertToken(tok);
    const old = await mint(store, session(tok, { expires_at: new Date(T0 + 10_000).toISOString() }));
    const kept = await mint(store, session(tok, { expires_at: new Date(T0 + 20_000).toISOString() }, T0 + 1));
    t.equal((await store.reserve(input(tok, old))).kind, 'reserved');
    t.equal((await store.reserve(input(tok, kept))).kind, 'reserved');
    const removed = await Promise.all([1, 2].map(() => store.pruneDeviceSessionsBefore(T0 + 15_000)));
    t.ok(removed.reduce((a, b) => a + b, 0) >= 1, 'racing pruners together removed the expired one');
    t.equal(await store.getDeviceSession(old.id), undefined);
    t.equal(await store.getDeviceSessionByHash(old.hash), undefined);
    t.same(await store.listDeviceSessionCalls(old.id), []);
    t.same((await store.getDeviceSession(kept.id))!.captures_used, 1);
    t.equal((await store.listDeviceSessionCalls(kept.id)).length, 1);
  });

  t.test('device sessions: a token\'s active ones, newest first', async (t) => {
    const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: null, period: 'never' }]);
    await store.insertToken(tok);
    const a = await mint(store, session(tok, {}, T0));
    const b = await mint(store, session(tok, { expires_at: new Date(T0 + 10_000).toISOString() }, T0 + 1));
    const c = await mint(store, session(tok, {}, T0 + 2));
    t.same((await store.listActiveDeviceSessions(tok.id, T0 + 5000)).map((x) => x.id), [c.id, b.id, a.id]);
    await store.revokeDeviceSession(a.id, T0 + 6000);
    t.same((await store.listActiveDeviceSessions(tok.id, T0 + 10_000)).map((x) => x.id), [c.id], 'neither revoked nor expired');
    t.same(await store.listActiveDeviceSessions('tok_nope', T0), []);
  });
}
