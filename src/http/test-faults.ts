import type { FaultHook } from './app.ts';
import type { HttpContext } from './context.ts';

/** Testing only: the ways an API worker can fail that security issue 29 is about, injected per
 * request through an `X-Test-Fault` header. The hook exists only when the process was started
 * with TEST_WORKER_FAULTS=1 (read from the environment here, like the store's
 * TEST_SETTLEMENT_FAIL_PREFIX it is never set in production); without it the header means
 * nothing. Each fault answers the request itself or lets it be routed as usual:
 * - `rejection`: the handler's promise rejects with an unexpected error (500, logged)
 * - `throw`: the handler throws synchronously (500, logged)
 * - `forgotten-rejection`: a promise nobody awaits rejects; the request is routed as usual
 * - `uncaught`: an exception thrown outside any request's chain (the worker retires)
 * - `exit`: the worker thread exits abruptly (the main thread replaces it) */
export function testFaultHook(env: NodeJS.ProcessEnv = process.env): FaultHook | undefined {
  if (env.TEST_WORKER_FAULTS !== '1') return undefined;
  return (ctx: HttpContext) => {
    switch (ctx.headers['x-test-fault']) {
      case 'rejection':
        return Promise.reject(new Error('injected handler rejection (TEST_WORKER_FAULTS)'));
      case 'throw':
        throw new Error('injected handler exception (TEST_WORKER_FAULTS)');
      case 'forgotten-rejection':
        // deliberately unhandled: this is the forgotten promise the worker must survive
        void Promise.reject(new Error('injected forgotten rejection (TEST_WORKER_FAULTS)'));
        return undefined;
      case 'uncaught':
        setImmediate(() => {
          throw new Error('injected uncaught exception (TEST_WORKER_FAULTS)');
        });
        return undefined;
      case 'exit':
        // after this request's answer is written, as a crash between requests would be
        setImmediate(() => process.exit(70));
        return undefined;
      default:
        return undefined;
    }
  };
}
