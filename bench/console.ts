// Console at scale (issue 14): how long each console view takes to answer in headless
// Chromium with 5,000 tokens, 50,000 audit rows, 50,000 ledger entries and 300 users in the
// store, and the admin API calls behind them. Figures only; the target ("each view answers
// within a second on this machine") is judged by people reading them.
//
//   node --import tsx bench/console.ts [--quick] [--runs N] [--screenshots DIR]
//
// A view's time runs from the click (or Enter) to the moment its new rows are in the page:
// the API call(s), JSON, and building the DOM. --screenshots saves every view at 420 px wide.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Page } from 'playwright-core';
import { openStore } from '../src/store/lmdb/open.ts';
import { chromiumMissing, consoleLogin, launchChromium } from './harness/browser.ts';
import { startServer } from './harness/server.ts';
import { login } from './harness/session-client.ts';
import { seedConsole, seedTokenName, seedUserName } from './harness/seed.ts';


interface Figure {
  what: string;
  median_ms: number;
  max_ms: number;
  runs: number;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** Marks what is on screen stale, acts, and waits for a fresh table (or empty note) in the
 * given paged view. */
async function timeView(page: Page, view: string, act: () => Promise<void>): Promise<number> {
  await page.evaluate(() => {
    for (const el of document.querySelectorAll('#panel table, #panel [data-testid=empty], #panel svg')) el.setAttribute('data-stale', '');
  });
  const t0 = performance.now();
  await act();
  try {
    await page.waitForSelector(`[data-testid=${view}] table:not([data-stale]), [data-testid=${view}] [data-testid=empty]:not([data-stale])`, { timeout: 60_000 });
  } catch (err) {
    throw new Error(`${view} did not render; the console shows: ${JSON.stringify(await page.textContent('#main-error'))}`, { cause: err });
  }
  return performance.now() - t0;
}

export async function benchConsole(opts: { quick: boolean; runs?: number; screenshots?: string }) {
  const missing = chromiumMissing('the console bench');
  if (missing) return { skipped: missing };
  const sizes = { tokens: 5000, audit: 50_000, ledger: 50_000, users: 300 };
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'lv-bench-console-'));
  const store = openStore(dataDir);
  const s0 = performance.now();
  const seeded = await seedConsole(store, { ...sizes, now: Date.now(), days: 30 });
  const seedMs = performance.now() - s0;
  await store.close();

  const server = await startServer({ dataDir, env: { ADMIN_USERNAME: 'root', ADMIN_PASSWORD: 'correct horse battery', WORKERS: '2' } });
  const browser = await launchChromium();
  const runs = opts.runs ?? (opts.quick ? 2 : 5);
  const views: Figure[] = [];
  const api: Figure[] = [];
  try {
    const page = await browser.newPage();
    await consoleLogin(page, server.baseUrl, 'root', 'correct horse battery');

    const measure = async (what: string, view: string, setup: () => Promise<void>, act: () => Promise<void>) => {
      const times: number[] = [];
      for (let i = 0; i < runs; i++) {
        await setup();
        times.push(await timeView(page, view, act));
      }
      views.push({ what, median_ms: median(times), max_ms: Math.max(...times), runs });
    };
    const tab = (name: string) => () => page.click(`#tabs button[data-tab=${name}]`);
    const away = async () => {
      await page.click('#tabs button[data-tab=settlements]');
      await page.waitForSelector('#tabs button[data-tab=settlements][aria-selected=true]');
    };
    const search = (box: string, text: string) => async () => {
      await page.fill(box, text);
      await page.press(box, 'Enter');
    };
    const filters = (values: { token?: string; status?: string; outcome?: string }) => async () => {
      await page.fill('[data-testid=filter-token]', values.token ?? '');
      if (await page.$('[data-testid=filter-status]')) await page.fill('[data-testid=filter-status]', values.status ?? '');
      if (await page.$('[data-testid=filter-outcome]')) await page.selectOption('[data-testid=filter-outcome]', values.outcome ?? '');
      await page.click('[data-testid=filter-apply]');
    };
    const nothing = async () => {};
    const rare = seeded.tokens[4999]!;

    await measure('tokens: open the tab (first page of 50, name order)', 'token-table', away, tab('tokens'));
    await measure('tokens: next page', 'token-table', async () => {
      await tab('tokens')();
      await page.waitForSelector('[data-testid=token-table][data-page="1"] table');
    }, () => page.click('[data-testid=token-table] [data-testid=page-next]'));
    await measure('tokens: search by name fragment ("lobby 04")', 'token-table', nothing, search('[data-testid=token-search]', 'lobby 04'));
    await measure('tokens: search by exact name (last token)', 'token-table', nothing, search('[data-testid=token-search]', rare.name));
    await measure('tokens: search by lvk_ prefix', 'token-table', nothing, search('[data-testid=token-search]', rare.token_prefix));
    await measure('tokens: search with no match (walks the whole index)', 'token-table', nothing, search('[data-testid=token-search]', 'zz-no-such-token'));
    await measure('users: open the tab', 'user-table', away, tab('users'));
    await measure('users: search', 'user-table', nothing, search('[data-testid=user-search]', seedUserName(250)));
    await measure('audit: open the tab (newest 50 of 50,000)', 'audit-table', away, tab('audit'));
    await measure('audit: next page', 'audit-table', async () => {
      await tab('audit')();
      await page.waitForSelector('[data-testid=audit-table][data-page="1"] table');
    }, () => page.click('[data-testid=audit-table] [data-testid=page-next]'));
    await measure('audit: filter outcome=retry', 'audit-table', nothing, filters({ outcome: 'retry' }));
    await measure('audit: filter status=4xx', 'audit-table', nothing, filters({ status: '4xx' }));
    await measure('audit: filter by token name (about 10 of the 50,000 rows; per-token index)', 'audit-table', nothing, filters({ token: rare.name }));
    await measure('audit: filter by token name + status 429 (no or few rows)', 'audit-table', nothing, filters({ token: rare.name, status: '429' }));
    await measure('audit: status 429 + outcome live (matches nothing: one 10,000-row stretch, empty page + Next)', 'audit-table', nothing, filters({ status: '429', outcome: 'live' }));
    await measure('usage: open the tab (30-day chart + newest ledger page)', 'ledger-table', away, tab('usage'));
    await measure('usage: filter by token name', 'ledger-table', nothing, filters({ token: seedTokenName(17) }));

    // the API calls alone, from Node (no browser), for the record
    const session = await login(server.baseUrl, 'root', 'correct horse battery');
    const call = async (what: string, p: string) => {
      const times: number[] = [];
      for (let i = 0; i < runs; i++) {
        const t0 = performance.now();
        const r = await fetch(`${server.baseUrl}${p}`, { headers: { cookie: session.cookie } });
        await r.arrayBuffer();
        if (r.status !== 200) throw new Error(`${p}: ${r.status}`);
        times.push(performance.now() - t0);
      }
      api.push({ what, median_ms: median(times), max_ms: Math.max(...times), runs });
    };
    await call('GET /admin/api/tokens?limit=50', '/admin/api/tokens?limit=50');
    await call('GET /admin/api/tokens?q=<no match>&limit=50', '/admin/api/tokens?q=zz-no-such&limit=50');
    await call('GET /admin/api/tokens (unpaged, all 5,000: the contract\'s list)', '/admin/api/tokens');
    await call('GET /admin/api/users?limit=50', '/admin/api/users?limit=50');
    await call('GET /admin/api/audit?order=desc&limit=50', '/admin/api/audit?order=desc&limit=50');
    await call('GET /admin/api/audit?order=desc&limit=50&token_id=<rare>', `/admin/api/audit?order=desc&limit=50&token_id=${rare.id}`);
    await call('GET /admin/api/audit?order=desc&limit=50&status=429&outcome=live (no match: one 10,000-row stretch)', '/admin/api/audit?order=desc&limit=50&status=429&outcome=live');
    await call('GET /admin/api/usage/daily (30 days, all tokens)', '/admin/api/usage/daily');
    await call('GET /admin/api/usage/daily?token_id=<one>', `/admin/api/usage/daily?token_id=${rare.id}`);
    await call('GET /admin/api/usage?order=desc&limit=50', '/admin/api/usage?order=desc&limit=50');

    if (opts.screenshots) {
      fs.mkdirSync(opts.screenshots, { recursive: true });
      await page.setViewportSize({ width: 420, height: 900 });
      for (const name of ['tokens', 'modules', 'users', 'usage', 'audit', 'settlements']) {
        await away();
        await page.click(`#tabs button[data-tab=${name}]`);
        await page.waitForSelector('#panel > *');
        await page.waitForLoadState('networkidle');
        await page.screenshot({ path: path.join(opts.screenshots, `console-420-${name}.png`) });
      }
    }
  } finally {
    await browser.close();
    await server.stop();
  }
  return { sizes, seed_ms: Math.round(seedMs), views, api };
}

if (import.meta.url === pathToFileURL(process.argv[1]!).href) {
  const arg = (name: string) => {
    const i = process.argv.indexOf(name);
    return i >= 0 ? process.argv[i + 1] : undefined;
  };
  const r = await benchConsole({ quick: process.argv.includes('--quick'), runs: arg('--runs') ? Number(arg('--runs')) : undefined, screenshots: arg('--screenshots') });
  if ('skipped' in r) {
    console.log(r.skipped);
  } else {
    console.log(`console at scale: ${r.sizes.tokens} tokens, ${r.sizes.audit} audit rows, ${r.sizes.ledger} ledger entries, ${r.sizes.users} users (seeded in ${r.seed_ms} ms); ${os.availableParallelism()} cores, ${os.cpus()[0]?.model ?? ''}`);
    console.log('\n| console view (Chromium, click to rows shown) | median ms | max ms | runs |\n|---|---|---|---|');
    for (const v of r.views) console.log(`| ${v.what} | ${v.median_ms.toFixed(0)} | ${v.max_ms.toFixed(0)} | ${v.runs} |`);
    console.log('\n| admin API call (Node fetch) | median ms | max ms | runs |\n|---|---|---|---|');
    for (const v of r.api) console.log(`| ${v.what} | ${v.median_ms.toFixed(1)} | ${v.max_ms.toFixed(1)} | ${v.runs} |`);
    const worst = Math.max(...r.views.map((v) => v.max_ms));
    console.log(`\nslowest view (max over runs): ${worst.toFixed(0)} ms; views within 1 s: ${r.views.filter((v) => v.max_ms <= 1000).length}/${r.views.length}`);
  }
}
