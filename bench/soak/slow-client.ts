// Slow clients. Three kinds of uploads run against one server:
// - tricklers: `tricklers` connections from another loopback address (127.0.0.2) and their own
//   token, each declaring a whole verify body and sending it at `trickleBytesPerSec`
//   (far below any minimum rate). Each must get an answer or a close within
//   `slowAnswerWithinMs`: never a connection held for ever.
// - honest clients: from 127.0.0.1 with another token, full-speed verify calls made while
//   the tricklers hold their connections, each retried on 503 per Retry-After. Each must get
//   its 200 within `honestWithinMs`, and at most `honestBusyAllowed` 503s are tolerated in all.
// - a paced client: uploads a 20-frame sequence at `pacedBytesPerSec` (at or above the
//   service's minimum rate), taking longer than uWS's built-in ~10 s window. It must get 200.
//
// The expectations are parameters because the upload deadlines are being changed (issue 15):
// SLOW_CLIENT_PROFILES.target is what the issue asks for (a minimum rate of at most 8 KB/s is
// honoured; trickling connections from one address cannot deny capacity to the others);
// SLOW_CLIENT_PROFILES.uws_builtin is what uWS 20.30 alone does (idle close at ~10-12 s without
// an answer, below ~16 KB/s uploads are cut, slots held by tricklers until then).

import net from 'node:net';
import { buildCapture, buildVerifyBody } from '../../src/client/index.ts';
import { flatPixels, okFrame, pngOfSize, smallSingle, verifyHead } from '../harness/wire.ts';
import { Failures, makeToken, sleep, startServer, type ScenarioResult } from './lib.ts';

export interface SlowClientExpectations {
  /** every trickler is answered or closed by then */
  slowAnswerWithinMs: number;
  /** every honest call is answered 200 by then (retrying 503s) */
  honestWithinMs: number;
  /** 503s tolerated over all honest calls while the tricklers hold their connections */
  honestBusyAllowed: number;
  /** the paced client's rate, assumed at or above the service's minimum upload rate; null
   * skips the paced client (a profile in which no rate below uWS's ~16 KB/s is honoured) */
  pacedBytesPerSec: number | null;
}

export const SLOW_CLIENT_PROFILES: Record<'target' | 'uws_builtin', SlowClientExpectations> = {
  // Assumed from issue 15: default minimum rate <= 8 KB/s (10 KB/s is above it); a stalled or
  // slower upload is answered (408 or similar) or closed within the idle limit (~10 s) plus a
  // margin; per-address caps keep one address's tricklers from taking every slot, so honest
  // calls from another address are never refused.
  target: { slowAnswerWithinMs: 30_000, honestWithinMs: 20_000, honestBusyAllowed: 0, pacedBytesPerSec: 10 * 1024 },
  uws_builtin: { slowAnswerWithinMs: 30_000, honestWithinMs: 30_000, honestBusyAllowed: Number.POSITIVE_INFINITY, pacedBytesPerSec: null },
};

export interface SlowClientOptions {
  tricklers: number;
  honestCalls: number;
  trickleBytesPerSec?: number;
  /** size of each of the paced client's 20 PNG frames (the upload lasts 20 x this / rate) */
  pacedFrameBytes?: number;
  workers?: number;
  expect: SlowClientExpectations;
  /** extra server environment (e.g. the minimum-rate and cap settings once they exist) */
  env?: Record<string, string>;
  log?: (line: string) => void;
}

interface Conn {
  socket: net.Socket;
  got: Buffer;
  endedAt: number | null;
  status: number | null;
}

function open(port: number, localAddress: string): Promise<Conn> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: '127.0.0.1', port, localAddress });
    const c: Conn = { socket, got: Buffer.alloc(0), endedAt: null, status: null };
    socket.on('data', (d: Buffer) => {
      c.got = Buffer.concat([c.got, d]);
      const m = /^HTTP\/1\.1 (\d{3})/.exec(c.got.toString('latin1', 0, 20));
      if (m && c.status === null) {
        c.status = Number(m[1]);
        c.endedAt ??= Date.now();
      }
    });
    const gone = () => (c.endedAt ??= Date.now());
    socket.on('close', gone);
    socket.on('error', gone);
    socket.once('connect', () => resolve(c));
    socket.once('error', reject);
  });
}

/** Writes `body` at `bytesPerSec`, in pieces of a quarter second, until done, answered or closed. */
async function pace(c: Conn, body: Buffer, bytesPerSec: number): Promise<void> {
  const piece = Math.max(1, Math.floor(bytesPerSec / 4));
  const started = Date.now();
  for (let at = 0; at < body.length && c.endedAt === null; at += piece) {
    c.socket.write(body.subarray(at, Math.min(body.length, at + piece)));
    // schedule against the start, so timer lateness does not lower the rate
    const due = started + ((at + piece) / bytesPerSec) * 1000;
    await sleep(Math.max(0, due - Date.now()));
  }
}

export async function runSlowClient(opts: SlowClientOptions): Promise<ScenarioResult> {
  const log = opts.log ?? (() => {});
  const failures = new Failures();
  const ex = opts.expect;
  // A small host (2 x WORKERS slots) whose operator, exposed to trickling clients, caps one
  // address at half the slots: the default cap never goes below 4, so at WORKERS=2 one address
  // could otherwise hold all 4 (docs/capacity.md).
  const workers = opts.workers ?? 2;
  const server = await startServer({ ready: true, env: { WORKERS: String(workers), UPLOADS_PER_ADDRESS: String(workers), ...opts.env } });
  const conns: Conn[] = [];
  try {
    const attacker = await makeToken(server, ['rgb_liveness:unlimited:never']);
    const honest = await makeToken(server, ['rgb_liveness:unlimited:never']);
    const built = buildCapture(smallSingle('trickle'));
    const trickleBody = Buffer.from(buildVerifyBody(built.metadata, built.files).body);
    const ct = buildVerifyBody(built.metadata, built.files).contentType;

    // tricklers
    const started = Date.now();
    const rate = opts.trickleBytesPerSec ?? 1;
    const trickling: Promise<void>[] = [];
    for (let i = 0; i < opts.tricklers; i++) {
      const c = await open(server.port, '127.0.0.2');
      conns.push(c);
      c.socket.write(verifyHead({ token: attacker.token, contentType: ct, contentLength: trickleBody.length }));
      trickling.push(pace(c, trickleBody, rate));
    }
    log(`${opts.tricklers} tricklers connected from 127.0.0.2 at ${rate} B/s`);

    // honest full-speed calls while the tricklers hold their connections
    let busy = 0;
    let honestOk = 0;
    const honestMs: number[] = [];
    for (let i = 0; i < opts.honestCalls; i++) {
      const b = buildCapture(smallSingle(`honest-${i}`));
      const body = buildVerifyBody(b.metadata, b.files);
      const t0 = Date.now();
      let status = 0;
      while (Date.now() - t0 < ex.honestWithinMs) {
        const r = await fetch(`${server.baseUrl}/v1/modules/rgb_liveness/verify`, {
          method: 'POST',
          headers: { authorization: `Bearer ${honest.token}`, 'content-type': body.contentType },
          body: body.body as unknown as BodyInit,
          signal: AbortSignal.timeout(ex.honestWithinMs),
        }).catch((err: Error) => err);
        if (r instanceof Error) {
          failures.add(`honest call ${i}: ${r.message}`);
          break;
        }
        status = r.status;
        await r.arrayBuffer();
        if (status !== 503) break;
        busy++;
        await sleep(Number(r.headers.get('retry-after') ?? 1) * 1000);
      }
      honestMs.push(Date.now() - t0);
      if (status === 200) honestOk++;
      else failures.add(`honest call ${i}: ${status === 503 ? 'still 503' : status} after ${Date.now() - t0} ms`);
    }
    failures.check(busy <= ex.honestBusyAllowed, `honest calls got ${busy} 503s while tricklers held connections (allowed ${ex.honestBusyAllowed})`);

    // a paced client above the minimum rate, whose upload outlasts uWS's built-in window
    let paced: { status: number | null; ms: number; bytes: number } | null = null;
    if (ex.pacedBytesPerSec !== null) {
      const png = pngOfSize(flatPixels(), opts.pacedFrameBytes ?? 8 * 1024);
      const seq = buildCapture({ capture_id: 'paced', mode: 'rgb_sequence', frames: Array.from({ length: 20 }, (_, i) => okFrame(i, png)) });
      const b = buildVerifyBody(seq.metadata, seq.files);
      const c = await open(server.port, '127.0.0.1');
      conns.push(c);
      const t0 = Date.now();
      c.socket.write(verifyHead({ token: honest.token, contentType: b.contentType, contentLength: b.body.length }));
      await pace(c, Buffer.from(b.body), ex.pacedBytesPerSec);
      const budget = (b.body.length / ex.pacedBytesPerSec) * 1000 + 30_000;
      while (c.endedAt === null && Date.now() - t0 < budget) await sleep(50);
      paced = { status: c.status, ms: Date.now() - t0, bytes: b.body.length };
      failures.check(c.status === 200, `paced upload of ${b.body.length} bytes at ${ex.pacedBytesPerSec} B/s: ${c.status === null ? 'no answer (closed or reset)' : c.status} after ${paced.ms} ms`);
    }

    // every trickler answered or closed within the bound
    const deadline = started + ex.slowAnswerWithinMs;
    while (conns.some((c) => c.endedAt === null) && Date.now() < deadline) await sleep(100);
    const tricklers = conns.slice(0, opts.tricklers);
    const open_ = tricklers.filter((c) => c.endedAt === null).length;
    failures.check(open_ === 0, `${open_} of ${opts.tricklers} trickling connections neither answered nor closed after ${ex.slowAnswerWithinMs} ms`);
    const answered: Record<string, number> = {};
    for (const c of tricklers) answered[c.status === null ? 'closed' : String(c.status)] = (answered[c.status === null ? 'closed' : String(c.status)] ?? 0) + 1;
    const ends = tricklers.filter((c) => c.endedAt !== null).map((c) => c.endedAt! - started);
    const late = ends.filter((ms) => ms > ex.slowAnswerWithinMs).length;
    failures.check(late === 0, `${late} trickling connections ended only after ${ex.slowAnswerWithinMs} ms`);
    for (const c of tricklers) if (c.status !== null) failures.check(c.status < 500 || c.status === 503, `a trickler was answered ${c.status}`);
    for (const c of conns) c.socket.destroy();
    await Promise.all(trickling);
    return {
      name: 'slow-client',
      figures: {
        tricklers: opts.tricklers,
        trickle_bytes_per_s: rate,
        trickler_outcomes: JSON.stringify(answered),
        trickler_ended_ms_max: ends.length ? Math.max(...ends) : null,
        honest_calls: opts.honestCalls,
        honest_ok: honestOk,
        honest_503s: busy,
        honest_ms_max: Math.max(...honestMs),
        paced: paced ? JSON.stringify(paced) : 'skipped',
      },
      failures: failures.done(),
    };
  } finally {
    for (const c of conns) c.socket.destroy();
    await server.stop();
  }
}
