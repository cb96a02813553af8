import fs from 'node:fs';
import type { Browser, Page } from 'playwright-core';

// Headless Debian Chromium for the browser tests and bench/console.ts: one place for its path,
// its flags and the console's login, so a change to any of them is made once.

export const CHROMIUM = '/usr/bin/chromium';

/** Why a browser test is skipped on this host, or null when Chromium is installed. */
export function chromiumMissing(what: string): string | null {
  return fs.existsSync(CHROMIUM) ? null : `${what} skipped: ${CHROMIUM} not found. Enable it with \`apt-get install -y chromium\` (Debian; .ci/run does this when run as root)`;
}

export async function launchChromium(): Promise<Browser> {
  const { chromium } = await import('playwright-core');
  return chromium.launch({
    executablePath: CHROMIUM,
    // no sandbox: CI runs as root; the rest keeps a headless run from calling out or idling busy
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}

/** Signs in on the console's login form and waits for the main view. */
export async function consoleLogin(page: Page, baseUrl: string, username: string, password: string): Promise<void> {
  await page.goto(`${baseUrl}/admin`);
  await page.fill('#login-username', username);
  await page.fill('#login-password', password);
  await page.click('#login-submit');
  await page.waitForSelector('#main-view', { state: 'visible' });
}

/** A new page of `browser` whose script errors and console errors land in `problems`; the
 * console's first session probe answers 401 before a login, so a 401 is not a problem. */
export async function watchedPage(browser: Browser): Promise<{ page: Page; problems: string[] }> {
  const page = await browser.newPage();
  const problems: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error' && !/401/.test(m.text())) problems.push(m.text());
  });
  page.on('pageerror', (e) => problems.push(e.message));
  return { page, problems };
}
