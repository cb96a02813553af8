// The main thread's side of /metrics: each API worker keeps its own registry, so a scrape asks
// every worker for a snapshot and sums them (aggregateMetrics). Two bounds, so scrapes cannot
// pile up work or memory in the main thread:
// - one broadcast at a time: a request that comes while one is under way shares its answer
//   (fifty scrapes at once cost one round of messages and one aggregation, not fifty);
// - a deadline: a worker that does not answer within METRICS_GATHER_TIMEOUT_MS (its event loop
//   stuck, or it is dying) does not hold the scrape, nor its entry, for ever. The answer then
//   carries the last snapshot that worker sent (its counters never seem to go back, which
//   Prometheus would read as a reset), or nothing of it if it never sent one; the caller logs
//   which workers were late.
// A worker that is gone leaves its counters and histograms behind, as of the last snapshot it
// sent (a scrape's answer, or the one it sends as it retires): they are folded into `retired`,
// which every answer includes. Its replacement counts from 0 under the same labels (`thread`
// is api-<index>), so the sum goes on from where it was; what the dead worker counted after
// its last snapshot is lost (a crash sends none).

import { foldCounters, type MetricsSnapshot } from '../observability/index.ts';

/** How long a scrape waits for the API workers' snapshots (ms); a worker's answer normally takes
 * well under a millisecond, and Prometheus's own scrape timeout defaults to 10 s. */
export const METRICS_GATHER_TIMEOUT_MS = 2_000;

export interface GatheringOptions<W, T> {
  /** the API workers now */
  workers(): readonly W[];
  /** asks worker `w` for its snapshot; its answer is handed to answered(w, id, snapshot) */
  ask(w: W, id: number): void;
  /** what a scrape answers, from the workers' snapshots */
  finish(snapshots: MetricsSnapshot[]): Promise<T>;
  /** workers that had not answered at the deadline (`stale`: those whose last snapshot was used) */
  late?(late: W[], stale: W[]): void;
  timeoutMs?: number;
}

interface Round<W, T> {
  readonly id: number;
  readonly want: Set<W>;
  readonly got: Map<W, MetricsSnapshot>;
  readonly answer: Promise<T>;
  readonly complete: (timedOut: boolean) => void;
}

export class MetricsGathering<W, T> {
  private round: Round<W, T> | null = null;
  private nextId = 1;
  /** each worker's latest snapshot, for a scrape it is late for */
  private readonly last = new Map<W, MetricsSnapshot>();
  /** the counters and histograms of the workers that are gone, summed (foldCounters) */
  private retired: MetricsSnapshot | null = null;

  constructor(private readonly opts: GatheringOptions<W, T>) {}

  /** The scrape's answer: the round under way, or a new one. */
  gather(): Promise<T> {
    if (this.round) return this.round.answer;
    const id = this.nextId++;
    const want = new Set(this.opts.workers());
    const got = new Map<W, MetricsSnapshot>();
    let settle!: (snapshots: MetricsSnapshot[]) => void;
    const answer = new Promise<MetricsSnapshot[]>((resolve) => (settle = resolve)).then((s) => this.opts.finish(s));
    let timer: NodeJS.Timeout | undefined;
    const complete = (timedOut: boolean) => {
      if (this.round?.id !== id) return;
      this.round = null;
      clearTimeout(timer);
      const late = [...want].filter((w) => !got.has(w));
      const stale = late.filter((w) => this.last.has(w));
      if (timedOut && late.length > 0) this.opts.late?.(late, stale);
      const snapshots = [...want].map((w) => got.get(w) ?? this.last.get(w)).filter((s): s is MetricsSnapshot => s !== undefined);
      settle(this.retired ? [...snapshots, this.retired] : snapshots);
    };
    this.round = { id, want, got, answer, complete };
    timer = setTimeout(() => complete(true), this.opts.timeoutMs ?? METRICS_GATHER_TIMEOUT_MS);
    for (const w of want) this.opts.ask(w, id);
    this.check();
    return answer;
  }

  /** Worker `w` answered round `id` (a late answer is kept for the next scrape it misses). */
  answered(w: W, id: number, snapshot: MetricsSnapshot): void {
    this.last.set(w, snapshot);
    const r = this.round;
    if (!r || r.id !== id || !r.want.has(w)) return;
    r.got.set(w, snapshot);
    this.check();
  }

  /** Worker `w`'s last snapshot, sent unasked as it retires (answers the round under way too). */
  final(w: W, snapshot: MetricsSnapshot): void {
    this.last.set(w, snapshot);
    const r = this.round;
    if (!r || !r.want.has(w)) return;
    r.got.set(w, snapshot);
    this.check();
  }

  /** Worker `w` is gone: its counters stay (retired), the round under way completes without it. */
  forget(w: W): void {
    const last = this.last.get(w);
    if (last) this.retired = foldCounters(this.retired ? [this.retired, last] : [last]);
    this.last.delete(w);
    const r = this.round;
    if (!r || !r.want.delete(w)) return;
    r.got.delete(w);
    this.check();
  }

  /** whether a round is under way (for tests) */
  get pending(): boolean {
    return this.round !== null;
  }

  private check(): void {
    const r = this.round;
    if (r && r.got.size >= r.want.size) r.complete(false);
  }
}
