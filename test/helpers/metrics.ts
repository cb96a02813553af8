import { waitFor, WaitTimeout } from './wait.ts';

// Reading the service's Prometheus metrics from /metrics, and waiting on them.

/** The first sample of the metric `name` (any labels), or NaN when /metrics lacks it. */
export async function metric(baseUrl: string, name: string, headers: Record<string, string> = {}): Promise<number> {
  const text = await (await fetch(`${baseUrl}/metrics`, { headers })).text();
  const m = new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(text);
  return m ? Number(m[1]) : NaN;
}

/** Verify slots held on the host (lv_verify_slots_in_use). */
export const slotsInUse = (baseUrl: string) => metric(baseUrl, 'lv_verify_slots_in_use');

/** Waits until the verify slots in use satisfy `want` (a count or a predicate); resolves with
 * the count seen. A hang detector, not a speed check. */
export async function slotsUntil(baseUrl: string, want: number | ((n: number) => boolean), what: string, timeoutMs = 20_000): Promise<number> {
  const ok = typeof want === 'number' ? (n: number) => n === want : want;
  let seen = NaN;
  try {
    await waitFor(async () => ok((seen = await slotsInUse(baseUrl))), { timeoutMs, what });
  } catch (err) {
    if (err instanceof WaitTimeout) throw new Error(`slots in use stayed at ${seen}, waiting for ${what}`);
    throw err;
  }
  return seen;
}
