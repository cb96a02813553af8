import t from 'tap';
import { openStore } from '../../src/store/lmdb/open.ts';
import { startApi } from '../helpers/api.ts';
import { tempDir } from '../helpers/server.ts';
import { seedConsole, seedTokenName, seedUserName } from './seed.ts';
import { chromiumMissing, consoleLogin, launchChromium, watchedPage } from '../helpers/browser.ts';
import { missingTool } from '../helpers/required.ts';

// issue 14: the console with 5,000 tokens, 50,000 audit rows (and 50,000 ledger entries,
// 300 users), seeded straight into the store. Every view is driven in headless Chromium and
// checked for what it shows; how fast each answers is measured by bench/console.ts, not here.
const missing = chromiumMissing('console scale browser test');
if (missing) {
  missingTool(t, missing);
} else {
  const dataDir = tempDir();
  const store = openStore(dataDir);
  const seeded = await seedConsole(store, { tokens: 5000, audit: 50_000, ledger: 50_000, users: 300, now: Date.now(), days: 30 });
  await store.close();
  // the service's app (and engine) in process on its real store: test/helpers/api.ts (was one server start)
  const server = await startApi({ engine: 'real', dataDir, env: { ADMIN_USERNAME: 'root', ADMIN_PASSWORD: 'correct horse battery' } });
  const browser = await launchChromium();
  t.teardown(async () => {
    await browser.close();
    await server.stop();
  });
  const { page, problems } = await watchedPage(browser);
  await consoleLogin(page, server.baseUrl, 'root', 'correct horse battery');

  const cells = (selector: string, column: number) =>
    page.$$eval(`${selector} tbody tr`, (trs, c) => trs.map((tr) => (tr as HTMLTableRowElement).cells[c]!.textContent ?? ''), column);
  /** Clicks and waits until the paged table shows the given page again (a fresh render). */
  const turn = async (table: string, button: 'page-next' | 'page-prev', expect: number) => {
    await page.click(`[data-testid=${table}] [data-testid=${button}]`);
    await page.waitForSelector(`[data-testid=${table}][data-page="${expect}"]`);
  };

  t.test('tokens: paged and searched on the server', async (t) => {
    await page.click('#tabs button[data-tab=tokens]');
    await page.waitForSelector('[data-testid=token-table][data-page="1"] tbody tr');
    const first = await cells('[data-testid=token-table]', 0);
    t.equal(first.length, 50, 'one page of 50, not 5,000 rows');
    const sorted = seeded.tokens.map((x) => x.name).sort((a, b) => a.toLowerCase().localeCompare(b.toLowerCase()));
    t.same(first, sorted.slice(0, 50), 'in name order');
    await turn('token-table', 'page-next', 2);
    t.same(await cells('[data-testid=token-table]', 0), sorted.slice(50, 100), 'the next page');
    await turn('token-table', 'page-prev', 1);
    t.same(await cells('[data-testid=token-table]', 0), first, 'and back');

    const target = seeded.tokens[4321]!;
    for (const [q, what] of [[target.name.toUpperCase(), 'name'], [target.token_prefix, 'prefix'], [target.id, 'id']] as const) {
      await page.fill('[data-testid=token-search]', q);
      await page.press('[data-testid=token-search]', 'Enter');
      await page.waitForSelector(`[data-testid=token-table] tr[data-token-id="${target.id}"]`);
      t.same(await cells('[data-testid=token-table]', 0), [target.name], `by ${what}`);
    }
    await page.fill('[data-testid=token-search]', 'lobby 04');
    await page.press('[data-testid=token-search]', 'Enter');
    await page.waitForFunction(() => document.querySelectorAll('[data-testid=token-table] tbody tr').length === 50);
    t.ok((await cells('[data-testid=token-table]', 0)).every((n) => n.startsWith('lobby 04')), 'a name fragment');
    await page.fill('[data-testid=token-search]', 'no such token');
    await page.press('[data-testid=token-search]', 'Enter');
    await page.waitForSelector('[data-testid=token-table] [data-testid=empty]');
  });

  t.test('users: searched on the server', async (t) => {
    await page.click('#tabs button[data-tab=users]');
    await page.waitForSelector('[data-testid=user-table][data-page="1"] tbody tr');
    t.equal((await cells('[data-testid=user-table]', 0)).length, 50);
    await page.fill('[data-testid=user-search]', seedUserName(123));
    await page.press('[data-testid=user-search]', 'Enter');
    await page.waitForSelector(`[data-testid=user-table] tr[data-user="${seedUserName(123)}"]`);
    t.same(await cells('[data-testid=user-table]', 0), [seedUserName(123)]);
  });

  t.test('audit: newest first, filtered on the server', async (t) => {
    await page.click('#tabs button[data-tab=audit]');
    await page.waitForSelector('[data-testid=audit-table][data-page="1"] tbody tr');
    const times = await cells('[data-testid=audit-table]', 0);
    t.equal(times.length, 50);
    t.same(times, [...times].sort().reverse(), 'newest first');
    t.ok(times.every((x) => x.endsWith(' UTC')));
    await turn('audit-table', 'page-next', 2);
    const next = await cells('[data-testid=audit-table]', 0);
    t.ok(next[0]! <= times[49]!, 'page 2 goes on backwards');

    const token = seeded.tokens[77]!;
    await page.fill('[data-testid=filter-token]', token.name);
    await page.fill('[data-testid=filter-status]', '429');
    await page.click('[data-testid=filter-apply]');
    await page.waitForFunction((name) => {
      const rows = [...document.querySelectorAll('[data-testid=audit-table] tbody tr')] as HTMLTableRowElement[];
      // columns: time, request, token, session, module, status (with the error code), outcome, replay ...
      return document.querySelector('[data-testid=audit-table] [data-testid=empty]') || (rows.length > 0 && rows.every((r) => r.cells[2]!.textContent === name));
    }, token.name);
    const statuses = await cells('[data-testid=audit-table]', 5);
    t.ok(statuses.every((s) => /^429( |$)/.test(s)), `only 429s of ${token.name} (${statuses.length})`);

    await page.fill('[data-testid=filter-token]', '');
    await page.fill('[data-testid=filter-status]', '');
    await page.selectOption('[data-testid=filter-outcome]', 'retry');
    await page.click('[data-testid=filter-apply]');
    await page.waitForFunction(() => {
      const rows = [...document.querySelectorAll('[data-testid=audit-table] tbody tr')] as HTMLTableRowElement[];
      return rows.length === 50 && rows.every((r) => r.cells[6]!.textContent === 'retry');
    });
    t.pass('outcome filter');
    t.ok((await cells('[data-testid=audit-table]', 7)).every((x) => x === 'no' || x === 'replay'), 'replay column');
  });

  t.test('usage: chart from the daily totals', async (t) => {
    await page.click('#tabs button[data-tab=usage]');
    await page.waitForSelector('[data-testid=usage-chart]');
    await page.waitForSelector('[data-testid=ledger-table][data-page="1"] tbody tr');
    t.equal((await page.$$('[data-testid=usage-chart] g[data-day]')).length, 30, 'thirty UTC days');
    const bars = await page.$$eval('[data-testid=usage-chart] g[data-day]', (gs) => gs.reduce((s, g) => s + Number(g.getAttribute('data-units')), 0));
    t.equal(Number(await page.textContent('[data-testid=usage-total]')), bars, 'the total is the sum of the bars');
    t.ok(bars > 0);
    await page.fill('[data-testid=filter-token]', seedTokenName(5));
    await page.click('[data-testid=filter-apply]');
    await page.waitForFunction((name) => {
      const rows = [...document.querySelectorAll('[data-testid=ledger-table] tbody tr')] as HTMLTableRowElement[];
      return rows.length > 0 && rows.every((r) => r.cells[3]!.textContent === name);
    }, seedTokenName(5));
    t.pass('the ledger follows the token filter');
  });

  t.test('usable at 420 px: no view is wider than the screen', async (t) => {
    await page.setViewportSize({ width: 420, height: 900 });
    for (const tab of ['tokens', 'modules', 'users', 'usage', 'audit', 'settlements']) {
      await page.click(`#tabs button[data-tab=${tab}]`);
      await page.waitForSelector(`#tabs button[data-tab=${tab}][aria-selected=true]`);
      await page.waitForFunction(() => document.querySelector('#panel')!.children.length > 0 && !document.querySelector('#panel .paged:empty'));
      const width = await page.evaluate(() => document.documentElement.scrollWidth);
      t.ok(width <= 420, `${tab}: page width ${width} px`);
    }
    t.same(problems, [], 'no script errors or CSP violations');
  });
}
