/**
 * Headless Chromium for the console's end-to-end tests: Debian's chromium (apt-get install chromium; .ci/run
 * installs it) driven by playwright-core, which downloads no browser of its own. Without the binary the browser
 * tests skip with a message, unless HOOKRAIL_REQUIRE_BROWSER is set (CI sets it), when they fail.
 */
import { existsSync } from 'node:fs';
import { type Browser, type BrowserContext, chromium } from 'playwright-core';

export const CHROMIUM = process.env.HOOKRAIL_CHROMIUM ?? '/usr/bin/chromium';

export function browserMissing(): string | null {
  if (existsSync(CHROMIUM)) return null;
  const why = `no Chromium at ${CHROMIUM} (apt-get install chromium, or set HOOKRAIL_CHROMIUM)`;
  if (process.env.HOOKRAIL_REQUIRE_BROWSER) throw new Error(why);
  console.warn(`console browser tests skipped: ${why}`);
  return why;
}

export interface HeadlessBrowser {
  browser: Browser;
  context: BrowserContext;
  close(): Promise<void>;
}

/**
 * The flags keep Chromium off the network it cannot reach here (background updates, sync, QUIC); playwright gives
 * each launch a fresh profile of its own, so runs are independent.
 */
export async function launchBrowser(): Promise<HeadlessBrowser> {
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  const context = await browser.newContext({ permissions: ['clipboard-read', 'clipboard-write'] });
  return {
    browser,
    context,
    async close() {
      await context.close().catch(() => {});
      await browser.close();
    },
  };
}
