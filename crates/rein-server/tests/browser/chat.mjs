// Drives rein's web chat in headless Chromium against a running server with a scripted model.
//
// usage: node chat.mjs <server-url> <screenshot-dir>
// The server runs the real runtime with a scripted model: "hello" calls `weather` then streams
// a Markdown answer; "approve me" calls the side-effecting `send_email` (which asks for
// approval) and starts a background `report` task; "block" never answers until stopped; a
// message starting with "echo " is answered with itself; anything else gets "Done.".
// Exits 0 when every check passed; prints one line per check.

import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const [url, shots] = process.argv.slice(2);
if (!url || !shots) {
  console.error('usage: node chat.mjs <server-url> <screenshot-dir>');
  process.exit(2);
}

const profile = mkdtempSync(join(tmpdir(), 'rein-chromium-'));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.REIN_CHROMIUM || '/usr/bin/chromium',
  headless: true,
  acceptDownloads: true,
  viewport: { width: 1200, height: 800 },
  args: [
    '--headless',
    '--no-sandbox',
    '--disable-gpu',
    '--disable-quic',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
  ],
});
const page = context.pages()[0] || (await context.newPage());
page.setDefaultTimeout(20000);

const problems = [];
page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
page.on('console', (m) => {
  if (m.type() === 'error') problems.push(`console error: ${m.text()}`);
});
// Offline: the page must never ask for anything outside the server.
const origin = new URL(url).origin;
page.on('request', (r) => {
  const u = r.url();
  if (!u.startsWith(origin) && !u.startsWith('blob:') && !u.startsWith('data:')) problems.push(`outside request: ${u}`);
});

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

const input = page.locator('#composer-input');
async function sendText(text) {
  await input.fill(text);
  await input.press('Enter');
}
const lastTurn = () => page.locator('.turn').last();

await check('page loads offline', async () => {
  await page.goto(url);
  await page.waitForSelector('body[data-ready="true"]');
  assert((await page.title()) === 'rein', 'title is rein');
  const models = await page.locator('#model-select option').count();
  assert(models >= 1, 'the model selector lists models');
});

await check('send and see streamed text', async () => {
  await sendText('hello');
  await lastTurn().locator('.answer', { hasText: 'Hello from the scripted model' }).waitFor();
  await page.waitForSelector('#send:not([hidden])');
  const deltas = await page.evaluate(() => window.rein.state.deltaCount);
  assert(deltas >= 2, `the answer streamed in pieces (saw ${deltas} text deltas)`);
  const strong = await lastTurn().locator('.answer strong').count();
  assert(strong === 1, 'the answer is rendered as Markdown');
  await page.screenshot({ path: join(shots, 'chat-answer.png') });
});

await check('open a tool call', async () => {
  const turn = lastTurn();
  await turn.locator('details.activity > summary').click();
  await turn.locator('.tool-item summary').first().click();
  const args = await turn.locator('.tool-args').first().textContent();
  assert(args.includes('"city"') && args.includes('Lisbon'), `arguments shown (${args})`);
  const result = await turn.locator('.tool-result').first().textContent();
  assert(result.includes('sunny'), `result shown (${result})`);
  await page.screenshot({ path: join(shots, 'tool-call.png') });
});

await check('approve a tool', async () => {
  await sendText('approve me');
  const card = page.locator('.approval').last();
  await card.waitFor();
  await card.locator('.approval-note').fill('looks fine');
  await page.screenshot({ path: join(shots, 'approval-prompt.png') });
  await card.locator('.approval-approve').click();
  await card.locator('.approval-state', { hasText: 'approved' }).waitFor();
  await page.waitForSelector('#send:not([hidden])');
});

await check('cancel a task in the tasks panel', async () => {
  const task = page.locator('#task-list li').first();
  await task.waitFor();
  await task.locator('.badge', { hasText: /running|pending/ }).waitFor();
  await task.locator('button', { hasText: 'Cancel' }).click();
  await task.locator('.badge', { hasText: 'cancelled' }).waitFor();
  await page.screenshot({ path: join(shots, 'task-cancelled.png') });
});

await check('stop a turn with the stop button and Esc', async () => {
  await sendText('block');
  await page.waitForSelector('#stop:not([hidden])');
  await lastTurn().locator('.bubble-user', { hasText: 'block' }).waitFor();
  await page.screenshot({ path: join(shots, 'running.png') });
  await page.keyboard.press('Escape');
  await lastTurn().locator('.ending', { hasText: 'Stopped' }).waitFor();
  await page.waitForSelector('#send:not([hidden])');
  await page.screenshot({ path: join(shots, 'stopped.png') });
});

await check('model text never runs script', async () => {
  await sendText('echo <img src=x onerror="window.__pwned=1"> [x](javascript:window.__pwned=2) <script>window.__pwned=3</script>');
  await lastTurn().locator('.answer', { hasText: 'echo' }).waitFor();
  await page.waitForSelector('#send:not([hidden])');
  const pwned = await page.evaluate(() => window.__pwned);
  assert(pwned === undefined, `script ran (${pwned})`);
  const bad = await page.locator('.answer img, .answer script, .answer a[href^="javascript"]').count();
  assert(bad === 0, 'no element from model text');
  const html = await page.evaluate(() =>
    window.rein.renderMarkdown('[ok](https://example.com/a?b=1&c="2") [no](javascript:alert(1)) <b>x</b>'),
  );
  assert(html.includes('href="https://example.com/a?b=1&amp;c=&quot;2&quot;"'), html);
  assert(!html.includes('javascript:alert(1)"') && !html.includes('<b>'), html);
});

await check('export Markdown and JSON with credentials scrubbed', async () => {
  await sendText('my key is sk-live1234567890abcdefXYZ and Bearer abcdefghijklmnop1234');
  await lastTurn().locator('.assistant.done').waitFor();
  await page.waitForSelector('#send:not([hidden])');
  for (const [button, name] of [['#export-md', 'md'], ['#export-json', 'json']]) {
    const [download] = await Promise.all([page.waitForEvent('download'), page.click(button)]);
    const path = await download.path();
    const text = readFileSync(path, 'utf8');
    assert(!text.includes('sk-live1234567890abcdefXYZ'), `${name} export leaks the sk- key`);
    assert(!text.includes('abcdefghijklmnop1234'), `${name} export leaks the bearer token`);
    assert(text.includes('[REDACTED]'), `${name} export marks what it removed`);
    assert(text.includes('hello'), `${name} export holds the conversation`);
    if (name === 'json') JSON.parse(text);
  }
});

await check('session list and a new chat', async () => {
  const sessions = await page.locator('#session-list li').count();
  assert(sessions >= 1, 'the chat is listed');
  const turns = await page.locator('.turn').count();
  assert(turns === 5, `each message is one turn (saw ${turns} turns for 5 messages)`);
  await page.click('#new-session');
  await page.waitForSelector('#welcome');
  await page.locator('#session-list button').first().click();
  await page.locator('.turn').first().waitFor();
  await page.locator('.turn').nth(4).locator('.assistant.done').waitFor();
  const replayed = await page.locator('.turn').count();
  assert(replayed === 5, `the reopened chat replays its 5 turns from the stream (saw ${replayed})`);
  await page.screenshot({ path: join(shots, 'reopened.png') });
});

await check('no page errors and no outside requests', async () => {
  assert(problems.length === 0, problems.join('; '));
});

await context.close();
rmSync(profile, { recursive: true, force: true });
process.exit(failed ? 1 : 0);
