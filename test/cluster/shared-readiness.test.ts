import t from 'tap';
import { MessageChannel } from 'node:worker_threads';
import { RemoteInference } from '../../src/cluster/remote-inference.ts';
import { createReadinessBoard, publishReadiness, ReadinessReader } from '../../src/cluster/shared-readiness.ts';
import type { ModuleReadiness } from '../../src/inference/index.ts';

// The engine's readiness in shared memory (src/cluster/shared-readiness.ts): what every API
// worker reads at once. Before it, each worker answered from a copy a message updated in the
// worker's own time, so one could answer /health/ready 200 while another refused verify calls
// as module_unavailable, and a replacement worker served with no readiness until its message.

const mod = (module_id: string, ready: boolean, extra: Partial<ModuleReadiness> = {}): ModuleReadiness =>
  ({ module_id, ready, model_set: 'set-a', trained: true, execution_provider: 'wasm', ...extra }) as ModuleReadiness;

t.test('a reader sees nothing before the first publication, then each publication as it was written', async (t) => {
  const board = createReadinessBoard();
  const reader = new ReadinessReader(board);
  t.equal(reader.read(), null, 'nothing published yet');
  const loading = [mod('rgb_liveness', false), mod('color_liveness', false, { error: 'warming' })];
  publishReadiness(board, loading);
  t.same(reader.read(), loading, 'the first publication');
  const first = reader.read();
  t.equal(reader.read(), first, 'parsed once per publication: the same answer while nothing changed');
  const ready = [mod('rgb_liveness', true), mod('color_liveness', true, { execution_note: 'fallback' })];
  publishReadiness(board, ready);
  t.same(reader.read(), ready, 'the next publication, at once, with no message');
  t.same(new ReadinessReader(board).read(), ready, 'a reader made later (a replacement worker) starts from the last publication');
});

t.test("an API worker's RemoteInference answers from the board: nothing before the first publication, then each at once", async (t) => {
  const board = createReadinessBoard();
  const { port1 } = new MessageChannel();
  t.teardown(() => port1.close());
  const remote = new RemoteInference(port1, 1000, () => {}, board);
  t.same(remote.readiness(), [], 'nothing published: no module ready');
  publishReadiness(board, [mod('rgb_liveness', false)]);
  t.same(remote.readiness(), [mod('rgb_liveness', false)], 'loading');
  publishReadiness(board, [mod('rgb_liveness', true)]);
  t.same(remote.readiness(), [mod('rgb_liveness', true)], 'ready, with no message');
});

t.test('a readiness too long for the board is published with its long texts cut, never dropped', async (t) => {
  const board = createReadinessBoard();
  const reader = new ReadinessReader(board);
  publishReadiness(board, [mod('rgb_liveness', true)]);
  publishReadiness(board, [mod('rgb_liveness', false, { error: 'x'.repeat(100_000) })]);
  const got = reader.read()!;
  t.equal(got[0]!.ready, false, 'the newer readiness, not the last one that fitted');
  t.equal(got[0]!.error, `${'x'.repeat(1000)}...`, 'its error cut');
});
