import type { Test } from 'tap';

// How a test sees a store's reads and writes against the event loop's turns: LMDB code that must
// not hold a thread (the pruners, recovery, the login throttle's sweep) is checked to read in
// chunks with a turn between them and to remove in short writes (test/store/lmdb-prune-scan.test.ts,
// test/auth/login-throttle.test.ts).

/** The event loop's turns, counted while `body` runs. */
export async function countingTurns<T>(body: (turn: () => number) => Promise<T>): Promise<T> {
  let turns = 0;
  let on = true;
  const tick = () => {
    turns++;
    if (on) setImmediate(tick);
  };
  setImmediate(tick);
  try {
    return await body(() => turns);
  } finally {
    on = false;
  }
}

/** Records, for each range read of `tree` from now until the test ends, the value of `at()`
 * when it was made (the event loop's turn, or 0 to count only). */
export function recordReads(t: Test, tree: { getRange: (...args: never[]) => unknown }, at: () => number = () => 0): number[] {
  const reads: number[] = [];
  const getRange = tree.getRange.bind(tree);
  tree.getRange = ((...args: never[]) => {
    reads.push(at());
    return getRange(...args);
  }) as typeof tree.getRange;
  t.teardown(() => void (tree.getRange = getRange));
  return reads;
}

/** Counts, per event-loop turn, the removals from `tree` until the test ends. */
export function recordRemovals(t: Test, tree: { remove: (...args: never[]) => unknown }, turn: () => number): Map<number, number> {
  const removals = new Map<number, number>();
  const remove = tree.remove.bind(tree);
  tree.remove = ((...args: never[]) => {
    removals.set(turn(), (removals.get(turn()) ?? 0) + 1);
    return remove(...args);
  }) as typeof tree.remove;
  t.teardown(() => void (tree.remove = remove));
  return removals;
}
