// The web chat's Connect link for an MCP server behind OAuth, in headless Chromium; driven by
// rein-cli's `mcp_oauth` test against `rein serve` and a local authorization server that
// approves at once.
//
// usage: node oauth-connect.mjs <server-url> <screenshot-dir>
// Exits 0 when every check passed; prints one line per check.

import { join } from 'node:path';
import { launch } from './harness.mjs';

const [url, shots] = process.argv.slice(2);
if (!url || !shots) {
  console.error('usage: node oauth-connect.mjs <server-url> <screenshot-dir>');
  process.exit(2);
}

const { context, page, problems, check, assert, finish } = await launch({ shots, prefix: 'oauth-' });

const notice = page.locator('.mcp-needs-auth[data-server="secure"]');

await check('the chat says the server needs authorization, with a Connect link', async () => {
  await page.goto(url);
  await page.waitForSelector('body[data-ready="true"]');
  await notice.locator('a.mcp-connect', { hasText: 'Connect' }).waitFor();
  await page.screenshot({ path: join(shots, 'oauth-needs-auth.png') });
});

// Connect asks rein for the authorization (its answer sets the cookie that binds this browser
// to it: the callback refuses a browser without it), then sends the new tab to the URL.
await check('Connect opens the authorization server, which sends the browser back to rein', async () => {
  const [tab] = await Promise.all([context.waitForEvent('page'), notice.locator('a.mcp-connect').click()]);
  await tab.waitForLoadState();
  await tab.getByText('Connected').first().waitFor();
  assert(tab.url().startsWith(new URL('/agent/api/runtime/mcp/oauth/callback', url).href), `back on rein (${tab.url()})`);
  const text = await tab.textContent('body');
  assert(text.includes('secure'), `the page names the server (${text})`);
  assert(text.includes('\u201clocal\u201d'), `the page names the principal (${text})`);
  await tab.screenshot({ path: join(shots, 'oauth-connected.png') });
  await tab.close();
});

await check('the notice goes once the server is connected', async () => {
  await notice.waitFor({ state: 'detached', timeout: 30000 });
  assert(problems.length === 0, problems.join('; '));
});

await finish();
