// The web chat's Connect link for an MCP server behind OAuth, in headless Chromium; driven by
// rein-cli's `mcp_oauth` test against `rein serve` and a local authorization server that
// approves at once.
//
// usage: node oauth-connect.mjs <server-url> <screenshot-dir>
// Exits 0 when every check passed; prints one line per check.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const [url, shots] = process.argv.slice(2);
if (!url || !shots) {
  console.error('usage: node oauth-connect.mjs <server-url> <screenshot-dir>');
  process.exit(2);
}

const profile = mkdtempSync(join(tmpdir(), 'rein-chromium-'));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.REIN_CHROMIUM || '/usr/bin/chromium',
  headless: true,
  viewport: { width: 1200, height: 800 },
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
});
const page = context.pages()[0] || (await context.newPage());
page.setDefaultTimeout(20000);
const problems = [];
page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));

let failed = false;
async function check(name, fn) {
  try {
    await fn();
    console.log(`ok   ${name}`);
  } catch (e) {
    failed = true;
    console.log(`FAIL ${name}: ${e.message.split('\n')[0]}`);
    await page.screenshot({ path: join(shots, `failure-${name.replace(/\W+/g, '-')}.png`) }).catch(() => {});
  }
}
function assert(cond, message) {
  if (!cond) throw new Error(message);
}

const notice = page.locator('.mcp-needs-auth[data-server="secure"]');

await check('the chat says the server needs authorization, with a Connect link', async () => {
  await page.goto(url);
  await page.waitForSelector('body[data-ready="true"]');
  await notice.locator('a.mcp-connect', { hasText: 'Connect' }).waitFor();
  await page.screenshot({ path: join(shots, 'oauth-needs-auth.png') });
});

await check('Connect opens the authorization server, which sends the browser back to rein', async () => {
  const [tab] = await Promise.all([context.waitForEvent('page'), notice.locator('a.mcp-connect').click()]);
  await tab.waitForLoadState();
  await tab.getByText('Connected').first().waitFor();
  assert(tab.url().startsWith(new URL('/agent/api/runtime/mcp/oauth/callback', url).href), `back on rein (${tab.url()})`);
  const text = await tab.textContent('body');
  assert(text.includes('secure'), `the page names the server (${text})`);
  await tab.screenshot({ path: join(shots, 'oauth-connected.png') });
  await tab.close();
});

await check('the notice goes once the server is connected', async () => {
  await notice.waitFor({ state: 'detached', timeout: 30000 });
  assert(problems.length === 0, problems.join('; '));
});

await context.close();
rmSync(profile, { recursive: true, force: true });
process.exit(failed ? 1 : 0);
