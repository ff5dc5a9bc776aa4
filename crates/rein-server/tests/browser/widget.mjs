// Drives rein's embeddable widget in headless Chromium: a host page on another origin (listed
// in the server's `cors_origins`) adds `/widget.js` with one tag, registers a tool that paints
// its map and sets its view context; a turn reads the view context and calls the page's tool.
// The same page on an origin the server does not list gets no chat.
//
// Voice input: Chromium's fake microphone plays a WAV file, the server's (scripted)
// transcription model hears "paint the map", which lands in the composer.
//
// usage: node widget.mjs <allowed-host-url> <refused-host-url> <rein-url> <screenshot-dir> <speech.wav>
// Exits 0 when every check passed; prints one line per check.

import { join } from 'node:path';
import { launch } from './harness.mjs';

const [hostUrl, refusedUrl, reinUrl, shots, speech] = process.argv.slice(2);
if (!hostUrl || !refusedUrl || !reinUrl || !shots || !speech) {
  console.error('usage: node widget.mjs <allowed-host-url> <refused-host-url> <rein-url> <screenshot-dir> <speech.wav>');
  process.exit(2);
}

const { context, page, problems, check, assert, finish } = await launch({
  shots,
  prefix: 'widget-',
  viewport: { width: 1200, height: 860 },
  args: ['--use-fake-device-for-media-stream', '--use-fake-ui-for-media-stream',
    `--use-file-for-fake-audio-capture=${speech}`],
});
page.on('response', (r) => {
  if (r.status() >= 400) problems.push(`${r.status()} for ${r.url()}`);
});
// Only the host page and the rein server: nothing from outside.
const origins = [new URL(hostUrl).origin, new URL(refusedUrl).origin, new URL(reinUrl).origin];
page.on('request', (r) => {
  const u = r.url();
  if (!origins.some((o) => u.startsWith(o)) && !u.startsWith('blob:') && !u.startsWith('data:')) {
    problems.push(`outside request: ${u}`);
  }
});

// Playwright's CSS selectors pierce the widget's (open) shadow root.
const widget = page.locator('#rein-widget');

await check('the widget loads on a host page of an allowed origin', async () => {
  await page.goto(hostUrl);
  await page.waitForSelector('#rein-widget[data-ready="true"]', { state: 'attached' });
  await page.waitForSelector('body[data-view-context="set"]');
  assert(await page.locator('#rein-panel').isHidden(), 'the panel starts closed');
  await page.screenshot({ path: join(shots, 'widget-closed.png') });
});

const input = page.locator('#composer-input');

await check('voice input: the microphone records, the transcription lands in the composer', async () => {
  await page.click('#rein-launcher');
  await page.locator('#rein-panel').waitFor({ state: 'visible' });
  const mic = page.locator('#mic');
  await mic.waitFor({ state: 'visible' });
  await mic.click();
  await page.waitForSelector('#mic[aria-pressed="true"]');
  await page.waitForTimeout(1200);
  await page.screenshot({ path: join(shots, 'widget-recording.png') });
  await mic.click();
  await page.waitForFunction(() => {
    const box = document.getElementById('rein-widget').shadowRoot.getElementById('composer-input');
    return box && box.value === 'paint the map';
  });
});

await check('open, send, the turn reads the view context and runs the page tool', async () => {
  if (await page.locator('#rein-panel').isHidden()) await page.click('#rein-launcher');
  if ((await input.inputValue()) !== 'paint the map') await input.fill('paint the map');
  await input.press('Enter');
  await page.waitForSelector('#map[data-color="rgb(200, 30, 30)"]');
  const turn = widget.locator('.turn').last();
  await turn.locator('.assistant.done').waitFor();
  await turn.locator('.answer', { hasText: 'painted it red' }).waitFor();
  const background = await page.evaluate(() => getComputedStyle(document.getElementById('map')).backgroundColor);
  assert(background === 'rgb(200, 30, 30)', `the page tool painted the map (${background})`);
  await turn.locator('details.activity > summary').click();
  const activity = await turn.locator('.activity-list').textContent();
  assert(activity.includes('current_view_context') && activity.includes('set_map_color'), `both tools in the activity: ${activity}`);
  assert(activity.includes('Lisbon map') && activity.includes('Alfama'), `the view context reached the model: ${activity}`);
  assert(activity.includes('painted'), `the page tool's result reached the model: ${activity}`);
  await page.screenshot({ path: join(shots, 'widget-turn.png') });
});

await check('the widget closes and opens again', async () => {
  await page.click('#rein-close');
  await page.locator('#rein-panel').waitFor({ state: 'hidden' });
  await page.click('#rein-launcher');
  await page.locator('#rein-panel').waitFor({ state: 'visible' });
  const turns = await widget.locator('.turn').count();
  assert(turns === 1, `the conversation is still there (${turns} turns)`);
});

await check('no page errors and no outside requests', async () => {
  assert(problems.length === 0, problems.join('; '));
});

await check('an origin not in cors_origins gets no chat', async () => {
  const other = await context.newPage();
  const refusedErrors = [];
  other.on('console', (m) => {
    if (m.type() === 'error') refusedErrors.push(m.text());
  });
  await other.goto(refusedUrl);
  await other.waitForTimeout(1500);
  const ready = await other.locator('#rein-widget[data-ready="true"]').count();
  assert(ready === 0, 'the widget did not mount');
  assert(refusedErrors.some((t) => /CORS|Access-Control-Allow-Origin|Failed to fetch/i.test(t)), `the browser refused it: ${refusedErrors.join('; ')}`);
  await other.screenshot({ path: join(shots, 'widget-refused-origin.png') });
  await other.close();
});

await finish();
