import t from 'tap';
import { onLines, ROOT, SERVICE_ARGS, spawnChild, tempDir } from '../helpers/server.ts';

// A stop may come at any moment of a start (a deploy restarting a service that is still warming
// up, a supervisor's timeout): whatever the moment and the inference backend, the service must
// end cleanly, never abort (issue 39: SIGTERM while onnxruntime-node created its sessions ended
// in "terminate called after throwing an instance of 'Napi::Error'", exit 134). The moments are
// the service's own log lines: for k = 0, 1, 2, ... the k-th line of a start is answered with a
// signal, until a start is signalled after it listened and every module reported warm. No
// timing: each signal follows a line the service printed, so it lands in the step after it
// (loading the store, measuring the backends, creating the pool's sessions, warming them,
// serving).

interface SignalledStart {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** the lines printed before the signal was sent */
  before: any[];
  lines: any[];
  stderr: string;
}

const MODULES = ['rgb_liveness', 'color_liveness'];

function startAndSignal(backend: string, atLine: number, sig: NodeJS.Signals): Promise<SignalledStart> {
  const env = {
    ...process.env, HOST: '127.0.0.1', PORT: '0', DATA_DIR: tempDir(), WORKERS: '1', INFERENCE_THREADS: '1',
    // a few warm-up runs, so that warm-up spans more than one line's step
    WARMUP_RUNS: '3', INFERENCE_BACKEND: backend, LOG_LEVEL: 'info',
  };
  const p = spawnChild(process.execPath, [...SERVICE_ARGS], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: any[] = [];
  let before: any[] | null = null;
  let stderr = '';
  const send = () => {
    before = [...lines];
    p.kill(sig);
  };
  if (atLine === 0) send();
  p.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  onLines(p.stdout!, (line) => {
    try {
      lines.push(JSON.parse(line));
    } catch {
      return;
    }
    if (before === null && lines.length === atLine) send();
  });
  return new Promise((resolve) => p.on('close', (code, signal) => resolve({ code, signal, before: before ?? [...lines], lines, stderr })));
}

const warmAll = (lines: any[]) => MODULES.every((m) => lines.some((l) => l.msg === 'inference: worker warm' && l.module === m));

// about twenty starts, each to its end: minutes on a loaded 2-core host
t.setTimeout(900_000);
t.jobs = 2;
for (const backend of ['native', 'wasm', 'auto']) {
  t.test(`${backend}: a signal after any line of the start, warm-up included, ends the service cleanly`, async (t) => {
    const seen = new Set<string>();
    let afterListening = false;
    for (let k = 0; k < 40; k++) {
      // both signals the service takes, in turn
      const sig: NodeJS.Signals = k % 2 === 0 ? 'SIGTERM' : 'SIGINT';
      const r = await startAndSignal(backend, k, sig);
      const after: string = r.before.at(-1)?.msg ?? '(spawn)';
      const what = `${sig} after line ${k} (${after.slice(0, 40)})`;
      t.notMatch(r.stderr, /terminate called|Napi::Error|Aborted|core dumped/, `${what}: no abort`);
      t.not(r.signal, 'SIGABRT', `${what}: not aborted`);
      if (r.signal !== null) {
        // only before the service has loaded its code (nothing opened yet) does the signal's
        // default action end it
        t.equal(k, 0, `${what}: ended by ${r.signal}`);
        t.equal(r.signal, sig);
      } else {
        t.equal(r.code, 0, `${what}: exit 0\n${r.stderr}`);
        t.ok(r.lines.some((l) => l.msg === 'stopped' && l.code === 0), `${what}: the "stopped" line`);
        t.notOk(r.lines.some((l) => l.level >= 50), `${what}: no error logged: ${JSON.stringify(r.lines.filter((l) => l.level >= 50))}`);
      }
      seen.add(after);
      // the lines after 'listening' (warm-up, API worker) come in a different order from one
      // start to the next, so 'listening' is not always the last line before some signal
      afterListening ||= r.before.some((l) => l.msg === 'listening');
      // the last start was signalled once it listened and every module was warm (in either
      // order): every moment is covered
      if (warmAll(r.before) && r.before.some((l) => l.msg === 'listening')) break;
      // a start whose signal came after its last line would loop for ever
      t.ok(r.lines.length > k || k === 0, `${what}: the start printed past line ${k}`);
      if (!(r.lines.length > k || k === 0)) break;
    }
    t.ok(seen.has('inference: starting pool'), 'a stop while the pool created its sessions was tried');
    t.ok(afterListening, 'a stop after the start listened was tried');
    if (backend === 'auto') t.ok(seen.has('inference: measuring the backends'), 'a stop during the backend measurement was tried');
  });
}
