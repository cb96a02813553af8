// Bounded polling of the state a test waits for, instead of a fixed sleep: a fixed sleep is
// either too long on a quiet machine or too short on a loaded one, while a predicate polled
// up to a generous bound returns as soon as the state is there and fails loudly (naming what
// it waited for and the last value seen) when it never comes.

export interface WaitOptions {
  /** give up after this long (a hang detector, not a speed check) */
  timeoutMs?: number;
  /** pause between polls */
  intervalMs?: number;
  /** what is awaited, for the error message */
  what?: string;
}

export class WaitTimeout extends Error {}

/** Polls `predicate` until it returns a truthy value and resolves with that value; rejects
 * with a WaitTimeout after `timeoutMs`. A predicate that throws is treated as "not yet" (the
 * state may be half-visible while it is being written), and its last error is reported. */
export async function waitFor<T>(predicate: () => T | Promise<T>, opts: WaitOptions = {}): Promise<NonNullable<T>> {
  const timeoutMs = opts.timeoutMs ?? 20_000;
  const intervalMs = opts.intervalMs ?? 25;
  const end = Date.now() + timeoutMs;
  let last: unknown;
  let lastError: unknown;
  for (;;) {
    try {
      last = await predicate();
      lastError = undefined;
      if (last) return last as NonNullable<T>;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() >= end) {
      const seen = lastError ? `last error: ${(lastError as Error).message ?? String(lastError)}` : `last value: ${JSON.stringify(last)?.slice(0, 300)}`;
      throw new WaitTimeout(`waited ${timeoutMs} ms for ${opts.what ?? 'a condition'}; ${seen}`);
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** Tracks whether `p` has settled, without waiting for it: lets a test assert that a call
 * has NOT finished yet at some point. */
export function settledState<T>(p: Promise<T>): { readonly settled: boolean } {
  const state = { settled: false };
  p.then(() => (state.settled = true), () => (state.settled = true));
  return state;
}
