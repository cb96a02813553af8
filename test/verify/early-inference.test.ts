// Reserve and infer overlapped (src/verify/verify.ts, src/verify/early-inference.ts): a key-less
// call of a caller whose last reservation on the worker succeeded has its inference started as
// validate ends, beside its reservation, and the engine's answer is used only once the
// reservation is granted. In process on both real stores (test/verify/world.ts: the service's
// own metering), each case the overlap changes: the overlap itself, a keyed call (always
// serial: a replay runs no engine at all, as the spec's lifecycle says, nor does a key
// conflict), a quota refusal (429, nothing charged, the engine's answer dropped, and the caller serial
// from then on: a caller with no quota left cannot make the engine run in a loop; nor for
// more images than its last granted call), a burst of concurrent calls (a burst from a caller
// whose quota just ran out drops one engine run, not one per call; with quota left, as many
// overlapped as the units it had left at its last settlement cover, including units since
// spent through another worker; the overlap back once the burst is done), an
// inference failure before the reservation answers (refunded once), both at once, a refused
// call answered without waiting for the engine (its parts kept until the engine answers),
// and a demo call (serial).

import t, { type Test } from 'tap';
import { createToken } from '../../src/admin/tokens.ts';
import type { StoreBackend } from '../../src/store/index.ts';
import { EarlyInference } from '../../src/verify/index.ts';
import type { ReceivedPart } from '../../src/verify/ports.ts';
import { request, single } from '../helpers/captures.ts';
import { waitFor } from '../helpers/wait.ts';
import { addToken, audits, bothStores, call, codeOf, ledger, usedBy, world, type World } from './world.ts';

const stores = await bothStores(t);
const body = (id: string) => request([single({ id })]);
/** the engine and the reservation, in the order the use case called them */
const order = (calls: string[]) => calls.filter((c) => c === 'reserve' || c === 'infer');
const count = (list: string[], item: string) => list.filter((x) => x === item).length;

/** Holds every reservation, before it reaches the store, until `n` calls have asked for one:
 * each call of a burst has then chosen between overlapped and serial (startedEarly comes just
 * before the reservation) before any reservation of the burst answers. Resolves with the
 * engine's call count at that moment. */
function holdReservations(w: World, n: number): Promise<number> {
  const reserve = w.deps.metering.reserve;
  let arrived = 0;
  let open!: (engineCalls: number) => void;
  const all = new Promise<number>((resolve) => (open = resolve));
  w.deps.metering.reserve = async (input) => {
    if (++arrived === n) open(w.inference.calls);
    await all;
    return reserve(input);
  };
  return all;
}

function cases(t: Test, store: StoreBackend) {
  t.test('a caller whose last reservation succeeded: the engine runs while the reservation is held, and the call is charged as before', async (t) => {
    const w = world(store, { early: new EarlyInference() });
    const { token, plaintext } = await addToken(w);
    t.equal((await call(w, plaintext, body('ov-1'))).status, 200);
    t.same(order(w.calls), ['reserve', 'infer'], 'a token not yet seen is serial');
    w.calls.length = 0;
    const held = w.holdReserve();
    const answering = call(w, plaintext, body('ov-2'));
    await held.reached;
    t.same(order(w.calls), ['infer', 'reserve'], 'the engine has the call before its reservation answers');
    t.equal(w.inference.calls, 2);
    held.open();
    const answer = await answering;
    t.equal(answer.status, 200);
    t.equal(codeOf(answer, 'settle'), 'verdict');
    t.match(JSON.parse(answer.body as string), { charged_units: 1, results: [{ capture_id: 'ov-2', status: 'ok' }] });
    t.same(await ledger(w, token), [{ kind: 'charge', units: 1 }, { kind: 'charge', units: 1 }]);
    t.match(w.facts, [{ charged: 1 }, { charged: 1, refunded: 0, replayed: false }]);
    t.equal(w.metrics.inference.length, 2, 'both inferences timed');
    t.equal(count(w.metrics.steps, 'infer'), 2);
  });

  t.test('a keyed call is serial even for an overlapped caller; its replay runs no engine at all and returns the stored answer, nor does a key conflict', async (t) => {
    const w = world(store, { early: new EarlyInference() });
    const { token, plaintext } = await addToken(w);
    t.equal((await call(w, plaintext, body('k-0'))).status, 200, 'a reservation: the caller is overlapped from now on');

    // the first call with the key: serial, though its caller is overlapped
    w.calls.length = 0;
    let held = w.holdReserve();
    const answering = call(w, plaintext, body('rp-1'), { idempotencyKey: 'rp-key' });
    await held.reached;
    t.equal(w.inference.calls, 1, 'a keyed call: no engine run before the reservation answers');
    held.open();
    const first = await answering;
    t.equal(first.status, 200);
    t.same(order(w.calls), ['reserve', 'infer']);
    t.equal(w.inference.calls, 2);

    // its replay: the caller is still overlapped (the keyed call was a reservation), and the
    // engine would answer differently now: a result the replay must not carry
    w.calls.length = 0;
    w.inference.retryNext = true;
    held = w.holdReserve();
    const replaying = call(w, plaintext, body('rp-1'), { idempotencyKey: 'rp-key' });
    await held.reached;
    t.equal(w.inference.calls, 2, 'a replay: no engine run beside the reservation');
    held.open();
    const replay = await replaying;
    t.equal(w.inference.calls, 2, 'a replay: no engine run at all');
    t.notOk(w.calls.includes('infer'), 'the engine was never asked');
    t.equal(replay.status, 200);
    t.equal(codeOf(replay, 'reserve'), 'replayed');
    t.equal(replay.body, first.body, 'the stored answer, byte for byte');
    t.match(w.facts[2], { replayed: true, reserved: 0, charged: 0, refunded: 0 });
    t.same(await ledger(w, token), [{ kind: 'charge', units: 1 }, { kind: 'charge', units: 1 }], 'the replay is free');
    t.equal(w.metrics.inference.length, 2, 'no inference timed for the replay');
    t.equal(count(w.metrics.steps, 'infer'), 2, 'nor an infer step');
    const lines = await audits(w, token, 3);
    t.match(lines.find((l) => l.replayed), { charged_units: 0, replayed: true });

    // the replay was no reservation: the caller's next key-less call is serial again
    w.calls.length = 0;
    held = w.holdReserve();
    const next = call(w, plaintext, body('k-2'));
    await held.reached;
    t.equal(w.inference.calls, 2, 'no engine run before the reservation answers');
    held.open();
    t.equal((await next).status, 200);
    t.same(order(w.calls), ['reserve', 'infer']);

    // overlapped again (k-2 was a reservation): the key sent with another input is a conflict,
    // and the engine never runs for it
    w.inference.retryNext = false;
    w.calls.length = 0;
    const conflict = await call(w, plaintext, body('rp-other'), { idempotencyKey: 'rp-key' });
    t.equal(conflict.status, 409);
    t.equal(codeOf(conflict, 'reserve'), 'idempotency_conflict');
    t.equal(w.inference.calls, 3, 'a key conflict: no engine run');
    t.notOk(w.calls.includes('infer'));
  });

  t.test('a key still in progress: 409 request_in_progress, and the engine never runs for it', async (t) => {
    const w = world(store, { early: new EarlyInference() });
    const { plaintext } = await addToken(w);
    t.equal((await call(w, plaintext, body('ip-0'))).status, 200, 'a reservation: the caller is overlapped from now on');
    const engine = w.inference.holdNext();
    const first = call(w, plaintext, body('ip-1'), { idempotencyKey: 'ip-key' });
    await engine.reached; // the key is reserved, its inference held
    t.equal(w.inference.calls, 2);
    const again = await call(w, plaintext, body('ip-1'), { idempotencyKey: 'ip-key' });
    t.equal(again.status, 409);
    t.equal(codeOf(again, 'reserve'), 'request_in_progress');
    t.equal(w.inference.calls, 2, 'no engine run for the call answered 409');
    engine.open();
    t.equal((await first).status, 200);
  });

  t.test('a quota refusal: 429, nothing charged, the engine\'s answer dropped; refused again, the caller gets no engine run at all', async (t) => {
    const w = world(store, { early: new EarlyInference() });
    const { token, plaintext } = await addToken(w, [{ module_id: 'rgb_liveness', limit: 1 }]);
    t.equal((await call(w, plaintext, body('q-1'))).status, 200);
    const over = await call(w, plaintext, body('q-2'));
    t.equal(over.status, 429);
    t.equal(codeOf(over, 'reserve'), 'quota_exceeded');
    t.equal(w.inference.calls, 2, 'the refused call was overlapped: the engine ran');
    t.match(w.facts[1], { status: 429, reserved: 0, charged: 0, refunded: 0 });
    t.equal(w.metrics.inference.length, 1, 'the dropped inference is not timed');
    t.equal(count(w.metrics.steps, 'infer'), 1);
    // the abuse case: a caller with no quota left calling in a loop
    for (let i = 3; i <= 6; i++) t.equal((await call(w, plaintext, body(`q-${i}`))).status, 429);
    t.equal(w.inference.calls, 2, 'four more refused calls, no engine run: the caller is serial until a reservation succeeds');
    t.same(await ledger(w, token), [{ kind: 'charge', units: 1 }]);
    t.equal(await usedBy(w, token), 1);
    const lines = await audits(w, token, 6);
    t.equal(lines.filter((l) => l.status === 429 && l.charged_units === 0 && l.outcome === 'error').length, 5, 'five refusals audited, nothing charged');
  });

  t.test('a burst of calls from a caller whose quota just ran out: one engine run dropped, not one per call', async (t) => {
    const w = world(store, { early: new EarlyInference() });
    const { token, plaintext } = await addToken(w, [{ module_id: 'rgb_liveness', limit: 1 }]);
    t.equal((await call(w, plaintext, body('burst-0'))).status, 200, 'its last unit: the caller is overlapped from now on');
    const n = 8;
    const held = holdReservations(w, n);
    const answering = Promise.all(Array.from({ length: n }, (_, i) => call(w, plaintext, body(`burst-${i + 1}`))));
    t.equal(await held, 2, `${n} calls waiting for their reservations, one engine run started beside them (before the bound: ${n})`);
    const answers = await answering;
    t.same(answers.map((a) => a.status), Array(n).fill(429), 'every call of the burst refused');
    t.same(answers.map((a) => codeOf(a, 'reserve')), Array(n).fill('quota_exceeded'));
    t.equal(w.inference.calls, 2, 'no engine run for the calls that were serial');
    await w.inference.last;
    t.same(await ledger(w, token), [{ kind: 'charge', units: 1 }], 'nothing charged for the burst');
    t.equal(w.metrics.inference.length, 1, 'the dropped run is not timed');
    // refused: serial from now on
    const after = await call(w, plaintext, body('burst-after'));
    t.equal(after.status, 429);
    t.equal(w.inference.calls, 2, 'the next call is serial: no engine run');
  });

  t.test('a burst of calls from a caller with quota: every call overlapped while its last settlement\'s units left cover them, every call charged', async (t) => {
    const w = world(store, { early: new EarlyInference() });
    const { token, plaintext } = await addToken(w);
    t.equal((await call(w, plaintext, body('qb-0'))).status, 200, '10 units, 9 left');
    const reserve = w.deps.metering.reserve;
    const n = 4;
    const held = holdReservations(w, n);
    const answering = Promise.all(Array.from({ length: n }, (_, i) => call(w, plaintext, body(`qb-${i + 1}`))));
    t.equal(await held, 1 + n, 'every call of the burst overlapped');
    const answers = await answering;
    t.same(answers.map((a) => a.status), Array(n).fill(200));
    t.equal(w.inference.calls, 1 + n, 'every call inferred once');
    t.equal(await usedBy(w, token), 1 + n, 'every call charged');
    // every claim given back: the next call is overlapped again
    w.deps.metering.reserve = reserve;
    w.calls.length = 0;
    const gate = w.holdReserve();
    const next = call(w, plaintext, body('qb-next'));
    await gate.reached;
    t.same(order(w.calls), ['infer', 'reserve'], 'overlapped: the burst left no claim behind');
    gate.open();
    t.equal((await next).status, 200);
  });

  t.test('a burst larger than the units left: as many calls overlapped as the units cover, the rest serial', async (t) => {
    const w = world(store, { early: new EarlyInference() });
    const { token, plaintext } = await addToken(w, [{ module_id: 'rgb_liveness', limit: 4 }]);
    t.equal((await call(w, plaintext, body('lb-0'))).status, 200, '4 units, 3 left');
    const n = 6;
    const held = holdReservations(w, n);
    const answering = Promise.all(Array.from({ length: n }, (_, i) => call(w, plaintext, body(`lb-${i + 1}`))));
    t.equal(await held, 1 + 3, 'three calls overlapped, the others serial');
    const answers = await answering;
    t.same(answers.map((a) => a.status).sort(), [200, 200, 200, 429, 429, 429]);
    t.equal(await usedBy(w, token), 4);
  });

  t.test('units spent through another worker: this worker\'s last sight of them bounds what a burst drops, once', async (t) => {
    const w = world(store, { early: new EarlyInference() });
    const other = world(store, { early: new EarlyInference() }); // another API worker's memory, the same store
    const { token, plaintext } = await addToken(w, [{ module_id: 'rgb_liveness', limit: 3 }]);
    t.equal((await call(w, plaintext, body('sw-0'))).status, 200, 'here: 2 left');
    for (const id of ['sw-o1', 'sw-o2']) t.equal((await call(other, plaintext, body(id))).status, 200, 'spent through the other worker');
    const n = 5;
    const held = holdReservations(w, n);
    const answering = Promise.all(Array.from({ length: n }, (_, i) => call(w, plaintext, body(`sw-${i + 1}`))));
    t.equal(await held, 1 + 2, 'two calls overlapped: the 2 units this worker last saw left');
    t.same((await answering).map((a) => a.status), Array(n).fill(429));
    t.same(await ledger(w, token), [{ kind: 'charge', units: 1 }, { kind: 'charge', units: 1 }, { kind: 'charge', units: 1 }], 'nothing charged for the burst');
    t.equal((await call(w, plaintext, body('sw-after'))).status, 429);
    t.equal(w.inference.calls, 3, 'refused: serial from then on');
  });

  t.test('a call with more images than the caller\'s last granted one is serial: a single frame charged buys no dropped batch', async (t) => {
    const w = world(store, { early: new EarlyInference() });
    const { token, plaintext } = await addToken(w, [{ module_id: 'rgb_liveness', limit: 1 }]);
    t.equal((await call(w, plaintext, body('b-1'))).status, 200, 'one image reserved: the caller is overlapped for calls of one image');
    w.calls.length = 0;
    const over = await call(w, plaintext, request([single({ id: 'b-2' }), single({ id: 'b-3' })]));
    t.equal(over.status, 429);
    t.equal(codeOf(over, 'reserve'), 'quota_exceeded');
    t.equal(w.inference.calls, 1, 'two images after a reservation of one: no engine run');
    t.same(await ledger(w, token), [{ kind: 'charge', units: 1 }]);
  });

  t.test('the engine fails before the reservation answers: the granted reservation is refunded once, 500 inference_failed', async (t) => {
    const w = world(store, { early: new EarlyInference() });
    const { token, plaintext } = await addToken(w);
    t.equal((await call(w, plaintext, body('f-1'))).status, 200);
    w.calls.length = 0;
    w.inference.fault = 'inference_failed';
    const held = w.holdReserve();
    const answering = call(w, plaintext, body('f-2'));
    await held.reached;
    await w.inference.last; // the engine has failed; the reservation is still to answer
    held.open();
    const answer = await answering;
    t.equal(answer.status, 500);
    t.equal(codeOf(answer, 'infer'), 'inference_failed');
    t.equal(count(w.calls, 'refund'), 1, 'one refund asked');
    t.same(await ledger(w, token), [{ kind: 'charge', units: 1 }, { kind: 'charge', units: 1 }, { kind: 'refund', units: 1 }]);
    t.equal(await usedBy(w, token), 1);
    t.match(w.facts[1], { reserved: 1, charged: 0, refunded: 1 });
    t.equal(w.metrics.inference.length, 1, 'only the answered inference is timed');
    // a refunded call still had its reservation: the caller stays overlapped
    w.calls.length = 0;
    const retry = await call(w, plaintext, body('f-3'));
    t.equal(retry.status, 200);
    t.same(order(w.calls), ['infer', 'reserve']);
  });

  t.test('the engine fails and the quota is used up: the reservation\'s 429 is the answer, and nothing is refunded', async (t) => {
    const w = world(store, { early: new EarlyInference() });
    const { token, plaintext } = await addToken(w, [{ module_id: 'rgb_liveness', limit: 1 }]);
    t.equal((await call(w, plaintext, body('fq-1'))).status, 200);
    w.calls.length = 0;
    w.inference.fault = 'crash';
    const over = await call(w, plaintext, body('fq-2'));
    t.equal(over.status, 429);
    t.equal(codeOf(over, 'reserve'), 'quota_exceeded');
    t.same(order(w.calls), ['infer', 'reserve']);
    t.equal(count(w.calls, 'refund'), 0, 'no reservation, no refund');
    t.same(await ledger(w, token), [{ kind: 'charge', units: 1 }]);
    t.equal(w.logs.filter((l) => l.msg === 'verify failed').length, 0, 'the dropped engine failure is not the call\'s error');
  });

  t.test('a refused call is answered at once, its slot given back; its parts only once the engine has answered', async (t) => {
    const w = world(store, { early: new EarlyInference() });
    const { plaintext } = await addToken(w, [{ module_id: 'rgb_liveness', limit: 1 }]);
    t.equal((await call(w, plaintext, body('w-1'))).status, 200);
    w.calls.length = 0;
    const engine = w.inference.holdNext();
    let received: ReceivedPart[] = [];
    // rgb8: the image part's bytes are the pixels the engine reads in place
    const over = await call(w, plaintext, request([single({ id: 'w-2', encoding: 'rgb8' })]), { onParts: (p) => (received = p) });
    t.equal(over.status, 429, 'answered while the engine still holds the call');
    t.equal(codeOf(over, 'reserve'), 'quota_exceeded');
    t.ok(w.calls.includes('slot released'), 'the slot is back with the answer');
    const image = received.find((p) => p.name !== 'metadata')!;
    t.ok(image.data().length > 0, 'the pixels the engine reads stay until it answers');
    engine.open();
    await waitFor(() => image.data().length === 0, { what: 'the parts released once the engine answered' });
    t.pass('released after the engine answered');
  });

  t.test('a demo call stays serial: its archive, named by the reservation\'s time, comes before its inference', async (t) => {
    const w = world(store, { early: new EarlyInference() });
    const demo = await createToken(store, { name: `demo-${Math.random()}`, demo: true, grants: [{ module_id: 'rgb_liveness', limit: null, period: 'never' }] });
    for (const id of ['d-1', 'd-2', 'd-3']) {
      w.calls.length = 0;
      t.equal((await call(w, demo.plaintext, body(id))).status, 200);
      t.same(w.calls.filter((c) => ['reserve', 'archive', 'infer'].includes(c)), ['reserve', 'archive', 'infer'], `${id}: serial`);
    }
  });
}

for (const s of stores) t.test(`on ${s.kind}`, async (t) => cases(t, s.store));

t.test('the memory: a reservation adds the token, anything else takes it off, the oldest forgotten past capacity', async (t) => {
  const m = new EarlyInference(2);
  t.notOk(m.allows('a', 1), 'a token not seen is serial');
  t.equal(m.start('a', 1), null);
  m.booked('a', 1);
  m.booked('b', 1);
  t.ok(m.allows('a', 1) && m.allows('b', 1));
  m.booked('a', 1); // a again: now the newest
  m.booked('c', 1);
  t.same([m.allows('a', 1), m.allows('b', 1), m.allows('c', 1)], [true, false, true], 'b, the oldest, forgotten');
  t.equal(m.size, 2);
  m.booked('a', null);
  t.notOk(m.allows('a', 1), 'a refusal takes the token off');
  t.equal(m.size, 1);
  m.booked('c', 4);
  t.same([m.allows('c', 0), m.allows('c', 4), m.allows('c', 5)], [true, true, false], 'no more images than the last reservation\'s call sent');
});

t.test('the memory: overlapped calls in flight: the first always, more while the units left at the last settlement cover them', async (t) => {
  const m = new EarlyInference(2);
  m.booked('a', 1); // no settlement seen: no units known left
  const first = m.start('a', 1);
  t.ok(first, 'one call overlapped');
  t.equal(m.start('a', 1), null, 'a second while the first waits for its reservation: serial');
  m.booked('a', null, first); // refused
  t.equal(m.size, 0, 'refused, no claim left: forgotten');
  t.equal(m.start('a', 1), null, 'serial until a reservation succeeds');

  m.booked('b', 2);
  m.settled('b', 3);
  const one = m.start('b', 1, 1);
  const two = m.start('b', 2, 2);
  t.ok(one && two, '3 units left: calls of 1 and 2 units overlapped');
  t.equal(m.start('b', 1, 1), null, 'not one more: 4 units in flight would be more than the 3 left');
  m.booked('b', null); // a serial call of b refused while two claims wait
  t.equal(m.size, 1, 'b stays remembered while its claims are in flight');
  t.notOk(m.allows('b', 1), 'but is serial');
  m.booked('b', 1, one); // a granted reservation: b overlapped again, for calls of 1 image
  // what b had left before the refusal (3) is no longer known: until a settlement tells it
  // again, a call beside the one still in flight is serial (review R2: the refusal forgets it)
  t.equal(m.start('b', 1, 1), null, 'granted again, but no second call in flight on the units left seen before the refusal');
  m.settled('b', Infinity);
  t.ok(m.allows('b', 1, 5), 'no limit: any units');
  t.notOk(m.allows('b', 2), 'but no more images than its last granted call sent');
  m.booked('b', 1, two);

  // forgetting skips a token with a claim in flight
  const held = m.start('b', 1)!;
  m.booked('c', 1);
  m.booked('d', 1);
  t.equal(m.size, 2);
  t.notOk(m.allows('c', 1), 'c forgotten, not b: b has a call in flight');
  m.booked('b', 1, held);
  m.settled('b', 0);
  t.ok(m.start('b', 1), 'b\'s claim given back to the entry it counted in: one call overlapped');
  t.equal(m.start('b', 1), null, 'and, with 0 units left, only one');
});
