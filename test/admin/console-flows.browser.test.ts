import t from 'tap';
import { reserve } from '../../src/store/lmdb/index.ts';
import { atomically } from '../../src/store/lmdb/atomic.ts';
import { markFailedWrites } from '../../src/store/lmdb/settle.ts';
import { getToken } from '../../src/store/lmdb/tokens.ts';
import { startApi } from '../helpers/api.ts';
import { chromiumMissing, consoleLogin, launchChromium } from '../helpers/browser.ts';
import { missingTool } from '../helpers/required.ts';
import { client, login } from '../auth/session-client.ts';

// The console's flows as an operator meets them (review3b, in headless Chromium): what the
// console sends, and what it shows afterwards, against what the admin API then holds.
const missing = chromiumMissing('console flows browser test');
if (missing) {
  missingTool(t, missing);
} else {
  const PASSWORD = 'correct horse battery';
  const server = await startApi({ engine: 'real', ready: true, env: { ADMIN_USERNAME: 'root', ADMIN_PASSWORD: PASSWORD, TEST_PASSWORD_SCRYPT_N: '1024' } });
  const browser = await launchChromium();
  t.teardown(async () => {
    await browser.close();
    await server.stop();
  });
  const admin = client(server.baseUrl, await login(server.baseUrl, 'root', PASSWORD));
  // a context of its own, so that a second tab of the same browser session can be opened in it
  const context = await browser.newContext();
  const page = await context.newPage();
  const problems: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error' && !/401/.test(m.text())) problems.push(m.text());
  });
  page.on('pageerror', (e) => problems.push(e.message));
  page.on('dialog', (d) => void d.accept());
  await consoleLogin(page, server.baseUrl, 'root', PASSWORD);
  const error = async () => ((await page.textContent('#main-error')) ?? '').trim();
  const tokenNamed = async (name: string) => (await admin('GET', `/admin/api/tokens?q=${encodeURIComponent(name)}&limit=50`)).json.tokens.filter((x: { name: string }) => x.name === name);

  t.test('a typo in a grant\'s limit is refused, never sent as unlimited', async (t) => {
    const made = await admin('POST', '/admin/api/tokens', { name: 'typo-grant', grants: [{ module_id: 'rgb_liveness', limit: 50, period: 'day' }] });
    await page.click('#tabs button[data-tab=tokens]');
    await page.click('button:has-text("typo-grant")');
    const box = page.locator('#panel tr[data-module=rgb_liveness] input[type=number]');
    for (const typo of ['1e', '-', '10e']) {
      await box.fill('');
      await box.pressSequentially(typo);
      await page.click('#panel tr[data-module=rgb_liveness] button:has-text("Change grant")');
      await page.waitForFunction(() => /The limit must be a whole number/.test(document.getElementById('main-error')?.textContent ?? ''));
      if (typo === '1e') await page.screenshot({ path: '.tap/screenshots/console-grant-typo.png', fullPage: true });
      const grant = (await admin('GET', `/admin/api/tokens/${made.json.id}`)).json.grants.find((g: { module_id: string }) => g.module_id === 'rgb_liveness');
      t.same([grant.limit, grant.period], [50, 'day'], `${typo}: the grant is as it was (it became unlimited)`);
    }
    await box.fill('7');
    await page.click('#panel tr[data-module=rgb_liveness] button:has-text("Change grant")');
    await page.waitForSelector('#panel tr[data-module=rgb_liveness] td:text-is("7 / day")');
    t.equal(await error(), '', 'a whole number is sent, and no error shown');
  });

  t.test('a double click on Create token creates one token and shows no conflict', async (t) => {
    await page.click('#tabs button[data-tab=tokens]');
    await page.fill('[data-testid=token-name]', 'double-click');
    await page.dblclick('[data-testid=token-create-submit]');
    await page.waitForSelector('[data-testid=new-token-plaintext]');
    await page.screenshot({ path: '.tap/screenshots/console-double-click.png', fullPage: true });
    t.equal((await tokenNamed('double-click')).length, 1, 'one token');
    t.equal(await error(), '', 'no 409 from a second request shown beside it');
  });

  t.test('a settlement resolved elsewhere meanwhile: the refusal is shown and the list redrawn', async (t) => {
    const made = await admin('POST', '/admin/api/tokens', { name: 'settle-elsewhere', grants: [{ module_id: 'rgb_liveness', limit: 10, period: 'day' }] });
    const store = server.lmdb!;
    const out = await reserve(store, { token: getToken(store, made.json.id)!, moduleId: 'rgb_liveness', units: 1, requestId: 'req-settle-elsewhere', idempotencyKey: null, fingerprint: null, at: Date.now() });
    if (out.kind !== 'reserved') throw new Error('not reserved');
    await atomically(store, () => markFailedWrites(store, out.reservation.id, null));
    await page.click('#tabs button[data-tab=settlements]');
    const row = '#panel tr:has-text("req-settle-elsewhere")';
    await page.waitForSelector(row);
    t.equal((await admin('POST', `/admin/api/settlements/${out.reservation.id}/resolve`, { action: 'charge' })).status, 200, 'resolved through the API');
    await page.click(`${row} button:has-text("Refund")`);
    await page.waitForFunction(() => /conflict/.test(document.getElementById('main-error')?.textContent ?? ''));
    await page.waitForSelector(row, { state: 'detached' });
    await page.screenshot({ path: '.tap/screenshots/console-settlement-refused.png', fullPage: true });
    t.pass('the 409 is shown and the row it refused is gone');
  });

  t.test('the audit and usage filters find a token by its exact name in one request, past 64 names that contain it', async (t) => {
    for (let i = 0; i < 64; i++) await admin('POST', '/admin/api/tokens', { name: `a-branch-${String(i).padStart(2, '0')}`, grants: [] });
    const branch = (await admin('POST', '/admin/api/tokens', { name: 'branch', grants: [] })).json;
    const lookups: URL[] = [];
    const seen = (r: { url(): string }) => {
      const url = new URL(r.url());
      if (url.pathname === '/admin/api/tokens') lookups.push(url);
    };
    page.on('request', seen);
    t.teardown(() => page.off('request', seen));
    const sent = (path: string) => page.waitForRequest((r) => {
      const url = new URL(r.url());
      return url.pathname === path && url.searchParams.has('token_id');
    });
    // what the console sends: one lookup by name (the names containing it came first in the
    // pages of q=branch it walked, 2 requests here, and past 40 pages it gave up)
    const filtered = async (tab: string, typed: string, path: string) => {
      await page.click(`#tabs button[data-tab=${tab}]`);
      await page.waitForSelector('[data-testid=filter-token]');
      lookups.length = 0;
      await page.fill('[data-testid=filter-token]', typed);
      const request = sent(path);
      await page.click('[data-testid=filter-apply]');
      return new URL((await request).url()).searchParams.get('token_id');
    };
    t.equal(await filtered('audit', 'branch', '/admin/api/audit'), branch.id, 'the audit log of the token named branch');
    t.same(lookups.map((u) => [...u.searchParams.keys()].sort()), [['limit', 'name']], 'one request, by name');
    t.equal(lookups[0]!.searchParams.get('name'), 'branch');
    t.equal(await filtered('usage', ' BRANCH ', '/admin/api/usage/daily'), branch.id, 'usage: case ignored, as names are unique');
    t.same(lookups.map((u) => u.searchParams.get('name')), ['BRANCH'], 'one request, the typed name trimmed');
    t.equal(await error(), '', 'no "No token is named"');

    lookups.length = 0;
    await page.fill('[data-testid=filter-token]', 'branc');
    await page.click('[data-testid=filter-apply]');
    await page.waitForFunction(() => /No token is named "branc"/.test(document.getElementById('main-error')?.textContent ?? ''));
    t.same(lookups.map((u) => u.searchParams.get('name')), ['branc'], 'a name that is no token\'s: one request, then said so');
  });

  t.test('another tab logged in again: this tab\'s next change is made with the new CSRF token', async (t) => {
    // the other tab logs in again (as after an idle timeout): the new session replaces the one
    // its cookie named, with a new CSRF token, and both tabs share the cookie
    const other = await context.newPage();
    await other.goto(`${server.baseUrl}/admin`);
    const status = await other.evaluate(async (password) => (await fetch('/auth/login', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: 'root', password }) })).status, PASSWORD);
    t.equal(status, 200, 'logged in again in the other tab');
    await other.close();
    await page.click('#tabs button[data-tab=tokens]');
    await page.fill('[data-testid=token-name]', 'after-relogin');
    await page.click('[data-testid=token-create-submit]');
    await page.waitForSelector('[data-testid=new-token-plaintext]');
    t.equal((await tokenNamed('after-relogin')).length, 1, 'made with the session\'s new CSRF token (it answered csrf_failed until a reload)');
    t.equal(await error(), '');
  });

  t.test('an account demoted while its console is open is shown the login, not an admin console', async (t) => {
    t.equal((await admin('POST', '/admin/api/users', { username: 'adm2', password: 'second password', role: 'admin', current_password: PASSWORD })).status, 201);
    const context = await browser.newContext();
    t.teardown(() => context.close());
    const second = await context.newPage();
    await consoleLogin(second, server.baseUrl, 'adm2', 'second password');
    const id = (await admin('GET', '/admin/api/users?q=adm2')).json.users.find((u: { username: string }) => u.username === 'adm2').id;
    t.equal((await admin('PATCH', `/admin/api/users/${id}`, { role: 'user', current_password: PASSWORD })).status, 200, 'demoted');
    await second.click('#tabs button[data-tab=tokens]');
    await second.waitForSelector('#login-view', { state: 'visible' });
    await second.screenshot({ path: '.tap/screenshots/console-demoted.png', fullPage: true });
    t.match(await second.textContent('#login-error'), /adm2 is no longer an administrator/);
  });

  t.test('the untrained banner follows an activation made in the console', async (t) => {
    await page.click('#tabs button[data-tab=modules]');
    await page.waitForSelector('#untrained-banner:not([hidden])');
    t.match(await page.textContent('#untrained-banner'), /rgb_liveness \(raw_v1\)/);
    // bgr80 has no colour module: disabled first, or the activation is refused
    t.equal((await admin('PATCH', '/admin/api/modules/color_liveness', { enabled: false })).status, 200);
    await page.click('#tabs button[data-tab=modules]');
    await page.click('[data-testid=activate-bgr80_ensemble_v1]');
    await page.waitForSelector('[data-testid=activation-note]:has-text("bgr80_ensemble_v1: active")', { timeout: 120_000 });
    await page.waitForFunction(() => /rgb_liveness \(bgr80_ensemble_v1\)/.test(document.getElementById('untrained-banner')?.textContent ?? ''));
    await page.screenshot({ path: '.tap/screenshots/console-banner-after-activation.png', fullPage: true });
    t.pass('the banner names the set now served (it kept naming raw_v1 until a reload)');
  });

  t.test('no console errors', async (t) => {
    t.same(problems.filter((p) => !/status of 40[139]|status of 422/.test(p)), []);
  });
}
