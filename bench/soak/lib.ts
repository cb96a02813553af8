// Shared by the reliability scenarios (bench/soak/*.ts) and their short versions in
// test/service/ (kill-loop, fuzz, overload, slow-client): each scenario returns its figures
// and a list of failures instead of asserting, so the same code prints a report
// (`npm run soak`) or fails a tap test.
// Everything runs against the real server (test/helpers/server.ts) on loopback, with the
// operator CLI as the judge of the stored state.

import fs from 'node:fs';
import { startServer as startTestServer, makeToken, type ServerHandle, type StartOptions } from '../harness/server.ts';

export { makeToken, type ServerHandle, type StartOptions };

// Every server a scenario starts is registered, so a scenario cut off by its time bound (or a
// runner that is interrupted) leaves no service process running behind it.
const live = new Set<ServerHandle>();

export async function startServer(opts: StartOptions = {}): Promise<ServerHandle> {
  const s = await startTestServer(opts);
  live.add(s);
  void s.exited.then(() => live.delete(s));
  return s;
}

/** SIGKILLs every server still running (they are throw-away: temporary DATA_DIRs). */
export function killAllServers(): void {
  for (const s of live) s.proc.kill('SIGKILL');
  live.clear();
}

export interface ScenarioResult {
  name: string;
  /** figures for the report (counts, rates, memory) */
  figures: Record<string, number | string | boolean | null>;
  /** every broken guarantee, in words; empty when the scenario passed */
  failures: string[];
  /** time series kept in the JSON report only (memory samples every 10 s) */
  series?: Record<string, unknown[]>;
}

/** A failure list capped in size, so a systematic fault does not flood the report. */
export class Failures {
  readonly list: string[] = [];
  private dropped = 0;
  add(msg: string): void {
    if (this.list.length < 50) this.list.push(msg);
    else this.dropped++;
  }
  check(cond: unknown, msg: string): void {
    if (!cond) this.add(msg);
  }
  done(): string[] {
    return this.dropped ? [...this.list, `... and ${this.dropped} more`] : this.list;
  }
}

/** Deterministic PRNG (mulberry32, the model builder's): a run is reproducible from its seed. */
export { prng } from '../../models/builder/prng.ts';

/** Resident set size of a process in bytes (Linux /proc), null when it is gone. Threads share
 * the process's memory, so for the service this covers the main thread, every API worker and
 * the inference pool. */
export function rssOf(pid: number): number | null {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : null;
  } catch {
    return null;
  }
}

export interface MemorySample {
  /** ms since the scenario started */
  at: number;
  /** bytes: resident in all, then split as /proc reports it */
  rss: number;
  /** anonymous pages: the JavaScript heaps, native allocations, buffers. This is what a leak grows */
  anon: number;
  /** file-backed pages resident: the code, and LMDB's memory-mapped data.mdb. The kernel drops
   * them under pressure, and they grow with the store, not with a leak */
  file: number;
  shmem: number;
  /** open file descriptors (sockets included) */
  fds: number;
}

/** RSS and its parts (VmRSS, RssAnon, RssFile, RssShmem of /proc/<pid>/status) and the open fd
 * count of a process, null when it is gone. Threads share them, so for the service this is the
 * whole process: main thread, API workers and inference pool. */
export function memoryOf(pid: number, at = 0): MemorySample | null {
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (name: string) => Number(new RegExp(`${name}:\\s+(\\d+) kB`).exec(status)?.[1] ?? 0) * 1024;
    return { at, rss: kb('VmRSS'), anon: kb('RssAnon'), file: kb('RssFile'), shmem: kb('RssShmem'), fds: fs.readdirSync(`/proc/${pid}/fd`).length };
  } catch {
    return null;
  }
}

/** Bytes a directory's files take on disk (allocated blocks, so a sparse or pre-grown file
 * counts what it holds, not its length): the LMDB store's DATA_DIR. */
export function diskBytes(dir: string): number {
  let total = 0;
  for (const e of fs.readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (!e.isFile()) continue;
    try {
      total += fs.statSync(`${e.parentPath}/${e.name}`).blocks * 512;
    } catch {
      // a file removed meanwhile (a temporary one) takes nothing
    }
  }
  return total;
}

/** `npm run cli -- ledger verify`: true when every counter equals charges minus refunds. */
export async function ledgerOk(server: Pick<ServerHandle, 'cli'>): Promise<{ ok: boolean; detail: string }> {
  const r = await server.cli(['ledger', 'verify']);
  return { ok: r.code === 0 && r.json?.ok === true, detail: r.stdout.slice(0, 500) + r.stderr.slice(0, 500) };
}

/** Units used by a token on a module, as `npm run cli -- usage <id>` reports them. */
export async function unitsUsed(server: Pick<ServerHandle, 'cli'>, tokenId: string, moduleId = 'rgb_liveness'): Promise<number> {
  const r = await server.cli(['usage', tokenId]);
  if (r.code !== 0) throw new Error(`usage failed: ${r.stderr}`);
  const u = r.json.tokens[0].usage.find((x: { module_id: string }) => x.module_id === moduleId);
  return u.used;
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export function fmtBytes(n: number | null): string {
  return n === null ? 'n/a' : `${(n / 1024 / 1024).toFixed(1)} MiB`;
}
