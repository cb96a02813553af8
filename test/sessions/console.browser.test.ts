import t from 'tap';
import { startApi } from '../helpers/api.ts';
import { bearer, makeToken } from '../helpers/server.ts';
import { chromiumMissing, consoleLogin, launchChromium, watchedPage } from '../helpers/browser.ts';

// The console's token page lists the token's active device sessions (issue 26), in headless
// Debian Chromium, as test/admin/console.browser.test.ts drives it.
const missing = chromiumMissing('console browser test');
if (missing) {
  t.plan(0, missing);
} else {
  // the service's app (and engine) in process on its real store: test/helpers/api.ts (was one server start)
  const server = await startApi({ engine: 'real', ready: true, env: { ADMIN_USERNAME: 'root', ADMIN_PASSWORD: 'correct horse battery' } });
  const browser = await launchChromium();
  t.teardown(async () => {
    await browser.close();
    await server.stop();
  });
  const { page, problems } = await watchedPage(browser);

  t.test('a token\'s detail shows its active sessions, not the revoked one', async (t) => {
    const { token, name } = await makeToken(server, ['rgb_liveness:100:day']);
    const mint = async () => (await (await fetch(`${server.baseUrl}/v1/sessions`, {
      method: 'POST', headers: { ...bearer(token), 'content-type': 'application/json' }, body: JSON.stringify({ module_id: 'rgb_liveness', max_captures: 4 }),
    })).json()) as { session_id: string };
    const active = await mint();
    const revoked = await mint();
    t.equal((await fetch(`${server.baseUrl}/v1/sessions/${revoked.session_id}`, { method: 'DELETE', headers: bearer(token) })).status, 204);

    await consoleLogin(page, server.baseUrl, 'root', 'correct horse battery');
    await page.click('#tabs button[data-tab=tokens]');
    await page.click(`button:has-text("${name}")`);
    await page.waitForSelector('[data-testid=token-sessions-count]');
    t.equal(await page.textContent('[data-testid=token-sessions-count]'), '1');
    t.ok(await page.$(`[data-testid=token-sessions] tr[data-session="${active.session_id}"]`), 'the active session is listed');
    t.notOk(await page.$(`tr[data-session="${revoked.session_id}"]`), 'the revoked one is not');
    t.match(await page.textContent(`tr[data-session="${active.session_id}"]`), '0 / 4');
    t.same(problems, [], 'no script errors');
  });
}
