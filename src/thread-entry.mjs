// Node 20 does not apply `--import tsx` hooks to a worker thread's entry file, so TypeScript
// workers start here: register the tsx loader in this thread, then load the real module,
// named by workerData.entry.
import { workerData } from 'node:worker_threads';
import { register } from 'tsx/esm/api';

register();
await import(workerData.entry);
