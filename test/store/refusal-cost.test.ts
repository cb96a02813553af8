import t from 'tap';
import { login, client } from '../auth/session-client.ts';
import { RawConn, body, post, smallSingle, verifyHead } from '../helpers/ingest.ts';
import { slotsUntil } from '../helpers/metrics.ts';
import { startPostgres } from '../helpers/postgres.ts';
import { startApi } from '../helpers/api.ts';
import { makeToken, tempDir } from '../helpers/server.ts';
import { waitFor } from '../helpers/wait.ts';

// What a refused call costs the store (issue 44, section 3; src/store/refusal-tally.ts),
// through the service's HTTP API on each store: bursts of calls refused before a capacity slot
// (401 invalid_token, 403 module_forbidden, 503 server_busy with both slots held) leave one
// audit row per key, API worker and minute, written at once for the first call and again with
// its count when the minute ends or the store closes; a call that got a slot keeps its own
// row. The bound checked: rows of each burst <= WORKERS x the UTC minutes the burst spanned
// (1 worker here), whatever N; the counts add up to N in the admin API, the CLI and the
// console's overview.

t.setTimeout(900_000);

// 100 calls a burst (was 300; issue 43: the bursts' 1,800 in-process calls were most of the
// file's CPU): what is proven does not grow with N. A row per call would be 100 rows where the
// bound allows 1 or 2 (one UTC minute, or two if the burst crosses one), and about 39 KB of
// rows for the three bursts where the byte bound allows 9 KB, so every check below still tells
// the tally from a row per call; the counts are still N per burst, and the burst still reaches
// the tally from 8 callers at once.
const N = 100;
const ADMIN = { username: 'tally-admin', password: 'tally-admin-password-1' };
const MINUTE = 60_000;

/** Sends `count` calls, `parallel` at a time; answers their statuses. */
async function burst(count: number, parallel: number, send: () => Promise<{ status: number }>): Promise<number[]> {
  const statuses: number[] = [];
  let left = count;
  await Promise.all(Array.from({ length: parallel }, async () => {
    while (left > 0) {
      left--;
      statuses.push((await send()).status);
    }
  }));
  return statuses;
}

const minutesSpanned = (from: number, to: number) => Math.floor(to / MINUTE) - Math.floor(from / MINUTE) + 1;

for (const kind of ['lmdb', 'postgres'] as const) {
  t.test(`${kind}: a burst of refused calls grows the audit by a bounded number of rows; the views count every call`, async (t) => {
    const env: Record<string, string> = { WORKERS: '1', ADMIN_USERNAME: ADMIN.username, ADMIN_PASSWORD: ADMIN.password, UPLOAD_RATE_WINDOW_SECONDS: '600', UPLOAD_MIN_BYTES_PER_SECOND: '1' };
    if (kind === 'postgres') {
      const pg = await startPostgres();
      t.teardown(() => pg.stop());
      env.DATABASE_URL = await pg.database('refusals');
    }
    const dataDir = tempDir();
    // the service's API in process (test/helpers/api.ts: the real app of an API worker over real
    // HTTP, the real store, the real engine for the one charged call): the tally is kept per API
    // worker and written by its store, nothing of the process or of several workers is the
    // subject here (issue 43: this was a server start on each store)
    const server = await startApi({ dataDir, env, engine: 'real', ready: true });
    let stopped = false;
    t.teardown(() => (stopped ? undefined : server.stop()));
    const tok = await makeToken(server, ['rgb_liveness:1000:day']);
    const b = body([smallSingle()]);

    const ok = await post(server.baseUrl, tok.token, body([smallSingle()]));
    t.equal(ok.status, 200, 'a charged call');

    const spans: Record<string, [number, number]> = {};
    const timed = async (name: string, run: () => Promise<number[]>) => {
      const from = Date.now();
      const statuses = await run();
      spans[name] = [from, Date.now()];
      return statuses;
    };
    const unknown = `lvk_${'x'.repeat(43)}`;
    const s401 = await timed('401', () => burst(N, 8, () => post(server.baseUrl, unknown, b)));
    t.ok(s401.every((s) => s === 401), `${N} x 401 invalid_token`);
    const s403 = await timed('403', () => burst(N, 8, () => post(server.baseUrl, tok.token, b, { module: 'color_liveness' })));
    t.ok(s403.every((s) => s === 403), `${N} x 403 module_forbidden`);
    // both slots of the host held by uploads that stall: every other call is refused at admit
    const held: RawConn[] = [];
    for (let i = 0; i < 2; i++) {
      const conn = new RawConn(server.port);
      await conn.connected;
      await conn.write(verifyHead({ token: tok.token, contentType: b.contentType, contentLength: b.body.length }));
      await conn.write(b.body.subarray(0, 10));
      held.push(conn);
    }
    await slotsUntil(server.baseUrl, 2, 'both slots held');
    const s503 = await timed('503', () => burst(N, 8, () => post(server.baseUrl, tok.token, b)));
    t.ok(s503.every((s) => s === 503), `${N} x 503 server_busy`);
    for (const c of held) c.close();
    await slotsUntil(server.baseUrl, 0, 'the slots back');

    let admin = client(server.baseUrl, await login(server.baseUrl, ADMIN.username, ADMIN.password));
    const rowsOf = async (status: number) => {
      const items: any[] = [];
      let cursor: string | null = null;
      do {
        const page: any = (await admin('GET', `/admin/api/audit?status=${status}&limit=1000${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`)).json;
        items.push(...page.items);
        cursor = page.next_cursor;
      } while (cursor);
      return items;
    };
    // the first refusal of each burst is written at once, as a call's own row
    for (const status of [401, 403, 503]) {
      const rows = await waitFor(async () => {
        const r = await rowsOf(status);
        return r.length > 0 ? r : null;
      }, { what: `the first ${status} row` });
      t.ok(rows.length <= minutesSpanned(...spans[status]!), `${status}: ${rows.length} row(s) while the burst's minute is open, not ${N}`);
    }

    // a clean stop writes the counts; the next start reads them back. The views are read from
    // the service's API in process on the same store (test/helpers/api.ts: the real app over
    // real HTTP, its store opened as a start opens it; issue 43: this was a second server start)
    await server.stop();
    stopped = true;
    const reader = await startApi({ dataDir, env });
    t.teardown(() => reader.stop());
    admin = client(reader.baseUrl, await login(reader.baseUrl, ADMIN.username, ADMIN.password));
    let refusalBytes = 0;
    let refusalRows = 0;
    for (const [status, code, tokenId] of [[401, 'invalid_token', null], [403, 'module_forbidden', tok.id], [503, 'server_busy', tok.id]] as const) {
      const rows = await rowsOf(status);
      const bound = minutesSpanned(...spans[status]!);
      t.ok(rows.length >= 1 && rows.length <= bound, `${status}: ${rows.length} row(s) for ${N} calls (bound: 1 API worker x ${bound} minute(s))`);
      t.equal(rows.reduce((n, r) => n + (r.calls ?? 1), 0), N, `${status}: the rows count all ${N} calls`);
      t.ok(rows.every((r) => r.error_code === code && r.token_id === tokenId && r.client_ip === '127.0.0.1' && r.charged_units === 0), `${status}: ${code}, the caller's token and address, nothing charged`);
      t.ok(rows.filter((r) => r.calls !== undefined).every((r) => r.calls > 1 && r.last_at >= r.at), `${status}: a counting row says how many calls and until when`);
      refusalRows += rows.length;
      refusalBytes += rows.reduce((n, r) => n + Buffer.byteLength(JSON.stringify(r)), 0);
    }
    t.comment(`${3 * N} refused calls: ${refusalRows} audit rows, ${refusalBytes} bytes of row JSON (${(refusalBytes / (3 * N)).toFixed(1)} B a call; a row of its own each would be about ${Math.round(refusalBytes / refusalRows)} B a call)`);
    t.ok(refusalBytes < 3 * 3 * 1024, 'the refusals take a few KB of rows, not one row a call');

    const charged = await rowsOf(200);
    t.equal(charged.length, 1, 'the charged call keeps its own row');
    t.equal(charged[0].request_id, ok.requestId);
    t.equal(charged[0].calls, undefined, 'a call\'s own row has no count');

    // the console's overview counts calls, not rows
    const o = (await admin('GET', '/admin/api/overview')).json;
    const sum = (k: string) => o.last_hour.reduce((n: number, bucket: any) => n + bucket[k], 0);
    // besides the bursts: the charged call and the two held uploads, closed unfinished (499,
    // each a row of its own: they held a slot)
    t.same([sum('calls'), sum('ok'), sum('client_error'), sum('server_error')], [3 * N + 3, 1, 2 * N + 2, N], 'the overview\'s last hour: every call counted once');

    // the CLI reads the same rows
    const cli = await reader.cli(['audit', 'list', '--limit', '1000']);
    t.equal(cli.code, 0, cli.stderr);
    t.equal(cli.json.items.reduce((n: number, r: any) => n + (r.calls ?? 1), 0), 3 * N + 3, 'audit list: every call counted once');
    t.equal(cli.json.items.filter((r: any) => r.status === 499).length, 2, 'the two uploads closed unfinished: a row each');
  });
}
