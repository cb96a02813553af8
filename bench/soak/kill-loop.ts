// kill -9 under idempotent load. Clients send verify calls, each with its own Idempotency-Key,
// and retry a call with the same key and the same bytes until it is answered 200, the way a
// device that lost its connection does. The server is killed with SIGKILL at a random moment
// of each cycle and restarted on the same DATA_DIR (its start-up runs crash recovery).
// Guarantees checked at the end:
// - every key that was answered 200 replays byte for byte (same body, `Idempotency-Replayed`);
// - `npm run cli -- ledger verify` passes;
// - units used (`npm run cli -- usage`) equal the keys completed (one capture per call):
//   a call cut by the kill is either completed once or refunded by recovery, never both.

import { buildVerifyBody, buildCapture } from '../../src/client/index.ts';
import { smallSingle } from '../harness/wire.ts';
import { tempDir } from '../harness/server.ts';
import { Failures, ledgerOk, makeToken, prng, sleep, startServer, unitsUsed, type ScenarioResult, type ServerHandle, type StartOptions } from './lib.ts';

export interface KillLoopOptions {
  cycles: number;
  clients: number;
  /** load time per cycle before the kill, picked uniformly in [min, max] ms */
  loadMsMin: number;
  loadMsMax: number;
  seed?: number;
  /** added to inference so that kills often land while reservations are pending */
  inferenceDelayMs?: number;
  log?: (line: string) => void;
  /** the start after the last kill, which finishes and replays every key: a started server
   * (the default), or the test's in-process API on the same DATA_DIR (test/service/kill-loop.test.ts,
   * issue 43: its start-up steps, crash recovery included, are a start's) */
  startFinal?: (opts: StartOptions) => Promise<FinalServer>;
}

/** What the final run asks of its server. */
export type FinalServer = Pick<ServerHandle, 'baseUrl' | 'cli' | 'logLines'> & { stop(): Promise<unknown> };

interface Key {
  key: string;
  body: { body: Uint8Array; contentType: string };
  /** the body text of the first 200, to compare with every replay */
  answer: string | null;
  attempts: number;
}

interface Outcome {
  status: number;
  text: string;
  replayed: boolean;
}

async function send(baseUrl: string, token: string, k: Key, signal: AbortSignal): Promise<Outcome | Error> {
  try {
    const r = await fetch(`${baseUrl}/v1/modules/rgb_liveness/verify`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': k.body.contentType, 'idempotency-key': k.key },
      body: k.body.body as unknown as BodyInit,
      signal,
    });
    const text = await r.text();
    return { status: r.status, text, replayed: r.headers.get('idempotency-replayed') === 'true' };
  } catch (err) {
    return err as Error;
  }
}

export async function runKillLoop(opts: KillLoopOptions): Promise<ScenarioResult> {
  const log = opts.log ?? (() => {});
  const rand = prng(opts.seed ?? 1);
  const failures = new Failures();
  const dataDir = tempDir('lv-soak-kill-');
  const env = { TEST_INFERENCE_DELAY_MS: String(opts.inferenceDelayMs ?? 100), WORKERS: '2' };
  const keys: Key[] = [];
  let nextKey = 0;
  const newKey = (): Key => {
    const id = nextKey++;
    const built = buildCapture(smallSingle(`kill-${id}`));
    const k: Key = { key: `soak-kill-${id}`, body: buildVerifyBody(built.metadata, built.files), answer: null, attempts: 0 };
    keys.push(k);
    return k;
  };
  let requests = 0;
  let connectionErrors = 0;
  let recovered = 0;
  const statuses: Record<string, number> = {};
  let token = '';
  let tokenId = '';

  /** called on every 200 (the cycle below waits for its first) */
  let onAnswer = () => {};

  /** One client: works through its own keys, keeping an unfinished key for the next cycle. */
  const client = async (server: ServerHandle, stop: AbortSignal, carry: Key | undefined): Promise<Key | undefined> => {
    let k = carry;
    while (!stop.aborted) {
      k ??= newKey();
      k.attempts++;
      requests++;
      const r = await send(server.baseUrl, token, k, stop);
      if (r instanceof Error) {
        connectionErrors++;
        return k; // the server is gone (or going): retry this key after the restart
      }
      statuses[r.status] = (statuses[r.status] ?? 0) + 1;
      if (r.status === 200) {
        onAnswer();
        if (k.answer === null) k.answer = r.text;
        else failures.check(r.text === k.answer, `key ${k.key}: a second 200 differs from the first`);
        k = undefined;
      } else if (r.status === 409 || r.status === 503 || r.status === 500) {
        // pending elsewhere, busy, or an inference cut short: same key, same bytes, later
        await sleep(50);
      } else {
        failures.add(`key ${k.key}: unexpected ${r.status} ${r.text.slice(0, 200)}`);
        k = undefined;
      }
    }
    return k;
  };

  let carried: (Key | undefined)[] = Array.from({ length: opts.clients }, () => undefined);
  const started = (server: FinalServer) => {
    recovered += server.logLines().filter((l) => typeof l.msg === 'string' && l.msg.startsWith('crash recovery: pending reservation refunded')).length;
  };
  // each cycle: a start (recovering what the last kill left), load, SIGKILL at a random moment
  for (let cycle = 0; cycle < opts.cycles; cycle++) {
    const server = await startServer({ dataDir, env, ready: true });
    started(server);
    if (!token) ({ token, id: tokenId } = await makeToken(server, ['rgb_liveness:unlimited:never']));
    const stop = new AbortController();
    // the load is under way (a first answer in this cycle) before the random moment of the
    // kill is counted: on a loaded host the start-up of the clients' first calls can take
    // longer than the whole load window, and a kill before any answer tests less. Bounded.
    const answering = new Promise<void>((resolve) => (onAnswer = resolve));
    const running = carried.map((c) => client(server, stop.signal, c));
    let bound: NodeJS.Timeout | undefined;
    await Promise.race([answering, new Promise<void>((r) => (bound = setTimeout(r, 120_000)))]);
    clearTimeout(bound);
    await sleep(opts.loadMsMin + rand() * (opts.loadMsMax - opts.loadMsMin));
    await server.stop('SIGKILL');
    stop.abort();
    carried = await Promise.all(running);
    log(`cycle ${cycle + 1}/${opts.cycles}: ${keys.filter((k) => k.answer !== null).length} keys completed, ${requests} requests`);
  }
  // Final run: a start after the last kill; finish every unfinished key, then replay every
  // completed one.
  const server = await (opts.startFinal ?? startServer)({ dataDir, env, ready: true });
  started(server);
  if (!token) ({ token, id: tokenId } = await makeToken(server, ['rgb_liveness:unlimited:never']));
  for (const k of keys.filter((x) => x.answer === null)) {
    for (let tries = 0; k.answer === null && tries < 50; tries++) {
      const r = await send(server.baseUrl, token, k, AbortSignal.timeout(60_000));
      requests++;
      if (r instanceof Error) failures.add(`key ${k.key}: ${r.message} after the last restart`);
      else if (r.status === 200) k.answer = r.text;
      else if (r.status === 409 || r.status === 503 || r.status === 500) await sleep(100);
      else {
        failures.add(`key ${k.key}: unexpected ${r.status} after the last restart`);
        break;
      }
    }
    failures.check(k.answer !== null, `key ${k.key} never completed`);
  }
  let replays = 0;
  for (const k of keys.filter((x) => x.answer !== null)) {
    const r = await send(server.baseUrl, token, k, AbortSignal.timeout(60_000));
    replays++;
    if (r instanceof Error) failures.add(`replay of ${k.key}: ${r.message}`);
    else {
      failures.check(r.status === 200 && r.replayed, `replay of ${k.key}: ${r.status}, replayed=${r.replayed}`);
      failures.check(r.text === k.answer, `replay of ${k.key} is not byte-identical`);
    }
  }
  const completed = keys.filter((k) => k.answer !== null).length;
  const used = await unitsUsed(server, tokenId);
  const ledger = await ledgerOk(server);
  failures.check(ledger.ok, `ledger verify failed: ${ledger.detail}`);
  failures.check(used === completed, `units used ${used} != keys completed ${completed}`);
  await server.stop();
  return {
    name: 'kill-loop',
    figures: {
      cycles: opts.cycles,
      clients: opts.clients,
      keys_completed: completed,
      requests,
      connection_errors: connectionErrors,
      pending_refunded_by_recovery: recovered,
      replays_checked: replays,
      units_used: used,
      ledger_ok: ledger.ok,
      statuses: JSON.stringify(statuses),
    },
    failures: failures.done(),
  };
}
