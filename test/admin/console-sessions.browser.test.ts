import fs from 'node:fs';
import t from 'tap';
import { postVerify, request, single } from '../helpers/captures.ts';
import { startApi } from '../helpers/api.ts';
import { bearer } from '../helpers/server.ts';
import { chromiumMissing, consoleLogin, launchChromium, watchedPage } from '../helpers/browser.ts';
import { client, login } from '../auth/session-client.ts';
import { waitFor } from '../helpers/wait.ts';
import { missingTool } from '../helpers/required.ts';

// Issue 39, what an operator reads every day, in headless Chromium at 1280 px on a real server:
// device-session calls in the audit table, its detail and its CSV; one session revoked from the
// audit detail, one from the token page (which lists only the sessions still usable: the
// check test/sessions/console.browser.test.ts made in a file of its own), one from the CLI; the table inside its panel and the
// day labels of the charts apart; and a module the serving set lacks shown without a model.
// The server serves bgr80_ensemble_v1, which describes rgb_liveness only (as an imported set
// does), with color_liveness left enabled.
const missing = chromiumMissing('console sessions browser test');
if (missing) {
  missingTool(t, missing);
} else {
  // the service's app (and engine) in process on its real store: test/helpers/api.ts (was one server start)
  const server = await startApi({ engine: 'real', env: { ADMIN_USERNAME: 'root', ADMIN_PASSWORD: 'correct horse battery', MODEL_SET: 'bgr80_ensemble_v1' } });
  const browser = await launchChromium();
  t.teardown(async () => {
    await browser.close();
    await server.stop();
  });
  const base = server.baseUrl;
  // set-up checks throw (a tap assertion out here would land after the root test's end)
  const expect = (ok: boolean, what: string) => {
    if (!ok) throw new Error(`set-up failed: ${what}`);
  };
  await waitFor(async () => (await (await fetch(`${base}/health/ready`)).json()).modules?.rgb_liveness?.ready === true, { timeoutMs: 180_000, what: 'rgb_liveness ready' });
  const admin = client(base, await login(base, 'root', 'correct horse battery'));
  const made = await admin('POST', '/admin/api/tokens', { name: 'fleet backend', grants: [{ module_id: 'rgb_liveness', limit: 100, period: 'day' }] });
  expect(made.status === 201, made.text);
  const token: string = made.json.token;
  const mint = async () => {
    const r = await fetch(`${base}/v1/sessions`, { method: 'POST', headers: { ...bearer(token), 'content-type': 'application/json' }, body: JSON.stringify({ module_id: 'rgb_liveness', max_captures: 3 }) });
    expect(r.status === 201, `mint ${r.status}`);
    return (await r.json()) as { session_id: string; session_token: string };
  };
  const [one, two, three] = [await mint(), await mint(), await mint()];
  const bySession = await postVerify(base, one.session_token, 'rgb_liveness', request([single({ id: 'from-device' })]), { 'idempotency-key': 'device-key-1' });
  expect(bySession.status === 200, bySession.text);
  const byToken = await postVerify(base, token, 'rgb_liveness', request([single({ id: 'from-backend', seed: 7 })]), { 'idempotency-key': 'backend-key-1' });
  expect(byToken.status === 200, byToken.text);
  // a refused call too: its status cell carries the error code, the widest a row gets
  const refused = await postVerify(base, token, 'color_liveness', request([single({ id: 'not-granted' })]));
  expect(refused.status === 403, refused.text);
  const sessionRequest: string = bySession.json.request_id;
  const tokenRequest: string = byToken.json.request_id;
  // the audit write is not awaited by the verify call
  await waitFor(async () => (await admin('GET', '/admin/api/audit')).json.items.length === 3, { what: 'the three calls audited' });

  const { page, problems } = await watchedPage(browser);
  await page.setViewportSize({ width: 1280, height: 900 });
  const asked: string[] = [];
  page.on('dialog', (d) => {
    asked.push(d.message());
    void d.accept();
  });
  fs.mkdirSync('.tap/screenshots', { recursive: true });
  await consoleLogin(page, base, 'root', 'correct horse battery');

  t.test('the audit table at 1280 px: the session column, the request id inside the panel', async (t) => {
    await page.click('#tabs button[data-tab=audit]');
    await page.waitForSelector('#panel tr[data-request-id]');
    const rows = await page.$$eval('#panel tr[data-request-id]', (trs) => trs.map((tr) => ({
      id: tr.getAttribute('data-request-id'),
      cells: [...tr.querySelectorAll('td')].map((td) => td.textContent),
    })));
    t.equal(rows.length, 3);
    const device = rows.find((r) => r.id === sessionRequest)!;
    const backend = rows.find((r) => r.id === tokenRequest)!;
    const headers = await page.$$eval('[data-testid=audit-table] th', (ths) => ths.map((th) => th.textContent));
    const col = (name: string) => headers.indexOf(name);
    t.equal(device.cells[col('session')], one.session_id, 'the device\'s call names its session');
    t.equal(backend.cells[col('session')], '—', 'the business token\'s own call has none');
    t.equal(device.cells[col('token')], 'fleet backend', 'and both are charged to the business token');
    const outcomes = [device, backend].map((r) => r.cells[col('outcome')]);
    t.ok(outcomes.every((o) => o === 'live' || o === 'not live' || o === 'retry'), `outcomes in words, never non_live: ${outcomes.join(', ')}`);
    const refusedRow = rows.find((r) => r.id !== sessionRequest && r.id !== tokenRequest)!;
    t.same([refusedRow.cells[col('status')], refusedRow.cells[col('outcome')]], ['403 module_forbidden', 'error'], 'a refusal: status and error code in one cell');
    t.same(await page.$$eval('[data-testid=filter-outcome] option', (os) => os.map((o) => [o.getAttribute('value'), o.textContent])),
      [['', 'all'], ['live', 'live'], ['non_live', 'not live'], ['retry', 'retry'], ['mixed', 'mixed'], ['error', 'error']], 'the filter says "not live" and sends the API\'s value');

    // inside the panel, nothing to scroll to: every request-id cell's box within the panel's
    const panel = (await page.$eval('#panel', (el) => el.getBoundingClientRect().toJSON())) as DOMRect;
    const cells = (await page.$$eval('[data-testid=audit-request]', (tds) => tds.map((td) => td.getBoundingClientRect().toJSON()))) as DOMRect[];
    t.equal(cells.length, 3);
    for (const c of cells) t.ok(c.left >= panel.left && c.right <= panel.right + 0.5, `request id cell ${c.left}-${c.right} inside the panel ${panel.left}-${panel.right}`);
    const wrap = await page.$eval('.audit-wrap', (el) => [el.scrollWidth, el.clientWidth]);
    t.ok(wrap[0]! <= wrap[1]!, `the table fits its panel, no horizontal scroll (${wrap[0]} <= ${wrap[1]} px)`);
    const heights = await page.$$eval('#panel tr[data-request-id]', (trs) => trs.map((tr) => tr.getBoundingClientRect().height));
    t.ok(heights.every((h) => h < 40), `rows stay one line (${heights.join(', ')} px)`);
    await page.screenshot({ path: '.tap/screenshots/console-audit-sessions-1280.png', fullPage: true });

    // the CSV: session_id after the token, empty for the business token's call
    const [csvDownload] = await Promise.all([page.waitForEvent('download'), page.click('[data-testid=audit-csv]')]);
    const csv = fs.readFileSync((await csvDownload.path())!, 'utf8').trim().split('\r\n').map((l) => l.split(','));
    t.same(csv[0], ['at', 'request_id', 'token_id', 'token_name', 'session_id', 'module_id', 'status', 'error_code', 'outcome', 'replayed', 'captures', 'charged_units', 'client_ip', 'country', 'latency_ms', 'calls', 'last_at']);
    const csvRow = (id: string) => csv.find((l) => l[1] === id)!;
    t.equal(csvRow(sessionRequest)[4], one.session_id, 'the session in the CSV');
    t.equal(csvRow(tokenRequest)[4], '', 'none for the business token');
    t.equal(csvRow(tokenRequest)[3], 'fleet backend');
    t.ok(['live', 'non_live', 'retry'].includes(csvRow(sessionRequest)[8]!), 'the CSV keeps the API\'s outcome values');
  });

  t.test('the detail of a session\'s call ends that session, not the token', async (t) => {
    await page.click(`tr[data-request-id="${sessionRequest}"] [data-testid=audit-detail]`);
    const line = await (await page.waitForSelector('tr.detail [data-testid=detail-session]')).textContent();
    t.match(line, `Made with device session ${one.session_id}, charged to the token fleet backend`);
    await page.click('[data-testid=detail-revoke-session]');
    await page.waitForSelector('[data-testid=session-revoked]:has-text("Revoked")');
    t.match(asked.at(-1), `Revoke device session ${one.session_id}?`, 'asked first');
    const again = await postVerify(base, one.session_token, 'rgb_liveness', request([single({ id: 'after-revoke' })]));
    t.equal(again.status, 401);
    t.equal(again.json.error.code, 'invalid_session_token', 'the device\'s token is refused');
    t.equal((await fetch(`${base}/v1/me`, { headers: bearer(token) })).status, 200, 'the business token works');
    t.equal((await fetch(`${base}/v1/me`, { headers: bearer(two.session_token) })).status, 200, 'and so do its other sessions');
    // the other row's detail: a business token's own call offers nothing to revoke
    await page.click(`tr[data-request-id="${tokenRequest}"] [data-testid=audit-detail]`);
    await page.waitForSelector('tr.detail >> text=not a device session');
    t.equal(await page.$$eval('[data-testid=detail-revoke-session]', (bs) => bs.length), 1, 'one revoke button: the session call\'s');
  });

  t.test('the token page lists the sessions still usable and revokes one', async (t) => {
    await page.click('#tabs button[data-tab=tokens]');
    await page.click('button:has-text("fleet backend")');
    await page.waitForSelector('[data-testid=token-sessions]');
    t.equal(await page.textContent('[data-testid=token-sessions-count]'), '2', 'the revoked one is gone from the list');
    // (was test/sessions/console.browser.test.ts, a file of its own with its own app, engine
    // and browser for these three checks)
    t.notOk(await page.$(`tr[data-session="${one.session_id}"]`), 'no row for the session revoked from the audit detail');
    t.ok(await page.$(`[data-testid=token-sessions] tr[data-session="${three.session_id}"]`), 'a session still usable is listed');
    t.match(await page.textContent(`tr[data-session="${three.session_id}"]`), '0 / 3', 'with its captures used of its maximum');
    await page.click(`tr[data-session="${two.session_id}"] [data-testid=revoke-session]`);
    await page.waitForFunction(() => document.querySelector('[data-testid=token-sessions-count]')?.textContent === '1');
    t.match(asked.at(-1), `Revoke device session ${two.session_id}?`);
    t.equal((await fetch(`${base}/v1/me`, { headers: bearer(two.session_token) })).status, 401, 'revoked from the token page');
    // the token chart: its day labels do not overlap at 1280 px
    const labels = await page.$$eval('[data-testid=usage-chart] text.day-label', (ts) => ts.filter((x) => x.textContent).map((x) => x.getBoundingClientRect().toJSON()));
    t.ok(labels.length >= 10, `${labels.length} day labels`);
    for (let i = 1; i < labels.length; i++) t.ok(labels[i - 1]!.right <= labels[i]!.left, `day label ${i} clear of the one before (${labels[i - 1]!.right} <= ${labels[i]!.left})`);
    await page.screenshot({ path: '.tap/screenshots/console-token-1280.png', fullPage: true });
  });

  t.test('the CLI and the admin API revoke a session by id', async (t) => {
    const list = await server.cli(['session', 'list', 'fleet backend']);
    t.equal(list.code, 0, list.stderr);
    t.same((list.json as any).sessions.map((s: any) => s.session_id), [three.session_id], 'session list: the one left');
    const revoked = await server.cli(['session', 'revoke', three.session_id]);
    t.equal(revoked.code, 0, revoked.stderr);
    t.match(revoked.json, { session_id: three.session_id, state: 'revoked', token_id: made.json.id });
    t.equal((await fetch(`${base}/v1/me`, { headers: bearer(three.session_token) })).status, 401, 'revoked from the CLI');
    const unknown = await server.cli(['session', 'revoke', 'ses_AAAAAAAAAAAA']);
    t.equal(unknown.code, 3, 'an unknown session: not found');
    t.equal((await server.cli(['session', 'revoke'])).code, 2, 'no id: usage');
    t.equal((await admin('DELETE', `/admin/api/sessions/${three.session_id}`)).status, 204, 'the admin API: revoking twice is fine');
    t.equal((await admin('DELETE', '/admin/api/sessions/ses_AAAAAAAAAAAA')).json.error.code, 'not_found');
    t.equal((await admin('DELETE', '/admin/api/sessions/not-a-session')).status, 404);
    t.equal((await admin('DELETE', `/admin/api/sessions/${three.session_id}`, undefined, { csrf: null })).status, 403, 'a state change without the CSRF token is refused');
    t.equal((await fetch(`${base}/admin/api/sessions/${three.session_id}`, { method: 'DELETE', headers: bearer(token) })).status, 401, 'and a business token is no admin');
  });

  t.test('the usage chart\'s day labels apart; the module the set lacks has no model', async (t) => {
    await page.click('#tabs button[data-tab=usage]');
    await page.waitForSelector('[data-testid=usage-chart]');
    const labels = await page.$$eval('[data-testid=usage-chart] text.day-label', (ts) => ts.filter((x) => x.textContent).map((x) => ({ text: x.textContent, box: x.getBoundingClientRect().toJSON() })));
    t.equal(labels.at(-1)!.text, new Date().toISOString().slice(5, 10), 'today is labelled');
    for (let i = 1; i < labels.length; i++) t.ok(labels[i - 1]!.box.right <= labels[i]!.box.left, `${labels[i - 1]!.text} clear of ${labels[i]!.text}`);
    await page.screenshot({ path: '.tap/screenshots/console-usage-1280.png', fullPage: true });

    await page.click('#tabs button[data-tab=modules]');
    await page.waitForSelector('#panel tr[data-module=color_liveness]');
    const color = await page.textContent('#panel tr[data-module=color_liveness]');
    t.match(color, 'not ready: model set bgr80_ensemble_v1 does not describe color_liveness');
    t.equal(await page.textContent('#panel tr[data-module=color_liveness] [data-testid=module-trained]'), '—', 'not "trained yes" (nor no): it has no model');
    t.equal(await page.textContent('#panel tr[data-module=color_liveness] [data-testid=module-threshold]'), '—', 'and no threshold 0');
    t.equal(await page.textContent('#panel tr[data-module=rgb_liveness] [data-testid=module-trained]'), 'no (random weights)', 'the module it describes: its flag');
    t.match(await page.textContent('#panel tr[data-module=rgb_liveness] [data-testid=module-threshold]'), /^\d/, 'and its threshold');
    const api = (await admin('GET', '/admin/api/modules')).json.modules.find((m: any) => m.module_id === 'color_liveness');
    t.match(api, { trained: null, decision_policy: '' }, 'the admin API says the same');
    await page.screenshot({ path: '.tap/screenshots/console-modules-1280.png', fullPage: true });
    t.same(problems, [], 'no script or console errors');
  });
}
