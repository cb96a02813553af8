// The API worker's side of bench/relay.mjs: the service's RemoteInference on this thread's
// port to the main thread, driven by the bench's commands.
import { parentPort } from 'node:worker_threads';
import { join } from 'node:path';
import { workerData } from 'node:worker_threads';

const { RemoteInference } = await import(join(workerData.root, 'dist/src/cluster/remote-inference.js'));
const inference = new RemoteInference(parentPort);
const { capture, loop } = await import('./relay-common.mjs');

parentPort.on('message', (m) => {
  if (m.type === 'infer-done') {
    inference.settle(m.id, m.results, m.error);
    return;
  }
  if (m.cmd !== 'run') return;
  let k = 0;
  const call = m.kind === 'ping'
    ? () => inference.ping()
    : () => inference.infer({ module_id: 'rgb_liveness', captures: [capture(`w${k++}`)] });
  void loop(call, m.concurrency, m.seconds).then((result) => parentPort.postMessage({ cmd: 'done', result }));
});
