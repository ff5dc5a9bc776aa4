// Unit tests of the web chat's event handling (`assets/app.js`), run with `node --test` in a
// jsdom document made from the page's own `index.html` (by the `page_event_handling_under_node_test`
// test of rein-server, or by hand). Events go in as the server streams them; what a person sees
// comes out.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

import { JSDOM } from 'jsdom';

const html = readFileSync(new URL('../../assets/index.html', import.meta.url), 'utf8');
const dom = new JSDOM(html, { url: 'http://127.0.0.1:8080/', pretendToBeVisual: true });
for (const name of ['window', 'document', 'localStorage', 'sessionStorage', 'requestAnimationFrame', 'HTMLElement', 'Node']) {
  globalThis[name] = dom.window[name];
}
// The chat refreshes its lists after a turn; nothing answers here.
globalThis.fetch = async () => new Response('{"sessions":[],"tasks":[],"approvals":[]}', {
  status: 200,
  headers: { 'content-type': 'application/json' },
});

const { eventRenderer } = await import('../../assets/app.js?embed');
const { handle, state } = eventRenderer(dom.window.document);
const $ = (selector) => dom.window.document.querySelector(selector);
const $$ = (selector) => [...dom.window.document.querySelectorAll(selector)];
const settle = () => new Promise((resolve) => setTimeout(resolve, 30));
const lastTurn = () => $$('.turn').at(-1);

test('a streamed answer is one turn with the text as Markdown', async () => {
  handle({ type: 'turn_started', text: 'hello' }, 1);
  handle({ type: 'message', message: { role: 'user', content: 'hello' } }, 2);
  handle({ type: 'text_delta', text: 'It is **sunny' }, 3);
  handle({ type: 'text_delta', text: '** today.' }, 4);
  await settle();
  handle({ type: 'message', message: { role: 'assistant', content: 'It is **sunny** today.' } }, 5);
  handle({ type: 'turn_end', ending: 'answered', text: 'It is **sunny** today.', usage: {} }, 6);
  await settle();
  const turn = lastTurn();
  assert.equal(turn.querySelector('.bubble-user').textContent, 'hello');
  assert.equal(turn.querySelector('.answer strong').textContent, 'sunny');
  assert.ok(turn.querySelector('.assistant').classList.contains('done'));
  assert.equal(turn.querySelector('.ending'), null, 'an answered turn has no ending badge');
  assert.equal(state.lastEventId, 6);
  assert.equal(state.deltaCount, 2);
});

test('a tool call goes proposed, running, done, with its arguments and result', async () => {
  const call = { id: 'c1', type: 'function', function: { name: 'weather', arguments: '{"city":"Lisbon"}' } };
  handle({ type: 'turn_started', text: 'weather?' });
  handle({ type: 'text_delta', text: 'Let me look.' });
  handle({ type: 'tool_proposal', calls: [call], text: 'Let me look.' });
  const item = () => lastTurn().querySelector('li:has(.tool-args)');
  assert.equal(lastTurn().querySelector('.tool-status').textContent, 'proposed');
  handle({ type: 'tool_started', call_id: 'c1', name: 'weather' });
  assert.equal(lastTurn().querySelector('.tool-status').textContent, 'running');
  handle({ type: 'tool_result', call_id: 'c1', name: 'weather', output: { text: 'sunny, 24 °C', is_error: false } });
  assert.equal(lastTurn().querySelector('.tool-status').textContent, 'done');
  assert.ok(lastTurn().querySelector('.tool-args').textContent.includes('Lisbon'));
  assert.equal(lastTurn().querySelector('.tool-result').textContent, 'sunny, 24 °C');
  assert.ok(item(), 'the call is an item of the activity');
  // Text streamed beside the calls was not the answer: it moves into the activity.
  assert.ok(lastTurn().querySelector('.activity-list').textContent.includes('Let me look.'));
  assert.equal(lastTurn().querySelector('.activity summary').textContent, 'Activity: 1 tool call');
  handle({ type: 'turn_end', ending: 'answered', text: 'Sunny in Lisbon.', usage: {} });
  await settle();
  assert.equal(lastTurn().querySelector('.answer').textContent.trim(), 'Sunny in Lisbon.');
});

test('notices, retries and a failed call show in the activity; a stop shows its ending', async () => {
  handle({ type: 'turn_started', text: 'try' });
  handle({ type: 'model_retry', attempt: 1, delay_ms: 2000, reason: '429 Too Many Requests' });
  handle({ type: 'notice', code: 'turn_recovered', message: 'The process running this turn stopped.' });
  const call = { id: 'c2', type: 'function', function: { name: 'send', arguments: '{}' } };
  handle({ type: 'tool_proposal', calls: [call], text: '' });
  handle({ type: 'tool_result', call_id: 'c2', name: 'send', output: { text: 'Outcome unknown', is_error: true } });
  handle({ type: 'turn_end', ending: 'interrupted', text: 'Stopped here.', usage: {} });
  await settle();
  const activity = lastTurn().querySelector('.activity-list').textContent;
  assert.ok(activity.includes('Retrying the model request in 2 s (attempt 1): 429 Too Many Requests'), activity);
  assert.ok(activity.includes('The process running this turn stopped.'), activity);
  assert.equal(lastTurn().querySelector('.tool-status').textContent, 'error');
  assert.ok(lastTurn().querySelector('.ending').textContent.includes('Stopped'));
});

test('reasoning streams into its own item, never into the answer', async () => {
  handle({ type: 'turn_started', text: 'think' });
  handle({ type: 'reasoning_delta', text: 'Weighing ' });
  handle({ type: 'reasoning_delta', text: 'options.' });
  handle({ type: 'text_delta', text: 'Done.' });
  handle({ type: 'turn_end', ending: 'answered', text: 'Done.', usage: {} });
  await settle();
  assert.ok(lastTurn().querySelector('.activity-list').textContent.includes('Weighing options.'));
  assert.equal(lastTurn().querySelector('.answer').textContent.trim(), 'Done.');
});

test('a runtime note inside a turn is activity, not a new turn', () => {
  const before = $$('.turn').length;
  handle({ type: 'turn_started', text: 'next' });
  handle({ type: 'message', message: { role: 'user', content: '[Background task t1 finished] report done' } });
  handle({ type: 'message', message: { role: 'user', content: 'next' } });
  assert.equal($$('.turn').length, before + 1);
  assert.ok(lastTurn().querySelector('.activity-list').textContent.includes('report done'));
  assert.ok($('#log'));
});
