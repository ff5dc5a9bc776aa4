// Unit tests of the web chat's questions of MCP servers (elicitation, in `assets/app.js`), run
// with `node --test` in a jsdom document made from the page's own `index.html` (by the
// `elicitation_form_under_node_test` test of rein-server, or by hand). The form is built from
// every keyword MCP's requested schema allows; a page is a link only when it is http(s).

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

import { JSDOM } from 'jsdom';

const html = readFileSync(new URL('../../assets/index.html', import.meta.url), 'utf8');
const dom = new JSDOM(html, { url: 'http://127.0.0.1:8080/', pretendToBeVisual: true });
for (const name of ['window', 'document', 'localStorage', 'sessionStorage', 'requestAnimationFrame', 'HTMLElement', 'Node', 'Option']) {
  globalThis[name] = dom.window[name];
}
// What the page posts; every call answers with an empty list or object.
const posted = [];
globalThis.fetch = async (path, init = {}) => {
  if (init.method === 'POST') posted.push({ path, body: JSON.parse(init.body) });
  return new Response('{"pending":[]}', { status: 200, headers: { 'content-type': 'application/json' } });
};

const { handle, state, webLink } = (await import('../../assets/app.js?embed')).eventRenderer(dom.window.document);
const $$ = (selector) => [...dom.window.document.querySelectorAll(selector)];
const settle = () => new Promise((resolve) => setTimeout(resolve, 30));
state.sessionId = 's1';

const ask = (id, fields) => {
  handle({ type: 'turn_started', text: 'ask me' });
  handle({ type: 'elicitation_requested', elicitation_id: id, server: 'srv', message: 'Tell me.', ...fields });
  return $$(`form.elicitation`).find((form) => form.dataset.elicitationId === id);
};

test('only an http(s) page with a host and no user name is a link', () => {
  for (const url of ['https://pay.example/checkout?order=7', 'http://127.0.0.1:9/x', 'HTTPS://PAY.EXAMPLE/']) {
    assert.ok(webLink(url), url);
  }
  for (const url of ['javascript:alert(1)', ' javascript:alert(1)', 'JaVaScRiPt:alert(1)', 'data:text/html,<b>x</b>',
    'vbscript:x', 'file:///etc/passwd', '/relative', '', 'https://bank.example@evil.example/', 'https://u:p@pay.example/']) {
    assert.equal(webLink(url), null, url);
  }
});

test('a question whose page is not http(s) shows no link; an https one shows its host', () => {
  const evil = ask('e-js', { url: 'javascript:alert(document.cookie)', requested_schema: {} });
  assert.equal(evil.querySelector('a'), null, 'no link');
  assert.ok(!evil.innerHTML.includes('javascript:'), evil.innerHTML);
  const page = ask('e-https', { url: 'https://pay.example/checkout?order=7', requested_schema: {} });
  const link = page.querySelector('a.elicitation-link');
  assert.equal(link.href, 'https://pay.example/checkout?order=7');
  assert.equal(link.target, '_blank');
  assert.ok(link.rel.includes('noopener'));
  assert.equal(page.querySelector('.elicitation-host').textContent, 'Opens a page on pay.example');
});

test('a form of every keyword: inputs typed and bounded, choices labelled, values sent as the schema has them', async () => {
  const form = ask('e-form', {
    requested_schema: {
      type: 'object',
      properties: {
        name: { type: 'string', title: 'Name', minLength: 2, maxLength: 10 },
        email: { type: 'string', format: 'email' },
        site: { type: 'string', format: 'uri' },
        born: { type: 'string', format: 'date' },
        meet: { type: 'string', format: 'date-time' },
        age: { type: 'integer', minimum: 18, maximum: 130 },
        size: { type: 'string', enum: ['s', 'm'], enumNames: ['Small', 'Medium'] },
        color: { type: 'string', oneOf: [{ const: '#f00', title: 'Red' }, { const: '#00f', title: 'Blue' }] },
        tags: { type: 'array', items: { type: 'string', enum: ['a', 'b', 'c'] }, default: ['b'] },
        pets: { type: 'array', items: { anyOf: [{ const: 'cat', title: 'Cat' }, { const: 'dog', title: 'Dog' }] } },
        ok: { type: 'boolean', default: true },
      },
      required: ['name', 'email'],
    },
  });
  const input = (name) => form.querySelector(`[name="${name}"]`);
  assert.equal(input('name').minLength, 2);
  assert.equal(input('name').maxLength, 10);
  assert.ok(input('name').required);
  assert.equal(input('email').type, 'email');
  assert.equal(input('site').type, 'url');
  assert.equal(input('born').type, 'date');
  assert.equal(input('meet').type, 'text');
  assert.equal(input('meet').placeholder, '2025-11-25T09:30:00Z');
  assert.equal(input('age').type, 'number');
  assert.equal([input('age').min, input('age').max, input('age').step].join(' '), '18 130 1');
  const labels = (name) => [...input(name).options].map((option) => option.textContent);
  assert.deepEqual(labels('size'), ['', 'Small', 'Medium']);
  assert.deepEqual(labels('color'), ['', 'Red', 'Blue']);
  const boxes = (name) => $$(`form.elicitation [name="${name}"]`).filter((box) => box.closest('form') === form);
  assert.deepEqual(boxes('tags').map((box) => [box.value, box.checked]), [['a', false], ['b', true], ['c', false]]);
  assert.deepEqual(boxes('pets').map((box) => box.parentElement.textContent.trim()), ['Cat', 'Dog']);

  input('name').value = 'Ada';
  input('email').value = 'ada@example.org';
  input('age').value = '36';
  input('size').value = 's';
  input('color').value = '#00f';
  boxes('tags')[0].checked = true;
  boxes('pets')[1].checked = true;
  form.querySelector('.elicitation-accept').click();
  await settle();
  const answer = posted.find((post) => post.path.endsWith('/elicitations/e-form'));
  assert.ok(answer, JSON.stringify(posted));
  assert.deepEqual(answer.body, {
    action: 'accept',
    content: { name: 'Ada', email: 'ada@example.org', age: 36, size: 's', color: '#00f', tags: ['a', 'b'], pets: ['dog'], ok: true },
  });
});
