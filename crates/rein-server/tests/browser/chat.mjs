// Drives rein's web chat in headless Chromium against a running server with a scripted model.
//
// usage: node chat.mjs <server-url> <screenshot-dir>
// The server runs the real runtime with a scripted model: "hello" calls `weather` then streams
// a Markdown answer; "approve me" calls the side-effecting `send_email` (which asks for
// approval) and starts a background `report` task ("email for the session" too, and "email
// again" sends one more); "block" never answers until stopped; "greet me" calls `ask_name`,
// which asks the person's name in a form (elicitation) and greets them; a
// message starting with "echo " is answered with itself; anything else gets "Done.".
// Exits 0 when every check passed; prints one line per check.

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { launch } from './harness.mjs';

const [url, shots] = process.argv.slice(2);
if (!url || !shots) {
  console.error('usage: node chat.mjs <server-url> <screenshot-dir>');
  process.exit(2);
}

const { page, problems, check, assert, finish } = await launch({ shots, acceptDownloads: true });
// Offline: the page must never ask for anything outside the server.
const origin = new URL(url).origin;
page.on('request', (r) => {
  const u = r.url();
  if (!u.startsWith(origin) && !u.startsWith('blob:') && !u.startsWith('data:')) problems.push(`outside request: ${u}`);
});

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
  assert(await page.locator('#mic').isHidden(), 'no microphone without a transcription model');
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
    assert(text.includes('[redacted]'), `${name} export marks what it removed`);
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

// ---------------------------------------------------------------------------------------------
// Agents and models (issue 15, items 7 and 8). The server has two agents: `assistant` (the
// first, on the default model `scripted`) and `second`, whose own model `other` answers
// "Answered by the other model." to anything; its model check reports the default model
// unreachable. These checks run after the others, as they make chats of their own.

/** The open chat as the server has it. */
async function openSession() {
  return page.evaluate(async () => {
    const id = window.rein.state.sessionId;
    const response = await fetch(`/agent/api/runtime/sessions/${encodeURIComponent(id)}`);
    return response.json();
  });
}

await check('agent picker: a new chat starts with the picked agent on its own model', async () => {
  await page.click('#new-session');
  await page.waitForSelector('#welcome');
  const names = await page.locator('#agent-select option').allTextContents();
  assert(names.join(',') === 'assistant,second', `the picker lists the agents (${names})`);
  assert(await page.locator('#agent-select').isEnabled(), 'a new chat may pick its agent');
  await page.selectOption('#agent-select', 'second');
  const shown = await page.inputValue('#model-select');
  assert(shown === 'other', `the model shown is the agent's own (${shown})`);
  await sendText('which model are you?');
  await lastTurn().locator('.answer', { hasText: 'Answered by the other model.' }).waitFor();
  await page.waitForSelector('#send:not([hidden])');
  const session = await openSession();
  assert(session.agentName === 'second', `created for the picked agent (${session.agentName})`);
  assert(session.runtimeModel.modelRef === 'other', `on the agent's model (${session.runtimeModel.modelRef})`);
  assert(await page.locator('#agent-select').isDisabled(), 'an open chat keeps its agent');
  await page.screenshot({ path: join(shots, 'agent-picked.png') });
});

await check("agent picker: a model picked for a new chat wins over the agent's", async () => {
  await page.click('#new-session');
  await page.waitForSelector('#welcome');
  const agent = await page.inputValue('#agent-select');
  assert(agent === 'second', `the picker keeps the agent picked last (${agent})`);
  const shown = await page.inputValue('#model-select');
  assert(shown === 'other', `and shows its model again (${shown})`);
  await page.selectOption('#model-select', 'scripted');
  await sendText('echo picked by hand');
  await lastTurn().locator('.answer', { hasText: 'picked by hand' }).waitFor();
  await page.waitForSelector('#send:not([hidden])');
  const session = await openSession();
  assert(session.agentName === 'second', `still the picked agent (${session.agentName})`);
  assert(session.runtimeModel.modelRef === 'scripted', `on the picked model (${session.runtimeModel.modelRef})`);
});

await check('model banner: says what to do when the default model does not answer', async () => {
  const banner = page.locator('#model-banner');
  await banner.waitFor({ state: 'visible' });
  const text = await banner.textContent();
  assert(text.includes('http://127.0.0.1:9/v1'), `the banner names the endpoint (${text})`);
  assert(text.includes('cargo xtask llama serve'), `and the fix (${text})`);
  assert((await banner.getAttribute('role')) === 'alert', 'announced to screen readers');
  await page.reload();
  await page.waitForSelector('body[data-ready="true"]');
  await page.waitForSelector('body[data-model-state="unreachable"]');
  assert(await banner.isVisible(), 'shown again after a reload');
  await page.screenshot({ path: join(shots, 'model-banner.png') });
});

// ---------------------------------------------------------------------------------------------

// ---------------------------------------------------------------------------------------------
// Approval scopes and the tasks panel (issue 15, items 2 and 3): an approval "for this tool, in
// this session" lets the next call of the tool run without asking; a running task shows the
// stage its handler reported.

await check('approval scope: approved for the session, the next call does not ask', async () => {
  await page.click('#new-session');
  await page.waitForSelector('#welcome');
  await page.selectOption('#agent-select', 'assistant');
  await sendText('email for the session');
  const card = page.locator('.approval').last();
  await card.waitFor();
  const scopes = await card.locator('.approval-scope option').evaluateAll((os) => os.map((o) => o.value));
  assert(scopes.join(',') === 'once,session,always', `the scopes offered (${scopes})`);
  await card.locator('.approval-scope').selectOption('session');
  await page.screenshot({ path: join(shots, 'approval-scope.png') });
  await card.locator('.approval-approve').click();
  await card.locator('.approval-state', { hasText: 'approved' }).waitFor();
  assert(await card.locator('.approval-scope').isDisabled(), 'a decided approval keeps its scope');
  await lastTurn().locator('.answer', { hasText: 'started the report' }).waitFor();
  await lastTurn().locator('.assistant.done').waitFor();
  await page.waitForSelector('#send:not([hidden])');
  await sendText('email again');
  await lastTurn().locator('.answer', { hasText: 'Sent again.' }).waitFor();
  await page.waitForSelector('#send:not([hidden])');
  const asked = await lastTurn().locator('.approval').count();
  assert(asked === 0, `the second email did not ask (${asked} approval cards)`);
});

await check('tasks panel: a running task shows its stage and can be cancelled', async () => {
  const task = page.locator('#task-list li').first();
  await task.waitFor();
  await task.locator('.t-stage', { hasText: 'writing the outline' }).waitFor();
  await page.screenshot({ path: join(shots, 'task-stage.png') });
  await task.locator('button', { hasText: 'Cancel' }).click();
  await task.locator('.badge', { hasText: 'cancelled' }).waitFor();
});

await check('a streamed reply with <think> and an embedded call shows no markup', async () => {
  // Every state of the conversation while the reply streams, as the person sees it.
  await page.evaluate(() => {
    window.__seen = [];
    const log = document.querySelector('#log');
    window.__observer = new MutationObserver(() => window.__seen.push(log.textContent));
    window.__observer.observe(log, { subtree: true, childList: true, characterData: true });
  });
  await sendText('think aloud');
  await lastTurn().locator('.answer', { hasText: 'It is sunny in Porto.' }).waitFor();
  await page.waitForSelector('#send:not([hidden])');
  const seen = await page.evaluate(() => {
    window.__observer.disconnect();
    return window.__seen;
  });
  assert(seen.length > 5, `the reply streamed (${seen.length} states)`);
  assert(seen.some((text) => text.includes('Let me check the weather.')), 'the text before the call streamed');
  const leaked = seen.find((text) => /<\/?think|tool_call|"name"\s*:/.test(text));
  assert(!leaked, `markup shown while streaming: ${leaked && leaked.slice(-160)}`);
  const turn = lastTurn();
  await turn.locator('details.activity > summary').click();
  const reasoning = await turn.locator('.reasoning-text').first().textContent();
  assert(reasoning.includes('I will look it up.'), `the reasoning is folded into the activity (${reasoning})`);
  await page.screenshot({ path: join(shots, 'streamed-markup-free.png') });
});

await check('a retried model request is shown in the turn', async () => {
  await sendText('retry please');
  await lastTurn().locator('.answer', { hasText: 'Done.' }).waitFor();
  await lastTurn().locator('details.activity > summary').click();
  const notice = lastTurn().locator('.notice', { hasText: 'Retrying the model request in 1 s (attempt 2)' });
  await notice.waitFor();
  assert((await notice.textContent()).includes('HTTP 503: the model is overloaded'), 'the reason is shown');
  await page.waitForSelector('#send:not([hidden])');
});

await check('answer an MCP server\'s question in its form', async () => {
  await sendText('greet me');
  const form = page.locator('form.elicitation').last();
  await form.waitFor();
  assert((await form.locator('.elicitation-message').textContent()) === 'Who are you?', 'the question is shown');
  // The schema's required `name` (titled "Your name") and the optional integer `age`.
  await form.locator('label', { hasText: 'Your name *' }).waitFor();
  assert((await form.locator('input[name="age"]').getAttribute('type')) === 'number', 'an integer field is a number input');
  await form.locator('.elicitation-accept').click();
  assert(await form.locator('input[name="name"]').evaluate((i) => !i.validity.valid), 'a required field is required');
  await form.locator('input[name="name"]').fill('Ada');
  await form.locator('input[name="age"]').fill('36');
  await page.screenshot({ path: join(shots, 'elicitation-form.png') });
  await form.locator('.elicitation-accept').click();
  await form.locator('.elicitation-state', { hasText: 'Answered' }).waitFor();
  assert(await form.locator('input[name="name"]').isDisabled(), 'an answered form is closed');
  await lastTurn().locator('.answer', { hasText: 'Greeted.' }).waitFor();
  await lastTurn().locator('details.activity > summary').click();
  await lastTurn().locator('.tool-item summary').first().click();
  const result = await lastTurn().locator('.tool-result').first().textContent();
  assert(result.includes('Hello, Ada!'), `the server got the answer (${result})`);
  await page.waitForSelector('#send:not([hidden])');
});

// ---------------------------------------------------------------------------------------------

await check('no page errors and no outside requests', async () => {
  assert(problems.length === 0, problems.join('; '));
});

await finish();
