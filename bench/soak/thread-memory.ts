// Where a running service's memory is, thread by thread (the probe behind the soak's findings,
// bench/results/soak-30min.md): opens the inspector of the process (SIGUSR1, so only on a
// server you run yourself: it stays open until the process ends) and every INTERVAL ms reads
// process.memoryUsage() in the main thread and in every worker thread (API workers, inference
// threads) through the NodeWorker domain, beside RssAnon of /proc/<pid>/status.
//
//   node [--experimental-websocket] --import tsx bench/soak/thread-memory.ts <pid> <seconds> \
//        <intervalMs> <out.json> [--port=9229] [--gc]
//
// --gc forces a full collection in every thread before each sample (what is kept, not what
// waits for a collection). The JSON holds one entry per sample: at (ms), anon, rss and, per
// thread, heapTotal, heapUsed, external and arrayBuffers (bytes). Node 22 has WebSocket
// built in; Node 20 needs --experimental-websocket.
import fs from 'node:fs';

const args = process.argv.slice(2).filter((a) => !a.startsWith('--'));
const [pid, seconds, interval, out] = args;
const port = Number(process.argv.find((a) => a.startsWith('--port='))?.slice(7) ?? 9229);
const forceGc = process.argv.includes('--gc');
if (!pid || !seconds || !interval || !out) {
  process.stderr.write('usage: thread-memory.ts <pid> <seconds> <intervalMs> <out.json> [--port=N] [--gc]\n');
  process.exit(2);
}
const WS = (globalThis as { WebSocket?: new (url: string) => WebSocketLike }).WebSocket;
if (!WS) {
  process.stderr.write('no WebSocket in this Node: run it with --experimental-websocket (Node 20)\n');
  process.exit(2);
}
interface WebSocketLike {
  onopen: (() => void) | null;
  onmessage: ((ev: { data: string }) => void) | null;
  send(data: string): void;
  close(): void;
}
type Usage = ReturnType<typeof process.memoryUsage>;
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const status = () => {
  const s = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (n: string) => Number(new RegExp(`${n}:\\s+(\\d+) kB`).exec(s)?.[1] ?? 0) * 1024;
  return { anon: kb('RssAnon'), rss: kb('VmRSS') };
};

process.kill(Number(pid), 'SIGUSR1');
let targets: { webSocketDebuggerUrl: string }[] = [];
for (let i = 0; i < 50 && targets.length === 0; i++) {
  try {
    targets = (await (await fetch(`http://127.0.0.1:${port}/json/list`)).json()) as typeof targets;
  } catch {
    await sleep(200); // the inspector opens asynchronously after the signal
  }
}
if (targets.length === 0) throw new Error(`no inspector on port ${port}`);
const ws = new WS(targets[0]!.webSocketDebuggerUrl);
await new Promise<void>((r) => (ws.onopen = r));

let id = 0;
const replies = new Map<string, (r: unknown) => void>();
const workers = new Map<string, string>(); // session -> "type:url:id"
ws.onmessage = (ev) => {
  const m = JSON.parse(ev.data);
  if (m.id !== undefined) {
    replies.get(`main:${m.id}`)?.(m.result ?? m.error);
    replies.delete(`main:${m.id}`);
  } else if (m.method === 'NodeWorker.attachedToWorker') {
    const w = m.params.workerInfo;
    workers.set(m.params.sessionId, `${w.type}:${String(w.url).split('/').slice(-2).join('/')}:${w.workerId}`);
  } else if (m.method === 'NodeWorker.receivedMessageFromWorker') {
    const inner = JSON.parse(m.params.message);
    const key = `${m.params.sessionId}:${inner.id}`;
    replies.get(key)?.(inner.result ?? inner.error);
    replies.delete(key);
  }
};
/** One inspector call, in the main thread or (with a session) in that worker; null after 10 s. */
const call = (method: string, params: object = {}, session?: string) => new Promise<any>((resolve) => {
  const n = ++id;
  replies.set(`${session ?? 'main'}:${n}`, resolve);
  if (session) ws.send(JSON.stringify({ id: ++id, method: 'NodeWorker.sendMessageToWorker', params: { sessionId: session, message: JSON.stringify({ id: n, method, params }) } }));
  else ws.send(JSON.stringify({ id: n, method, params }));
  setTimeout(() => resolve(null), 10_000);
});
await call('NodeWorker.enable', { waitForDebuggerOnStart: false });
await sleep(500); // the attachedToWorker events of the threads already running

const usage = { expression: 'JSON.stringify(process.memoryUsage())', returnByValue: true };
const series: { at: number; anon: number; rss: number; threads: Record<string, Usage> }[] = [];
const t0 = Date.now();
while (Date.now() - t0 < Number(seconds) * 1000) {
  if (forceGc) await Promise.all([call('HeapProfiler.collectGarbage'), ...[...workers.keys()].map((s) => call('HeapProfiler.collectGarbage', {}, s))]);
  const started = Date.now();
  const threads: Record<string, Usage> = {};
  await Promise.all([['main', undefined] as const, ...[...workers].map(([s, name]) => [name, s] as const)].map(async ([name, session]) => {
    const r = await call('Runtime.evaluate', usage, session);
    if (r?.result?.value) threads[name] = JSON.parse(r.result.value);
  }));
  series.push({ at: Date.now() - t0, ...status(), threads });
  await sleep(Math.max(0, Number(interval) - (Date.now() - started)));
}
fs.writeFileSync(out, `${JSON.stringify({ pid: Number(pid), forceGc, threads: ['main', ...workers.values()], series })}\n`);
ws.close();
process.stderr.write(`${series.length} samples of ${workers.size + 1} threads -> ${out}\n`);
process.exit(0);
