// What every browser driver shares: Chromium launched headless on a throwaway profile, the
// page's problems collected, and named checks that print `ok   NAME` or `FAIL NAME: why` (with a
// screenshot of the failure).

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

/** The flags every run passes (offline, no first-run or background traffic). */
const FLAGS = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
];

/**
 * Launches Chromium (`REIN_CHROMIUM`, else Debian's) and opens its page. `shots` is where failure
 * screenshots go, named `<prefix>failure-<check>.png`. Returns the context, the page, `check`,
 * `assert`, `problems` (page errors and console errors, pushed to by the page) and `finish()`,
 * which closes the browser and exits 0 only when every check passed.
 */
export async function launch({ shots, prefix = '', viewport = { width: 1200, height: 800 }, args = [], acceptDownloads = false }) {
  const profile = mkdtempSync(join(tmpdir(), 'rein-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.REIN_CHROMIUM || '/usr/bin/chromium',
    headless: true,
    acceptDownloads,
    viewport,
    args: [...FLAGS, ...args],
  });
  const page = context.pages()[0] || (await context.newPage());
  page.setDefaultTimeout(20000);
  const problems = [];
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(`console error: ${m.text()}`);
  });
  let failed = false;
  async function check(name, fn) {
    try {
      await fn();
      console.log(`ok   ${name}`);
    } catch (e) {
      failed = true;
      console.log(`FAIL ${name}: ${e.message.split('\n')[0]}`);
      await page.screenshot({ path: join(shots, `${prefix}failure-${name.replace(/\W+/g, '-')}.png`) }).catch(() => {});
    }
  }
  async function finish() {
    await context.close();
    rmSync(profile, { recursive: true, force: true });
    process.exit(failed ? 1 : 0);
  }
  return { context, page, problems, check, assert, finish };
}

/** Throws `message` unless `cond`. */
export function assert(cond, message) {
  if (!cond) throw new Error(message);
}
