// Overload soak: `multiplier` x the admitted concurrency (WORKERS x 2 slots) of clients send
// valid verify calls back to back for `seconds`, ignoring Retry-After (the worst case).
// Guarantees checked:
// - only 200 or 503 server_busy (with Retry-After) are answered, no error, no reset;
// - units used (CLI) equal the 200s, the ledger verifies;
// - flat memory: the service's RSS (all its threads) in the last third of the run is not
//   above the middle third by more than `rssGrowthLimit` (the first third is warm-up).
// Reported besides: every 10 s a line with RSS split into RssAnon (heap and native memory: what
// a leak grows) and RssFile (mapped files: LMDB's data.mdb grows it with the store), and the open
// fd count; at the end the store's growth on disk per call answered (200s and 503s together).

import { buildCapture, buildVerifyBody } from '../../src/client/index.ts';
import { smallSingle } from '../harness/wire.ts';
import { diskBytes, Failures, fmtBytes, ledgerOk, makeToken, memoryOf, rssOf, startServer, unitsUsed, type MemorySample, type ScenarioResult } from './lib.ts';

export interface OverloadOptions {
  seconds: number;
  /** API workers; each admits 2 verify calls */
  workers?: number;
  /** clients = multiplier x admitted concurrency */
  multiplier?: number;
  /** allowed RSS growth from the middle third to the last third of the run (bytes) */
  rssGrowthLimit?: number;
  log?: (line: string) => void;
  /** how often the memory line is logged and kept in the report (default 10 s) */
  memoryEveryMs?: number;
}

const memoryLine = (m: MemorySample) => `t=${(m.at / 1000).toFixed(0)} s rss=${fmtBytes(m.rss)} anon=${fmtBytes(m.anon)} file=${fmtBytes(m.file)} shmem=${fmtBytes(m.shmem)} fds=${m.fds}`;

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.floor(s.length / 2)]! : 0;
};

export async function runOverload(opts: OverloadOptions): Promise<ScenarioResult> {
  const log = opts.log ?? (() => {});
  const failures = new Failures();
  const workers = opts.workers ?? 2;
  const clients = workers * 2 * (opts.multiplier ?? 4);
  const server = await startServer({ ready: true, env: { WORKERS: String(workers) } });
  try {
    const { id: tokenId, token } = await makeToken(server, ['rgb_liveness:unlimited:never']);
    const pid = server.proc.pid!;
    const statuses: Record<string, number> = {};
    let oks = 0;
    let busyWithoutRetryAfter = 0;
    let errors = 0;
    const samples: { at: number; rss: number }[] = [];
    const started = Date.now();
    const end = started + opts.seconds * 1000;
    const sampler = setInterval(() => {
      const rss = rssOf(pid);
      if (rss !== null) samples.push({ at: Date.now() - started, rss });
    }, 250);
    const storeBefore = diskBytes(server.dataDir);
    const memory: MemorySample[] = [];
    const sampleMemory = () => {
      const m = memoryOf(pid, Date.now() - started);
      if (m === null) return;
      memory.push(m);
      log(memoryLine(m));
    };
    sampleMemory();
    const memorySampler = setInterval(sampleMemory, opts.memoryEveryMs ?? 10_000);
    let n = 0;
    const client = async (c: number) => {
      while (Date.now() < end) {
        const built = buildCapture(smallSingle(`over-${c}-${n++}`));
        const body = buildVerifyBody(built.metadata, built.files);
        try {
          const r = await fetch(`${server.baseUrl}/v1/modules/rgb_liveness/verify`, {
            method: 'POST',
            headers: { authorization: `Bearer ${token}`, 'content-type': body.contentType },
            body: body.body as unknown as BodyInit,
            signal: AbortSignal.timeout(60_000),
          });
          const text = await r.text();
          statuses[r.status] = (statuses[r.status] ?? 0) + 1;
          if (r.status === 200) oks++;
          else if (r.status === 503 && text.includes('"server_busy"')) {
            if (!r.headers.get('retry-after')) busyWithoutRetryAfter++;
          } else failures.add(`answered ${r.status}: ${text.slice(0, 200)}`);
        } catch (err) {
          errors++;
          failures.add(`client ${c}: ${(err as Error).message}`);
        }
      }
    };
    await Promise.all(Array.from({ length: clients }, (_, c) => client(c)));
    clearInterval(sampler);
    clearInterval(memorySampler);
    sampleMemory();
    const storeGrowth = diskBytes(server.dataDir) - storeBefore;
    const answered = Object.values(statuses).reduce((a, b) => a + b, 0);
    log(`store: +${fmtBytes(storeGrowth)} on disk for ${answered} calls answered (${oks} x 200): ${answered ? Math.round(storeGrowth / answered) : 'n/a'} bytes a call`);
    const seconds = (Date.now() - started) / 1000;
    log(`${clients} clients for ${seconds.toFixed(1)} s: ${JSON.stringify(statuses)}`);
    // two read-only CLI runs, started together
    const [used, ledger] = await Promise.all([unitsUsed(server, tokenId), ledgerOk(server)]);
    failures.check(used === oks, `units used ${used} != 200 answers ${oks}`);
    failures.check(ledger.ok, `ledger verify failed: ${ledger.detail}`);
    failures.check(busyWithoutRetryAfter === 0, `${busyWithoutRetryAfter} server_busy answers without Retry-After`);
    failures.check(oks > 0, 'no call was served at all');
    const third = opts.seconds * 1000 / 3;
    const mid = median(samples.filter((s) => s.at >= third && s.at < 2 * third).map((s) => s.rss));
    const last = median(samples.filter((s) => s.at >= 2 * third).map((s) => s.rss));
    const limit = opts.rssGrowthLimit ?? 64 * 1024 * 1024;
    failures.check(samples.length >= 6, `only ${samples.length} RSS samples`);
    failures.check(last - mid <= limit, `RSS grew ${fmtBytes(last - mid)} from the middle to the last third (limit ${fmtBytes(limit)})`);
    return {
      name: 'overload',
      figures: {
        workers,
        clients,
        admitted_concurrency: workers * 2,
        seconds: Math.round(seconds),
        answered_200: oks,
        per_s_200: Math.round(oks / seconds),
        statuses: JSON.stringify(statuses),
        client_errors: errors,
        units_used: used,
        ledger_ok: ledger.ok,
        rss_median_middle_third: fmtBytes(mid),
        rss_median_last_third: fmtBytes(last),
        rss_max: fmtBytes(Math.max(...samples.map((s) => s.rss))),
        // RssAnon is the figure to watch for a leak; RssFile follows data.mdb (docs/capacity.md)
        rss_anon_first: fmtBytes(memory[0]?.anon ?? null),
        rss_anon_last: fmtBytes(memory.at(-1)?.anon ?? null),
        rss_anon_max: fmtBytes(memory.length ? Math.max(...memory.map((m) => m.anon)) : null),
        rss_file_first: fmtBytes(memory[0]?.file ?? null),
        rss_file_last: fmtBytes(memory.at(-1)?.file ?? null),
        fds_first: memory[0]?.fds ?? null,
        fds_last: memory.at(-1)?.fds ?? null,
        fds_max: memory.length ? Math.max(...memory.map((m) => m.fds)) : null,
        store_growth_bytes: storeGrowth,
        store_bytes_per_call: answered ? Math.round(storeGrowth / answered) : null,
        store_bytes_per_200: oks ? Math.round(storeGrowth / oks) : null,
      },
      series: { memory },
      failures: failures.done(),
    };
  } finally {
    await server.stop();
  }
}
