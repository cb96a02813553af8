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
