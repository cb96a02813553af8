// What a call with an Idempotency-Key hears, in process: the replay of a completed key, the
// refusals on a pending or completed key used with another body, and a key freed by a refund
// (a fresh run, charged again). Only a reservation binds a key: a 422, whether of the metadata
// (refused as it arrives) or of an image (refused once the upload is complete), binds nothing.
// A settlement that failed holds its key until the operator resolves it (the CLI's
// `settlements` commands, run in process). On a real LMDB store and a real PostgreSQL
// (test/verify/world.ts).
// Replaces the spawned test/metering/idempotency.test.ts (one server, seven CLI runs): each of
// its assertions is here, on both stores, with these differences of means: the slow or failing
// call is held or failed by the fake engine instead of TEST_INFERENCE_* prefixes, the
// settlement fails by the store's own fault hook (TEST_SETTLEMENT_FAIL_PREFIX's), the CLI's
// commands run in process (their exit codes by exitCodeOf), and the replay's own request id is
// read from its audit line (the transport sends that id as X-Request-ID on every answer:
// test/http/http-basics.test.ts). A 429 leaving the key free is in
// quota-refusal-charges-nothing.test.ts.

import t from 'tap';
import { buildCapture, buildVerifyBody } from '../../src/client/index.ts';
import { EXIT, exitCodeOf } from '../../src/cli/errors.ts';
import { meteringCommands } from '../../src/cli/metering.ts';
import type { CliContext } from '../../src/cli/command.ts';
import { loadConfig } from '../../src/config/index.ts';
import { request, single } from '../helpers/captures.ts';
import { addToken, audits, bodyCode, bothStores, call, charges, codeOf, failNextSettlement, ledger, RETRY_AFTER_SECONDS, usedBy, world } from './world.ts';

/** The same logical packet serialised with another key order and whitespace. */
function reordered(built: ReturnType<typeof buildCapture>) {
  const m = built.metadata;
  const text = JSON.stringify({ frames: m.frames.map((f) => Object.fromEntries(Object.entries(f).reverse())), complete: m.complete, preprocess_profile: m.preprocess_profile, capture_profile: m.capture_profile, mode: m.mode, capture_id: m.capture_id, protocol_version: 1 }, null, 3);
  return buildVerifyBody(text, built.files);
}

const stores = await bothStores(t);

for (const s of stores) {
  t.test(`on ${s.kind}`, async (t) => {
    t.test('a completed key replays its first answer byte for byte, charging nothing more', async (t) => {
      const w = world(s.store);
      const { token, plaintext } = await addToken(w);
      const built = buildCapture(single({ id: 'replay-1' }));
      const first = await call(w, plaintext, buildVerifyBody(built.metadata, built.files), { idempotencyKey: 'k-replay' });
      t.equal(first.status, 200);
      t.equal(first.headers?.['Idempotency-Replayed'], undefined);
      const again = await call(w, plaintext, reordered(built), { idempotencyKey: 'k-replay' });
      t.equal(codeOf(again, 'reserve'), 'replayed', 'the same packet serialised otherwise is the same request');
      t.equal(again.status, 200);
      t.equal(again.body, first.body, 'byte for byte');
      t.equal(w.inference.calls, 1, 'no second inference');
      t.equal(await charges(w, token), 1, 'charged once');
      t.equal(await usedBy(w, token), 1);
      const lines = await audits(w, token, 2);
      t.match(lines[1], { replayed: true, outcome: 'live', charged_units: 0 }, 'the replay is audited as one, with the first call\'s outcome');
      t.equal(JSON.parse(again.body as string).request_id, lines[0]!.request_id, 'the replayed body keeps the first call\'s request id');
      t.not(lines[1]!.request_id, lines[0]!.request_id, 'the replay is a request of its own (the transport sends its id as X-Request-ID)');
      t.match(w.facts[1], { replayed: true, reserved: 0 });
    });

    t.test('a pending key: the same body hears request_in_progress, another body idempotency_conflict; neither charges', async (t) => {
      const w = world(s.store);
      const { token, plaintext } = await addToken(w);
      const body = request([single({ id: 'pending-1' })]);
      const held = w.inference.holdNext();
      const first = call(w, plaintext, body, { idempotencyKey: 'k-pending' });
      await held.reached;

      const same = await call(w, plaintext, body, { idempotencyKey: 'k-pending' });
      t.equal(same.status, 409);
      t.equal(codeOf(same, 'reserve'), 'request_in_progress');
      t.equal(same.headers?.['Retry-After'], String(RETRY_AFTER_SECONDS), 'told when to poll again');

      const other = await call(w, plaintext, request([single({ id: 'pending-1', seed: 99 })]), { idempotencyKey: 'k-pending' });
      t.equal(other.status, 409);
      t.equal(codeOf(other, 'reserve'), 'idempotency_conflict', 'another body on a pending key is a conflict, not a wait');
      t.equal(other.headers?.['Retry-After'], undefined, 'no invitation to retry the conflicting body');
      t.equal(await charges(w, token), 1, 'only the first call holds units');

      held.open();
      const done = await first;
      t.equal(done.status, 200);
      const third = await call(w, plaintext, body, { idempotencyKey: 'k-pending' });
      t.equal(codeOf(third, 'reserve'), 'replayed', 'once done, the same body replays');
      t.equal(third.body, done.body);
      t.equal(await usedBy(w, token), 1);
      t.equal(w.inference.calls, 1);
    });

    t.test('a completed key used with another body is a conflict, and the first answer still replays', async (t) => {
      const w = world(s.store);
      const { token, plaintext } = await addToken(w);
      const body = request([single({ id: 'done-1' })]);
      t.equal((await call(w, plaintext, body, { idempotencyKey: 'k-done' })).status, 200);
      for (const [what, other] of [['other pixels', request([single({ id: 'done-1', seed: 99 })])], ['another capture id', request([single({ id: 'done-2' })])]] as const) {
        const answer = await call(w, plaintext, other, { idempotencyKey: 'k-done' });
        t.equal(answer.status, 409, what);
        t.equal(codeOf(answer, 'reserve'), 'idempotency_conflict', what);
        t.equal(bodyCode(answer), 'idempotency_conflict');
      }
      t.equal(await charges(w, token), 1, 'the conflicts charged nothing');
      t.equal(await usedBy(w, token), 1);
      t.equal(codeOf(await call(w, plaintext, body, { idempotencyKey: 'k-done' }), 'reserve'), 'replayed');
    });

    t.test('a refund frees the key: the rerun is a fresh call, charged again', async (t) => {
      const w = world(s.store);
      const { token, plaintext } = await addToken(w);
      const body = request([single({ id: 'refund-1' })]);
      w.inference.fault = 'inference_failed';
      const failed = await call(w, plaintext, body, { idempotencyKey: 'k-refund' });
      t.equal(failed.status, 500);
      t.equal(codeOf(failed, 'infer'), 'inference_failed');
      t.equal(await usedBy(w, token), 0, 'the units came back');

      const rerun = await call(w, plaintext, body, { idempotencyKey: 'k-refund' });
      t.equal(rerun.status, 200);
      t.equal(codeOf(rerun, 'settle'), 'verdict', 'a fresh answer, not a replay of the failure');
      t.equal(rerun.headers?.['Idempotency-Replayed'], undefined);
      t.equal(w.inference.calls, 2, 'inference ran again');
      t.same(await ledger(w, token), [{ kind: 'charge', units: 1 }, { kind: 'refund', units: 1 }, { kind: 'charge', units: 1 }], 'the ledger shows the hold, its refund, and the rerun charged: a second charge after the refund');
      t.equal(await usedBy(w, token), 1);
      t.match(w.facts, [{ reserved: 1, refunded: 1, charged: 0 }, { reserved: 1, refunded: 0, charged: 1 }]);
    });

    t.test('a 422 binds no key: an image-level one (after the upload) as well as a metadata-level one (as it arrives)', async (t) => {
      const w = world(s.store);
      const { token, plaintext } = await addToken(w);

      const image = request([single({ id: 'bad-image' })]);
      const imagePart = [...image.files.keys()][0]!;
      const corrupt = new Map(image.files);
      const bytes = Uint8Array.from(corrupt.get(imagePart)!);
      bytes[bytes.length - 20]! ^= 0xff;
      corrupt.set(imagePart, bytes);
      const badImage = await call(w, plaintext, buildVerifyBody(image.metadata as never, corrupt), { idempotencyKey: 'k-image' });
      t.equal(badImage.status, 422);
      t.equal(codeOf(badImage, 'validate'), 'invalid_input');
      t.match((badImage.body as string), imagePart, 'refused for the image part');
      t.ok(w.calls.includes('body'), 'the whole body was received before the image was refused');

      const badMetadata = await call(w, plaintext, buildVerifyBody('{"protocol_version": 1, "mode": "single"', image.files), { idempotencyKey: 'k-metadata' });
      t.equal(badMetadata.status, 422);
      t.equal(codeOf(badMetadata, 'receive'), 'invalid_input');
      t.match(JSON.parse(badMetadata.body as string).detail, [{ loc: ['body', 'metadata'] }], 'refused for the metadata');

      t.equal(w.calls.filter((c) => c === 'reserve').length, 0, 'neither reached the reservation');
      // a different, valid body on either key is a first call: the key was never bound
      for (const key of ['k-image', 'k-metadata']) {
        const answer = await call(w, plaintext, request([single({ id: `fresh-${key}` })]), { idempotencyKey: key });
        t.equal(answer.status, 200, `${key} is free`);
        t.equal(codeOf(answer, 'settle'), 'verdict');
      }
      t.equal(await charges(w, token), 2);
      t.equal(await usedBy(w, token), 2);
    });

    t.test('keys are per token: the same key and body with another token is a call of its own', async (t) => {
      const w = world(s.store);
      const a = await addToken(w);
      const b = await addToken(w);
      const body = request([single({ id: 'shared' })]);
      t.equal((await call(w, a.plaintext, body, { idempotencyKey: 'shared-key' })).status, 200);
      const other = await call(w, b.plaintext, body, { idempotencyKey: 'shared-key' });
      t.equal(codeOf(other, 'settle'), 'verdict', 'not a replay');
      t.equal(await usedBy(w, b.token), 1);
    });

    t.test('a settlement that failed: the key stays held (settlement_failed, no Retry-After); the operator charges it and the answer replays, or refunds it and the key is free', async (t) => {
      const w = world(s.store);
      const { token, plaintext } = await addToken(w);
      const body = request([single({ id: 'settle-1' })]);
      failNextSettlement(s.store);
      t.equal(codeOf(await call(w, plaintext, body, { idempotencyKey: 'k-settle' }), 'settle'), 'settlement_failed');
      const again = await call(w, plaintext, body, { idempotencyKey: 'k-settle' });
      t.equal(again.status, 500, 'the key stays held');
      t.equal(codeOf(again, 'reserve'), 'settlement_failed');
      t.equal(again.headers?.['Retry-After'], undefined, 'no invitation to poll');
      t.equal(await usedBy(w, token), 1, 'the retry charged nothing more');
      // the operator's CLI commands, run on this store
      // these two commands read nothing of the run's context but the store (src/cli/metering.ts)
      const ctx: CliContext = { env: {}, cwd: process.cwd(), stdin: process.stdin, stdout: process.stdout, stderr: process.stderr, config: loadConfig({}), exitCode: EXIT.ok };
      const cli = (line: string, args: string[] = []) => meteringCommands[line]!.run(s.store, args, ctx);
      const list = (await cli('settlements list')) as { settlements: { id: string; token_id: string }[] };
      const mine = list.settlements.find((x) => x.token_id === token.id);
      t.match(mine, { state: 'settlement_failed', units: 1, idempotency_key: 'k-settle', has_saved_answer: true }, 'listed for the operator, its answer kept');
      t.match(await cli('settlements resolve', [mine!.id, 'charge']), { state: 'charged' });
      const replay = await call(w, plaintext, body, { idempotencyKey: 'k-settle' });
      t.equal(replay.status, 200);
      t.equal(codeOf(replay, 'reserve'), 'replayed');
      t.equal(JSON.parse(replay.body as string).results[0].capture_id, 'settle-1');
      t.equal(await usedBy(w, token), 1);
      const twice = await cli('settlements resolve', [mine!.id, 'refund']).then(() => null, (err: unknown) => err);
      t.equal(exitCodeOf(twice), EXIT.conflict, 'a resolved settlement cannot be resolved again (exit 4, conflict)');

      const body2 = request([single({ id: 'settle-2' })]);
      failNextSettlement(s.store);
      t.equal(codeOf(await call(w, plaintext, body2, { idempotencyKey: 'k-settle-2' }), 'settle'), 'settlement_failed');
      const held = ((await cli('settlements list')) as { settlements: { id: string; idempotency_key: string }[] }).settlements.find((x) => x.idempotency_key === 'k-settle-2')!;
      t.match(await cli('settlements resolve', [held.id, 'refund']), { state: 'refunded' });
      t.equal(await usedBy(w, token), 1, 'the refund gave its unit back');
      // a fresh run of the key: its settlement fails too, so it is told apart from a held key by
      // its new reservation
      failNextSettlement(s.store);
      t.equal(codeOf(await call(w, plaintext, body2, { idempotencyKey: 'k-settle-2' }), 'settle'), 'settlement_failed', 'the key was released: the retry ran again');
      t.equal(await usedBy(w, token), 2, 'and holds a unit of its own');
      const open = ((await cli('settlements list')) as { settlements: { id: string; token_id: string }[] }).settlements.filter((x) => x.token_id === token.id);
      t.equal(open.length, 1, 'one open settlement for the token: the retry\'s');
      t.not(open[0]!.id, held.id, 'a new reservation, not the refunded one');
      t.match(await cli('ledger verify'), { ok: true, mismatches: [] }, 'the ledger agrees with the counters');
    });
  });
}
