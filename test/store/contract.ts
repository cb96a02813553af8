import { randomBytes } from 'node:crypto';
import type { Test } from 'tap';
import { KNOWN_ADDRESS_MS, PAIR_LIMIT, throttleWait, WINDOW_MS } from '../../src/store/throttle-rules.ts';
import type { RenderAnswer, Reservation, UsageRecord } from '../../src/store/records.ts';
import { newKey, publicJwksOf, RETIRED_DELETE_MS } from '../../src/signing/keys.ts';
import type { ReserveInput, ReserveOutcome, SettleOutcome, StoreBackend } from '../../src/store/backend.ts';
import { injectSettlementFault } from '../../src/store/faults.ts';
import { DuplicateTokenNameError } from '../../src/store/errors.ts';
import type { Grant, TokenRecord, UserRecord } from '../../src/store/records.ts';
import { deviceSessionContract } from './device-sessions-contract.ts';

// One contract, run against every store (test/store/lmdb.test.ts, test/store/pg.test.ts):
// whatever a caller may rely on is asserted here once, so the two cannot drift apart.

// the records a contract case starts from, shared with bench/store.ts
import { reserveInput, T0, tokenRecord } from '../../bench/harness/records.ts';
export { reserveInput, T0, tokenRecord };
const id = (p: string) => `${p}_${randomBytes(6).toString('hex')}`;

const render = (requestId: string): RenderAnswer => (usage) => JSON.stringify({ request_id: requestId, module_id: 'rgb_liveness', charged_units: 1, results: [{ capture_id: 'c"1', v: 0.5 }], usage });

type Refusal = Exclude<ReserveOutcome, { kind: 'reserved' | 'replay' }>;

/** A reservation the store refused (nothing written), or a failed test. */
async function refusal(p: Promise<ReserveOutcome>): Promise<Refusal> {
  const out = await p;
  if (out.kind === 'reserved' || out.kind === 'replay') throw new Error(`expected a refusal, got ${out.kind}`);
  return out;
}

async function quotaRefused(p: Promise<ReserveOutcome>): Promise<Extract<ReserveOutcome, { kind: 'quota_exceeded' }>> {
  const out = await p;
  if (out.kind !== 'quota_exceeded') throw new Error(`expected quota_exceeded, got ${out.kind}`);
  return out;
}

/** The body of a settled call, or a failed test. */
async function settled(p: Promise<SettleOutcome>): Promise<string> {
  const out = await p;
  if (out.kind !== 'settled') throw new Error(`expected a settlement, got ${out.kind}`);
  return out.body;
}

async function reserved(store: StoreBackend, input: ReserveInput): Promise<Reservation> {
  const out = await store.reserve(input);
  if (out.kind !== 'reserved') throw new Error(`expected a reservation, got ${out.kind}`);
  return out.reservation;
}

export function storeContract(t: Test, store: StoreBackend): void {
  deviceSessionContract(t, store);

  t.test('users: unique names, read-modify-write with a check that can refuse', async (t) => {
    let made = 0;
    const u = (name: string, role: UserRecord['role'] = 'admin'): UserRecord => ({ id: id('usr'), username: name, role, enabled: true, password_hash: 'h', created_at: new Date(T0 + made++).toISOString() });
    const a = u('alice');
    t.equal(await store.createUser(a), true);
    t.equal(await store.createUser(u('alice')), false, 'the name is taken');
    t.same(await store.getUserByName('alice'), a);
    t.same(await store.getUser(a.id), a);
    t.equal(await store.getUser('usr_nope'), undefined);
    const b = u('bob', 'user');
    await store.createUser(b);
    await t.rejects(
      store.updateUser(a.id, { enabled: false }, (_before, after, others) => {
        if (!after.enabled && !others.some((o) => o.role === 'admin' && o.enabled)) throw new Error('last admin');
      }),
      /last admin/,
    );
    t.equal((await store.getUser(a.id))!.enabled, true, 'a refused change leaves nothing behind');
    t.equal((await store.updateUser(b.id, { role: 'admin' }))!.role, 'admin');
    t.same((await store.listUsers()).map((x) => x.username).filter((n) => n === 'alice' || n === 'bob'), ['alice', 'bob']);
  });

  t.test('tokens and modules', async (t) => {
    const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: 3, period: 'day' }]);
    await store.insertToken(tok);
    t.same(await store.getTokenByHash(tok.hash), tok);
    t.equal(await store.getTokenByHash('0'.repeat(64)), undefined);
    const changed = await store.updateToken(tok.id, (x) => ({ ...x, name: 'renamed' }));
    t.equal(changed!.name, 'renamed');
    t.equal((await store.getToken(tok.id))!.name, 'renamed');
    t.equal(await store.updateToken('tok_nope', (x) => x), undefined);
    t.ok((await store.listTokens()).some((x) => x.id === tok.id));
    t.equal(await store.moduleEnabled('color_liveness'), true, 'enabled until an operator says otherwise');
    await store.setModuleEnabled('color_liveness', false);
    t.equal(await store.moduleEnabled('color_liveness'), false);
    await store.setModuleEnabled('color_liveness', true);
    t.equal(await store.moduleEnabled('color_liveness'), true);
  });

  t.test('reserve: quota, token re-check, grant', async (t) => {
    const tok = tokenRecord([
      { module_id: 'rgb_liveness', limit: 3, period: 'day' },
      { module_id: 'color_liveness', limit: 0, period: 'never' },
    ]);
    await store.insertToken(tok);
    await reserved(store, reserveInput(tok, { units: 2 }));
    const over = await quotaRefused(store.reserve(reserveInput(tok, { units: 2, at: T0 + 3600_000 })));
    t.equal(over.message, 'The daily quota of rgb_liveness has 1 unit(s) left; this request needs 2');
    t.equal(over.retryAfterSeconds, 13 * 3600, 'seconds to the next UTC midnight');
    const big = await quotaRefused(store.reserve(reserveInput(tok, { units: 4 })));
    t.match(big.message, /more than the whole quota of 3, so split the batch/);
    const zero = await quotaRefused(store.reserve(reserveInput(tok, { moduleId: 'color_liveness' })));
    t.equal(zero.retryAfterSeconds, null, 'no reset for a cumulative quota');
    await store.updateToken(tok.id, (x) => ({ ...x, grants: x.grants.filter((g) => g.module_id !== 'color_liveness') }));
    t.equal((await refusal(store.reserve(reserveInput(tok, { moduleId: 'color_liveness' })))).kind, 'module_forbidden');
    await store.updateToken(tok.id, (x) => ({ ...x, revoked: true, enabled: false }));
    t.equal((await refusal(store.reserve(reserveInput(tok)))).kind, 'invalid_token', 'revoked during the upload');
    t.equal((await refusal(store.reserve(reserveInput(tok, { idempotencyKey: 'k-dead', fingerprint: 'fp' })))).kind, 'invalid_token', 'a keyed call too');
    const expired = tokenRecord([{ module_id: 'rgb_liveness', limit: null, period: 'month' }], { expires_at: new Date(T0).toISOString() });
    await store.insertToken(expired);
    t.equal((await refusal(store.reserve(reserveInput(expired)))).kind, 'invalid_token', 'expired at the reservation time');
    t.same(
      (await store.usageSnapshot({ ...tok, grants: [{ module_id: 'rgb_liveness', limit: 3, period: 'day' }] }, T0)).map((u) => [u.used, u.remaining, u.reset_at]),
      [[2, 1, '2026-05-05T00:00:00.000Z']],
      'refusals wrote nothing',
    );
  });

  t.test('settle: the body carries usage as of settlement, completed keys replay byte for byte', async (t) => {
    const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: 10, period: 'month' }, { module_id: 'color_liveness', limit: null, period: 'never' }]);
    await store.insertToken(tok);
    const input = reserveInput(tok, { idempotencyKey: 'k-1', fingerprint: 'fp-1' });
    const r = await reserved(store, input);
    t.equal(r.state, 'pending');
    t.equal((await refusal(store.reserve(reserveInput(tok, { idempotencyKey: 'k-1', fingerprint: 'fp-1' })))).kind, 'request_in_progress');
    t.equal((await refusal(store.reserve(reserveInput(tok, { idempotencyKey: 'k-1', fingerprint: 'other' })))).kind, 'idempotency_conflict');
    const body = await settled(store.settle(r, T0 + 1000, render(input.requestId), [{ ok: 1 }]));
    t.same(JSON.parse(body).usage, [
      { module_id: 'rgb_liveness', limit: 10, period: 'month', used: 1, remaining: 9, reset_at: '2026-06-01T00:00:00.000Z' },
      { module_id: 'color_liveness', limit: null, period: 'never', used: 0, remaining: null, reset_at: null },
    ]);
    t.equal(body, render(input.requestId)(JSON.parse(body).usage), 'the exact bytes JSON.stringify makes');
    const replay = await store.reserve(reserveInput(tok, { idempotencyKey: 'k-1', fingerprint: 'fp-1' }));
    t.same(replay, { kind: 'replay', status: 200, body });
    t.same((await store.usageSnapshot(tok, T0 + 1000)).map((u) => u.used), [1, 0], 'a replay charges nothing: one unit for the key, however often it is asked');
    t.equal((await store.getReservation(r.id))!.state, 'charged');
    t.not((await store.settle(r, T0 + 2000, render(input.requestId), [])).kind, 'settled', 'a charged reservation is not settled twice');
    t.equal((await store.getReservation(r.id))!.state, 'charged');
    // the contract's order: token (401) and grant (403) before the key (409, a replay), as
    // when the call starts; here the token changed during the upload
    await store.updateToken(tok.id, (x) => ({ ...x, grants: x.grants.filter((g) => g.module_id !== 'rgb_liveness') }));
    t.equal((await refusal(store.reserve(reserveInput(tok, { idempotencyKey: 'k-1', fingerprint: 'fp-1' })))).kind, 'module_forbidden', 'the grant removed: no replay');
    await store.updateToken(tok.id, (x) => ({ ...x, revoked: true, enabled: false }));
    t.equal((await refusal(store.reserve(reserveInput(tok, { idempotencyKey: 'k-1', fingerprint: 'fp-1' })))).kind, 'invalid_token', 'revoked: no replay');
    t.equal((await refusal(store.reserve(reserveInput(tok, { idempotencyKey: 'k-1', fingerprint: 'other' })))).kind, 'invalid_token', 'nor a conflict');
  });

  t.test('refund gives units back once and releases the key', async (t) => {
    const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: 2, period: 'never' }]);
    await store.insertToken(tok);
    const r = await reserved(store, reserveInput(tok, { units: 2, idempotencyKey: 'k-r', fingerprint: 'fp' }));
    t.equal((await store.refund(r.id, T0 + 10))!.state, 'refunded');
    t.equal((await store.refund(r.id, T0 + 20))!.state, 'refunded', 'idempotent');
    t.same((await store.usageSnapshot(tok, T0)).map((u) => u.used), [0]);
    const again = await reserved(store, reserveInput(tok, { units: 2, idempotencyKey: 'k-r', fingerprint: 'fp', at: T0 + 30 }));
    t.not(again.id, r.id, 'the same key runs again');
    const page = await store.listLedger({ token_id: tok.id });
    t.same(page.items.map((e) => [e.kind, e.units]), [['charge', 2], ['refund', 2], ['charge', 2]]);
    t.ok((await store.verifyLedger()).ok, 'counters equal charges minus refunds');
  });

  /** A reservation of `units` whose settlement failed, its key held for the operator. */
  async function failedSettlement(t: Test, tok: TokenRecord, key: string, units = 1): Promise<{ r: Reservation; saved: string }> {
    const input = reserveInput(tok, { idempotencyKey: key, fingerprint: 'fp', units });
    const r = await reserved(store, input);
    injectSettlementFault(store, () => 'fail');
    const failed = await store.settle(r, T0, render(input.requestId), []);
    injectSettlementFault(store, null);
    t.equal(failed.kind, 'settlement_failed');
    const saved = (await store.getReservation(r.id))!.unsaved_body!;
    t.equal(JSON.parse(saved).request_id, input.requestId, 'the answer that could not be saved is kept');
    return { r, saved };
  }

  t.test('settlement failure: held for the operator, resolved once', async (t) => {
    const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: 5, period: 'day' }]);
    await store.insertToken(tok);
    const { r, saved } = await failedSettlement(t, tok, 'k-f');
    t.ok((await store.listSettlementFailed()).some((x) => x.id === r.id));
    t.equal((await refusal(store.reserve(reserveInput(tok, { idempotencyKey: 'k-f', fingerprint: 'fp' })))).kind, 'settlement_failed', 'the retry hears the same answer');
    const [a, b] = await Promise.all([store.resolveReservation(r.id, 'charge', T0 + 5), store.resolveReservation(r.id, 'refund', T0 + 5)]);
    const outcomes = [a, b].map((x) => (typeof x === 'object' ? x.state : x)).sort();
    t.ok(outcomes.includes('not_pending') && outcomes.length === 2, 'one of two concurrent resolutions takes effect');
    const state = (await store.getReservation(r.id))!.state;
    t.ok(outcomes.includes(state), `the winner's state is the stored one (${state})`);
    t.same((await store.usageSnapshot(tok, T0)).map((u) => u.used), [state === 'charged' ? 1 : 0], 'units as the winner left them, once');
    t.same((await store.listLedger({ token_id: tok.id })).items.map((e) => e.kind), state === 'charged' ? ['charge'] : ['charge', 'refund']);
    const replay = await store.reserve(reserveInput(tok, { idempotencyKey: 'k-f', fingerprint: 'fp' }));
    if (state === 'charged') t.same(replay, { kind: 'replay', status: 200, body: saved }, 'charge completes the key with the kept answer');
    else t.equal(replay.kind, 'reserved', 'refund releases the key');
    t.equal(await store.resolveReservation('rsv_nope', 'charge', T0), undefined);
    t.ok((await store.verifyLedger()).ok);
  });

  // The race above shows that one resolution wins, not what each one does (on LMDB the charge
  // always wins it): each is held to its rule alone first.
  t.test('settlement failure resolved by "charge": the units stay charged and the key replays the kept answer', async (t) => {
    const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: 5, period: 'day' }]);
    await store.insertToken(tok);
    const { r, saved } = await failedSettlement(t, tok, 'k-charge', 2);
    const done = await store.resolveReservation(r.id, 'charge', T0 + 5);
    t.match(done, { id: r.id, state: 'charged', settled_at: new Date(T0 + 5).toISOString(), unsaved_body: null });
    t.same(await store.getReservation(r.id), done, 'as stored');
    t.notOk((await store.listSettlementFailed()).some((x) => x.id === r.id), 'off the operator list');
    t.same((await store.usageSnapshot(tok, T0)).map((u) => u.used), [2], 'the units stay used');
    t.same((await store.listLedger({ token_id: tok.id })).items.map((e) => [e.kind, e.units]), [['charge', 2]], 'nothing more in the ledger');
    t.same(await store.reserve(reserveInput(tok, { idempotencyKey: 'k-charge', fingerprint: 'fp' })), { kind: 'replay', status: 200, body: saved }, 'the key replays the kept answer');
    t.same(await store.getResults(r.request_id), { at: new Date(T0 + 5).toISOString(), token_id: tok.id, module_id: 'rgb_liveness', results: JSON.parse(saved).results },
      "the kept answer's results are stored, as the settlement would have stored them (a session's backend reads them)");
    t.equal(await store.resolveReservation(r.id, 'charge', T0 + 6), 'not_pending', 'resolved once');
    t.equal(await store.resolveReservation(r.id, 'refund', T0 + 6), 'not_pending', 'and not refunded after');
    t.same((await store.usageSnapshot(tok, T0)).map((u) => u.used), [2]);
    t.ok((await store.verifyLedger()).ok);
  });

  t.test('settlement failure resolved by "refund": the units come back and the key is released', async (t) => {
    const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: 5, period: 'day' }]);
    await store.insertToken(tok);
    const { r } = await failedSettlement(t, tok, 'k-refund', 2);
    const done = await store.resolveReservation(r.id, 'refund', T0 + 5);
    t.match(done, { id: r.id, state: 'refunded', settled_at: new Date(T0 + 5).toISOString(), unsaved_body: null });
    t.same(await store.getReservation(r.id), done, 'as stored');
    t.notOk((await store.listSettlementFailed()).some((x) => x.id === r.id), 'off the operator list');
    t.equal(await store.getResults(r.request_id), undefined, 'no results stored for a call nobody pays');
    t.same((await store.usageSnapshot(tok, T0)).map((u) => u.used), [0], 'the units are back');
    t.same((await store.listLedger({ token_id: tok.id })).items.map((e) => [e.kind, e.units]), [['charge', 2], ['refund', 2]]);
    const retry = await store.reserve(reserveInput(tok, { idempotencyKey: 'k-refund', fingerprint: 'fp', units: 2 }));
    t.equal(retry.kind, 'reserved', 'the key is free: the retry runs afresh');
    t.equal(await store.resolveReservation(r.id, 'refund', T0 + 6), 'not_pending', 'resolved once');
    t.equal(await store.resolveReservation(r.id, 'charge', T0 + 6), 'not_pending', 'and not charged after');
    t.same((await store.usageSnapshot(tok, T0)).map((u) => u.used), [2], "only the retry's units");
    t.ok((await store.verifyLedger()).ok);
  });

  t.test('racing for the last units: exactly the limit is reserved', async (t) => {
    const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: 7, period: 'day' }]);
    await store.insertToken(tok);
    const outcomes = await Promise.all(Array.from({ length: 24 }, (_, i) => store.reserve(reserveInput(tok, { idempotencyKey: `race-${i % 12}`, fingerprint: 'fp' }))));
    const won = outcomes.filter((o) => o.kind === 'reserved').length;
    t.equal(won, 7);
    const codes = new Set(outcomes.flatMap((o) => (o.kind === 'reserved' ? [] : [o.kind])));
    t.ok([...codes].every((c) => c === 'quota_exceeded' || c === 'request_in_progress'), `refusals: ${[...codes].join(', ')}`);
    t.same((await store.usageSnapshot(tok, T0)).map((u) => u.used), [7]);
    t.ok((await store.verifyLedger()).ok);
  });

  t.test('ledger and audit pages', async (t) => {
    const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: null, period: 'day' }]);
    await store.insertToken(tok);
    for (let i = 0; i < 5; i++) await reserved(store, reserveInput(tok, { at: T0 + i * 1000 }));
    const seen: string[] = [];
    let cursor: string | undefined;
    for (let round = 0; round < 10; round++) {
      const page = await store.listLedger({ token_id: tok.id, limit: 2, ...(cursor ? { cursor } : {}) });
      seen.push(...page.items.map((e) => e.at));
      t.notOk('windows' in (page.items[0] ?? {}), 'windows are internal');
      if (!page.next_cursor) break;
      cursor = page.next_cursor;
    }
    t.same(seen, [0, 1, 2, 3, 4].map((i) => new Date(T0 + i * 1000).toISOString()), 'every entry once, in time order');
    t.equal((await store.listLedger({ token_id: tok.id, from: T0 + 1000, to: T0 + 3000 })).items.length, 2, 'from inclusive, to exclusive');
    // a cursor from outside the range (another query's, or forged) starts at the range's bound:
    // on LMDB it replaced the bound, and rows outside from/to came back
    const key = (k: unknown) => Buffer.from(JSON.stringify(k)).toString('base64url');
    const inRange = [1, 2].map((i) => new Date(T0 + i * 1000).toISOString());
    for (const [order, cursor] of [['asc', key([0, ''])], ['desc', key([8e15, ''])]] as const) {
      for (const token_id of [tok.id, undefined]) {
        const page = await store.listLedger({ ...(token_id ? { token_id } : {}), from: T0 + 1000, to: T0 + 3000, order, cursor, limit: 1000 });
        const mine = page.items.filter((e) => e.token_id === tok.id).map((e) => e.at).sort();
        t.same(mine, inRange, `${order}, ${token_id ? 'one token' : 'every token'}: only the range`);
        t.ok(page.items.every((e) => Date.parse(e.at) >= T0 + 1000 && Date.parse(e.at) < T0 + 3000), 'nothing outside it');
      }
    }
    for (let i = 0; i < 3; i++) {
      await store.writeAudit({ request_id: `req_audit_${i}_${tok.id}`, at: new Date(T0 + i).toISOString(), token_id: tok.id, module_id: 'rgb_liveness', client_ip: '192.0.2.1', country: null, status: 200, error_code: null, captures: 1, charged_units: 1, latency_ms: 1.5 });
    }
    const a1 = await store.listAudit({ token_id: tok.id, limit: 2 });
    t.equal(a1.items.length, 2);
    const a2 = await store.listAudit({ token_id: tok.id, limit: 2, cursor: a1.next_cursor! });
    t.same([...a1.items, ...a2.items].map((x) => x.request_id), [0, 1, 2].map((i) => `req_audit_${i}_${tok.id}`));
    t.equal(a2.next_cursor, null);
  });

  t.test('console: a new token name may not match another, case ignored; a rename to its own name is fine', async (t) => {
    const tag = randomBytes(4).toString('hex');
    const a = tokenRecord([], { name: `Dup ${tag}` });
    await store.insertToken(a);
    const dup = (p: Promise<unknown>) => p.then(() => 'resolved', (e: unknown) => (e instanceof DuplicateTokenNameError ? 'duplicate' : String(e)));
    t.equal(await dup(store.insertToken(tokenRecord([], { name: `dup ${tag.toUpperCase()}` }))), 'duplicate', 'create refused');
    const b = tokenRecord([], { name: `other ${tag}` });
    await store.insertToken(b);
    t.equal(await dup(store.updateToken(b.id, (x) => ({ ...x, name: `DUP ${tag}` }))), 'duplicate', 'rename refused');
    t.equal((await store.getToken(b.id))!.name, `other ${tag}`, 'the refused rename changed nothing');
    t.equal((await store.updateToken(a.id, (x) => ({ ...x, name: `dup ${tag}` })))!.name, `dup ${tag}`, 'same key, other case');
  });

  t.test('console: names alike under Unicode special casing are one name on both stores', async (t) => {
    // JavaScript lowers a word's last Σ to ς and İ to i + U+0307 (the key, token-rules.ts);
    // PostgreSQL's lower() to σ and i: its check let these in beside their twins
    const tag = randomBytes(4).toString('hex');
    const dup = (p: Promise<unknown>) => p.then(() => 'resolved', (e: unknown) => (e instanceof DuplicateTokenNameError ? 'duplicate' : String(e)));
    await store.insertToken(tokenRecord([], { name: `\u039f\u0394\u039f\u03a3 ${tag}` })); // ΟΔΟΣ
    t.equal(await dup(store.insertToken(tokenRecord([], { name: `\u03bf\u03b4\u03bf\u03c2 ${tag}` }))), 'duplicate', 'οδος beside ΟΔΟΣ');
    await store.insertToken(tokenRecord([], { name: `\u0130zmir ${tag}` })); // İzmir
    t.equal(await dup(store.insertToken(tokenRecord([], { name: `i\u0307zmir ${tag}` }))), 'duplicate', 'i + U+0307 zmir beside İzmir');
    const other = tokenRecord([], { name: `izmir ${tag}` });
    t.equal(await dup(store.insertToken(other)), 'resolved', 'plain izmir is another name (its key has no U+0307)');
    t.equal(await dup(store.updateToken(other.id, (x) => ({ ...x, name: `I\u0307ZMIR ${tag}` }))), 'duplicate', 'renamed to İzmir\'s key: refused');
  });

  t.test('console: token and user search pages in name order with a keyset cursor', async (t) => {
    const tag = randomBytes(4).toString('hex');
    const names = [`Srch${tag} b`, `srch${tag} A`, `srch${tag} c`, `SRCH${tag} d`, `srch${tag} E`];
    const toks = names.map((name) => tokenRecord([], { name }));
    for (const tok of toks) await store.insertToken(tok);
    const seen: string[] = [];
    let after: [string, string] | undefined;
    for (let round = 0; round < 10; round++) {
      const page = await store.searchTokens({ q: `srch${tag}`, limit: 2, ...(after ? { after } : {}) });
      seen.push(...page.items.map((x) => x.name));
      if (!page.next) break;
      after = page.next;
    }
    t.same(seen, [`srch${tag} A`, `Srch${tag} b`, `srch${tag} c`, `SRCH${tag} d`, `srch${tag} E`], 'every match once, case ignored in the order');
    t.same((await store.searchTokens({ q: toks[2]!.id, limit: 10 })).items.map((x) => x.id), [toks[2]!.id], 'q matches the id');
    t.same((await store.searchTokens({ q: `nothing-${tag}`, limit: 10 })), { items: [], next: null });
    t.same((await store.searchTokens({ name: `SRCH${tag} a`, limit: 10 })), { items: [toks[1]], next: null }, 'name: that name alone, case ignored');
    t.same((await store.searchTokens({ name: `srch${tag}`, limit: 10 })), { items: [], next: null }, 'name: not a part of names');
    t.same((await store.searchTokens({ name: `srch${tag} c`, q: toks[2]!.id, limit: 10 })).items.map((x) => x.id), [toks[2]!.id], 'name and q');
    t.same((await store.searchTokens({ name: `srch${tag} c`, q: toks[3]!.id, limit: 10 })).items, [], 'name and q: both must match');

    const users = ['zed', 'amy', 'kim'].map((n, i): UserRecord => ({ id: id('usr'), username: `u${tag}-${n}`, role: 'user', enabled: true, password_hash: 'h', created_at: new Date(T0 + i).toISOString() }));
    for (const u of users) await store.createUser(u);
    const p1 = await store.searchUsers({ q: `U${tag}`, limit: 2 });
    t.same(p1.items.map((u) => u.username), [`u${tag}-amy`, `u${tag}-kim`]);
    const p2 = await store.searchUsers({ q: `u${tag}`, limit: 2, after: p1.next! });
    t.same(p2, { items: [users[0]], next: null }, 'the last page');
  });

  t.test('console: audit filters fill the page; daily totals per UTC day, a refund on the day of its charge', async (t) => {
    const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: null, period: 'never' }]);
    await store.insertToken(tok);
    for (let i = 0; i < 6; i++) {
      await store.writeAudit({ request_id: `req_f_${i}_${tok.id}`, at: new Date(T0 + i).toISOString(), token_id: tok.id, module_id: 'rgb_liveness', client_ip: '192.0.2.1', country: null, status: i % 2 ? 429 : 200, error_code: i % 2 ? 'quota_exceeded' : null, captures: 1, charged_units: i % 2 ? 0 : 1, latency_ms: 1 });
    }
    const failed = (r: { status: number }) => r.status >= 400;
    const f1 = await store.listAudit({ token_id: tok.id, limit: 2 }, failed);
    t.same(f1.items.map((r) => r.request_id), [1, 3].map((i) => `req_f_${i}_${tok.id}`), 'only matching rows, the page filled');
    const f2 = await store.listAudit({ token_id: tok.id, limit: 2, cursor: f1.next_cursor! }, failed);
    t.same(f2.items.map((r) => r.request_id), [`req_f_5_${tok.id}`]);
    const d1 = await store.listAudit({ token_id: tok.id, limit: 4, order: 'desc' });
    const d2 = await store.listAudit({ token_id: tok.id, limit: 4, order: 'desc', cursor: d1.next_cursor! });
    t.same([...d1.items, ...d2.items].map((r) => r.request_id), [5, 4, 3, 2, 1, 0].map((i) => `req_f_${i}_${tok.id}`), 'newest first on request, across pages');

    const day = 86_400_000;
    const early = await reserved(store, reserveInput(tok, { at: T0 - day, units: 2 }));
    await reserved(store, reserveInput(tok, { at: T0 - 60_000, units: 3 }));
    await reserved(store, reserveInput(tok, { at: T0 }));
    await store.refund(early.id, T0 + 1000);
    const days = await store.dailyTotals({ fromDay: '2026-05-02', toDay: '2026-05-04', token_id: tok.id });
    t.same(days, [
      { day: '2026-05-02', charged: 0, refunded: 0, units: 0 },
      { day: '2026-05-03', charged: 2, refunded: 2, units: 0 },
      { day: '2026-05-04', charged: 4, refunded: 0, units: 4 },
    ]);
  });

  t.test('completed keys are pruned after the retention, pending ones never', async (t) => {
    const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: null, period: 'day' }]);
    await store.insertToken(tok);
    const done = await reserved(store, reserveInput(tok, { idempotencyKey: 'old', fingerprint: 'fp' }));
    await settled(store.settle(done, T0, render('r'), []));
    const held = await reserved(store, reserveInput(tok, { idempotencyKey: 'held', fingerprint: 'fp' }));
    t.ok((await store.pruneIdempotency(T0 + 25 * 3600_000, 24)) >= 1);
    t.equal((await store.reserve(reserveInput(tok, { idempotencyKey: 'old', fingerprint: 'other' }))).kind, 'reserved', 'the old key is free again');
    t.equal((await refusal(store.reserve(reserveInput(tok, { idempotencyKey: 'held', fingerprint: 'fp' })))).kind, 'request_in_progress');
    t.equal((await store.getReservation(held.id))!.state, 'pending');
  });

  t.test('a prune of more keys than one batch holds: every expired key and settled reservation goes, the rest stay', async (t) => {
    // 1,201 keys: more than one batch of either store's pruner (LMDB reads 1,000 a chunk and
    // removes 500 a write; PostgreSQL removes 1,000 a statement), and not a multiple of any
    const T1 = T0 + 100 * 86_400_000;
    await store.pruneIdempotency(T1, 24); // what earlier cases left expires before T1 - 24 h
    const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: null, period: 'never' }]);
    await store.insertToken(tok);
    const old: Reservation[] = [];
    for (let i = 0; i < 1201; i += 50) {
      // 50 at a time: concurrent calls share their stores' commits, so this takes seconds
      old.push(...(await Promise.all(Array.from({ length: Math.min(50, 1201 - i) }, async (_, j) => {
        const r = await reserved(store, reserveInput(tok, { idempotencyKey: `old-${i + j}`, fingerprint: 'fp', at: T1 }));
        await settled(store.settle(r, T1, render(r.request_id), []));
        return r;
      }))));
    }
    const fresh = await reserved(store, reserveInput(tok, { idempotencyKey: 'fresh', fingerprint: 'fp', at: T1 + 2 * 3600_000 }));
    const freshBody = await settled(store.settle(fresh, T1 + 2 * 3600_000, render(fresh.request_id), []));
    const held = await reserved(store, reserveInput(tok, { idempotencyKey: 'held', fingerprint: 'fp', at: T1 }));

    t.equal(await store.pruneIdempotency(T1 + 25 * 3600_000, 24), 1201, 'the 1,201 keys completed before the cutoff, no other');
    for (const i of [0, 499, 500, 999, 1000, 1200]) {
      t.equal(await store.getReservation(old[i]!.id), undefined, `the settled reservation of key ${i} went with it`);
      t.equal((await store.reserve(reserveInput(tok, { idempotencyKey: `old-${i}`, fingerprint: 'other', at: T1 + 25 * 3600_000 }))).kind, 'reserved', `key ${i} is free again`);
    }
    t.same(await store.reserve(reserveInput(tok, { idempotencyKey: 'fresh', fingerprint: 'fp', at: T1 + 25 * 3600_000 })), { kind: 'replay', status: 200, body: freshBody }, 'a key completed after the cutoff still replays');
    t.equal((await store.getReservation(fresh.id))!.state, 'charged');
    t.equal((await refusal(store.reserve(reserveInput(tok, { idempotencyKey: 'held', fingerprint: 'fp', at: T1 + 25 * 3600_000 })))).kind, 'request_in_progress', 'a pending key is never pruned');
    t.equal((await store.getReservation(held.id))!.state, 'pending');
    t.equal(await store.pruneIdempotency(T1 + 25 * 3600_000, 24), 0, 'a second pass finds nothing');
  });

  t.test('sessions', async (t) => {
    const s = { user_id: 'usr_s', username: 'root', role: 'admin' as const, csrf_token: 'c', created_at: T0, last_seen: T0, expires_at: T0 + 1000 };
    await store.putSession('k1', s);
    await store.putSession('k2', s);
    await store.putSession('k3', { ...s, user_id: 'usr_other', expires_at: T0 - 1 });
    t.same(await store.getSession('k1'), s);
    await store.putSession('k1', { ...s, last_seen: T0 + 5 });
    t.equal((await store.getSession('k1'))!.last_seen, T0 + 5);
    t.equal(await store.deleteUserSessions('usr_s', 'k2'), 1);
    t.equal(await store.getSession('k1'), undefined);
    t.ok(await store.getSession('k2'));
    await store.sweepSessions((x) => x.expires_at > T0);
    t.equal(await store.getSession('k3'), undefined);
    await store.deleteSession('k2');
    t.equal(await store.getSession('k2'), undefined);
  });

  t.test('touching a session moves its idle clock forward only, and never brings a deleted one back', async (t) => {
    const s = { user_id: 'usr_t', username: 'root', role: 'admin' as const, csrf_token: 'c', created_at: T0, last_seen: T0, expires_at: T0 + 1000 };
    await store.putSession('t1', s);
    t.equal(await store.touchSession('t1', T0 + 20), true);
    t.same(await store.getSession('t1'), { ...s, last_seen: T0 + 20 }, 'only the idle clock moved');
    t.equal(await store.touchSession('t1', T0 + 10), true);
    t.equal((await store.getSession('t1'))!.last_seen, T0 + 20, 'never back');
    await store.deleteUserSessions('usr_t');
    t.equal(await store.touchSession('t1', T0 + 30), false, 'gone: says so');
    t.equal(await store.getSession('t1'), undefined, 'and writes nothing');
    t.equal(await store.touchSession('never-was', T0), false);
    t.equal(await store.getSession('never-was'), undefined);
  });

  t.test('login throttle counts are shared through the store', async (t) => {
    const addr = '198.51.100.7';
    for (let i = 0; i < PAIR_LIMIT; i++) await store.recordLoginFailure(addr, 'Target', T0 + i);
    t.ok(throttleWait(await store.readThrottle(addr, 'target', T0 + 10), T0 + 10) > 0, 'this address is stopped for the name');
    t.equal(throttleWait(await store.readThrottle('198.51.100.8', 'target', T0 + 10), T0 + 10), 1, 'elsewhere: the per-name delay only');
    await store.recordLoginSuccess('198.51.100.8', 'target', T0 + 2000);
    const v = await store.readThrottle('198.51.100.8', 'TARGET', T0 + 2000);
    t.equal(v.known, true);
    t.equal(v.name, undefined, 'the success cleared the name');
    await Promise.all(Array.from({ length: 8 }, (_, i) => store.recordLoginFailure('203.0.113.50', `spray${i}`, T0)));
    t.equal((await store.readThrottle('203.0.113.50', 'x', T0)).address!.count, 8, 'concurrent failures each count');
    await store.sweepLoginThrottle(T0 + 24 * 3600_000);
    const swept = await store.readThrottle(addr, 'target', T0 + 24 * 3600_000);
    t.same([swept.address, swept.pair], [undefined, undefined]);
  });

  t.test('the login throttle sweep removes what the rules no longer count, and only that, in any number', async (t) => {
    // the rules (throttle-rules.ts): an address or pair count lives WINDOW_MS from its window's
    // start, a name's count WINDOW_MS from its last failure, a known address KNOWN_ADDRESS_MS
    const S = T0 + 40 * 24 * 3600_000;
    const at = S + WINDOW_MS;
    await store.recordLoginFailure('192.0.2.1', 'slowname', S);
    // the name's second failure moves its last failure on, not its window
    await store.recordLoginFailure('192.0.2.2', 'slowname', S + 1);
    await store.recordLoginFailure('192.0.2.3', 'edge', S + 1);
    const old = await store.readThrottle('192.0.2.1', 'slowname', at);
    t.ok(old.address && old.pair && old.name, 'the counts are there before the sweep');
    await store.recordLoginSuccess('198.51.100.20', 'knownold', at - KNOWN_ADDRESS_MS);
    await store.recordLoginSuccess('198.51.100.21', 'knownnew', at - KNOWN_ADDRESS_MS + 1);
    // a spray from many networks: more than a statement of the PostgreSQL sweep deletes
    const spray = 1100;
    const net = (i: number) => `2001:db8:5:${i.toString(16)}::/64`;
    for (let i = 0; i < spray; i += 50) await Promise.all(Array.from({ length: Math.min(50, spray - i) }, (_, j) => store.recordLoginFailure(net(i + j), `sprayed${i + j}`, S - 1)));
    await store.sweepLoginThrottle(at);
    const first = await store.readThrottle('192.0.2.1', 'slowname', at);
    t.same([first.address, first.pair], [undefined, undefined], 'an address and a pair count whose window began WINDOW_MS ago are gone');
    t.ok(first.name, 'the name count stays: its last failure is younger than WINDOW_MS');
    const second = await store.readThrottle('192.0.2.2', 'slowname', at);
    t.same([second.address?.count, second.pair?.count], [1, 1], 'counts whose window began WINDOW_MS - 1 ago stay');
    const edge = await store.readThrottle('192.0.2.3', 'edge', at);
    t.same([edge.address?.count, edge.pair?.count, edge.name?.count], [1, 1, 1], 'likewise the name of a last failure WINDOW_MS - 1 ago');
    for (const i of [0, 1, spray - 1]) {
      const v = await store.readThrottle(net(i), `sprayed${i}`, at);
      t.same([v.address, v.pair, v.name], [undefined, undefined, undefined], `sprayed network ${i}: its counts swept`);
    }
    // read as of the success, a known address that was swept reads as unknown
    t.equal((await store.readThrottle('198.51.100.20', 'knownold', at - KNOWN_ADDRESS_MS)).known, false, 'a known address KNOWN_ADDRESS_MS old is gone');
    t.equal((await store.readThrottle('198.51.100.21', 'knownnew', at - KNOWN_ADDRESS_MS + 1)).known, true, 'one a millisecond younger stays');
    await store.sweepLoginThrottle(at + WINDOW_MS);
    t.equal((await store.readThrottle('192.0.2.1', 'slowname', at + WINDOW_MS)).name, undefined, 'the name count goes WINDOW_MS after its last failure');
  });

  // review3 (time): the host's clock stepped back an hour after a pair was stopped. Read as live,
  // the counts stopped it for the window plus the step; their age is unknown, so they are
  // forgotten (throttle-rules.ts stampedAhead) and the sweep removes them. Counts stamped less
  // than a window ahead are attempts that raced, and count.
  t.test('login throttle counts stamped a window after the clock (a clock stepped back) are forgotten, and swept', async (t) => {
    const S = T0 + 80 * 24 * 3600_000;
    const addr = '192.0.2.99';
    for (let i = 0; i < PAIR_LIMIT; i++) await store.recordLoginFailure(addr, 'stepped', S + i);
    t.ok(throttleWait(await store.readThrottle(addr, 'stepped', S + 10), S + 10) > 0, 'the pair is stopped at the time of its failures');
    const raced = S - 5_000;
    t.ok(throttleWait(await store.readThrottle(addr, 'stepped', raced), raced) > 0, 'counts stamped a little after the clock (attempts that raced) still count');
    const back = S - 3600_000;
    t.equal(throttleWait(await store.readThrottle(addr, 'stepped', back), back), 0, 'an hour earlier by the clock: nothing counts');
    await store.recordLoginFailure(addr, 'stepped', back);
    const v = await store.readThrottle(addr, 'stepped', back);
    t.same([v.address?.count, v.pair?.count, v.name?.count], [1, 1, 1], 'the next failure counts afresh from the clock');
    await store.recordLoginFailure('192.0.2.98', 'ahead', S);
    await store.sweepLoginThrottle(back);
    const swept = await store.readThrottle('192.0.2.98', 'ahead', back);
    t.same([swept.address, swept.pair, swept.name], [undefined, undefined, undefined], 'the sweep removes counts stamped after its clock');
  });

  t.test('login attempts are reserved before the password check: concurrent ones never pass the limit', async (t) => {
    const addr = '192.0.2.200';
    const waits = (await Promise.all(Array.from({ length: 40 }, () => store.reserveLoginAttempt(addr, 'Burst', T0)))).map((r) => r.wait);
    t.equal(waits.filter((w) => w === 0).length, PAIR_LIMIT, 'exactly the pair limit may check a password');
    t.ok(waits.filter((w) => w > 0).every((w) => w === 15 * 60), 'the rest wait for the window to end');
    const v = await store.readThrottle(addr, 'burst', T0);
    t.same([v.address!.count, v.pair!.count, v.name!.count], [PAIR_LIMIT, PAIR_LIMIT, PAIR_LIMIT], 'a refused attempt counts nothing');

    const other = '192.0.2.201';
    t.same(await store.reserveLoginAttempt(other, 'solo', T0), { wait: 0, known: false });
    t.equal((await store.reserveLoginAttempt(other, 'solo', T0 + 1)).wait, 0);
    await store.recordLoginSuccess(other, 'solo', T0 + 1, { reservedAt: T0 + 1 });
    const ok = await store.readThrottle(other, 'solo', T0 + 1);
    t.same([ok.address?.count, ok.pair, ok.name, ok.known], [1, undefined, undefined, true], 'a success gives back its own address count only');
    t.same(await store.reserveLoginAttempt(other, 'SOLO', T0 + 2), { wait: 0, known: true }, 'known after the success, any case');
    t.equal((await store.reserveLoginAttempt(other, 'never-checked', T0 + 2)).wait, 0);
    await store.releaseLoginAttempt(other, 'never-checked', T0 + 2);
    const released = await store.readThrottle(other, 'never-checked', T0 + 2);
    t.same([released.address?.count, released.pair, released.name], [2, undefined, undefined], 'a released attempt counts nothing (the address keeps the SOLO one)');

    // successes, releases and reservations on the same rows at once queue, none fails
    const mixed = '192.0.2.202';
    const ops = Array.from({ length: 30 }, (_, i) =>
      i % 3 === 0 ? store.recordLoginSuccess(mixed, 'Mixed', T0 + i, { reservedAt: T0 + i })
        : i % 3 === 1 ? store.releaseLoginAttempt(mixed, 'mixed', T0 + i)
          : store.reserveLoginAttempt(mixed, 'MIXED', T0 + i));
    t.equal((await Promise.allSettled(ops)).filter((r) => r.status === 'rejected').length, 0);
  });

  t.test('healthy', async (t) => {
    t.equal(await store.healthy(), true);
  });

  t.test('verdict-signing keys: one current key however many nodes start; rotation retires it; old retirements are deleted', async (t) => {
    if (store.kind === 'lmdb') {
      // one host keeps its key files in DATA_DIR/keys (test/signing); the store must not
      // pretend to hold keys it does not share
      await t.rejects(store.listSigningKeys(), /DATA_DIR\/keys/);
      await t.rejects(store.createFirstSigningKey(await newKey(T0)), /DATA_DIR\/keys/);
      return;
    }
    const candidates = await Promise.all([1, 2, 3, 4, 5].map(() => newKey(T0)));
    const winners = await Promise.all(candidates.map((c) => store.createFirstSigningKey(c)));
    const first = winners[0]!.kid;
    t.ok(candidates.some((c) => c.kid === first));
    t.same(new Set(winners.map((w) => w.kid)), new Set([first]), 'every racing node got the same key');
    t.same((await store.listSigningKeys()).map((k) => [k.kid, k.retired_at]), [[first, null]]);
    t.equal((await store.listSigningKeys())[0]!.jwk.d, candidates.find((c) => c.kid === first)!.jwk.d, 'the private key round-trips');

    const next = await newKey(T0 + 1000);
    const rotated = await store.rotateSigningKey(next, T0 + 1000, T0 - RETIRED_DELETE_MS);
    t.same(rotated, { kid: next.kid, retired: first, deleted: [] });
    t.equal((await store.createFirstSigningKey(await newKey(T0))).kid, next.kid, 'a late starter takes the current key');

    const racing = await Promise.all([2000, 2000, 2000].map(async (d) => store.rotateSigningKey(await newKey(T0 + d), T0 + d, T0 - RETIRED_DELETE_MS)));
    const keys = await store.listSigningKeys();
    t.equal(keys.length, 5);
    t.equal(keys.filter((k) => k.retired_at === null).length, 1, 'racing rotations leave one current key');
    t.same(new Set(racing.map((r) => r.retired)).size, 3, 'each rotation retired a different key');
    t.same(publicJwksOf(keys, T0 + 3000).keys.map((k) => k.kid), keys.map((k) => k.kid), 'retired keys stay published');

    const later = T0 + 1000 + RETIRED_DELETE_MS;
    const last = await store.rotateSigningKey(await newKey(later), later, later - RETIRED_DELETE_MS);
    t.same(last.deleted, [first], 'only the key retired a full RETIRED_DELETE_MS ago is deleted');
    t.notOk((await store.listSigningKeys()).some((k) => k.kid === first));
  });

  // Last: it prunes everything older than its cutoff, other tests' records at T0 included.
  t.test('retention: audit, results and ledger entries older than the cutoff go; ledger verify still holds', async (t) => {
    const DAY = 86_400_000;
    const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: null, period: 'never' }]);
    await store.insertToken(tok);
    const old = T0 + 100 * DAY;
    const recent = old + 10 * DAY;
    const cutoff = old + 5 * DAY;
    for (const at of [old, old + 1, recent]) {
      const r = await reserved(store, reserveInput(tok, { at }));
      await settled(store.settle(r, at + 10, render(r.request_id), [{ at }]));
    }
    const refunded = await reserved(store, reserveInput(tok, { at: old + 2 }));
    await store.refund(refunded.id, old + 3);
    // a charge just before the cutoff whose refund comes just after it: the pruner takes the
    // charge and keeps the refund
    const straddling = await reserved(store, reserveInput(tok, { at: cutoff - 1 }));
    await store.refund(straddling.id, cutoff + 1);
    const dayOf = (ms: number) => new Date(ms).toISOString().slice(0, 10);
    const units = async () => (await store.dailyTotals({ fromDay: dayOf(old), toDay: dayOf(recent), token_id: tok.id })).map((d) => [d.day, d.units]);
    const unitsBefore = await units();
    for (const at of [old, recent]) {
      await store.writeAudit({ request_id: `req_ret_${at}_${tok.id}`, at: new Date(at).toISOString(), token_id: tok.id, module_id: 'rgb_liveness', client_ip: '192.0.2.1', country: null, status: 200, error_code: null, captures: 1, charged_units: 1, latency_ms: 1 });
    }
    const used = async () => (await store.usageSnapshot(tok, recent))[0]!.used;
    const usedBefore = await used();
    t.equal(usedBefore, 3);

    t.ok((await store.pruneLedgerBefore(cutoff)) >= 4, 'the old charges, the old charge of the refund and the refund went');
    t.ok((await store.pruneResultsBefore(cutoff)) >= 2);
    t.ok((await store.pruneAuditBefore(cutoff)) >= 1);
    t.same((await store.listLedger({ token_id: tok.id })).items.map((e) => [e.kind, e.at]), [['refund', new Date(cutoff + 1).toISOString()], ['charge', new Date(recent).toISOString()]], 'only the entries after the cutoff are left');
    t.same((await store.listAudit({ token_id: tok.id })).items.map((a) => a.at), [new Date(recent).toISOString()]);
    t.equal(await used(), usedBefore, 'usage counters are untouched');
    t.same(await units(), unitsBefore, 'the daily totals are untouched: every day\'s units as before, the straddling day 0 (PostgreSQL read the pruned days as gone, that day as -1)');
    const check = await store.verifyLedger();
    t.equal(check.ok, true, `counters = pruned totals + remaining entries ${JSON.stringify(check.mismatches)}`);
    t.same([await store.pruneLedgerBefore(cutoff), await store.pruneResultsBefore(cutoff), await store.pruneAuditBefore(cutoff)], [0, 0, 0], 'a second pass finds nothing');
    // several nodes prune at once: the rows go once, the totals are counted once
    for (const at of [old + 5, old + 6, old + 7]) {
      const r = await reserved(store, reserveInput(tok, { at }));
      await settled(store.settle(r, at + 10, render(r.request_id), []));
    }
    const removed = await Promise.all([1, 2, 3].map(() => store.pruneLedgerBefore(cutoff)));
    t.equal(removed.reduce((a, b) => a + b, 0), 3, 'racing pruners removed each entry once');
    t.equal((await store.verifyLedger()).ok, true);
  });
}
