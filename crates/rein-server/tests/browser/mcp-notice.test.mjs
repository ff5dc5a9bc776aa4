// Unit tests of the web chat's MCP notice (`showMcpServers` in `assets/app.js`), run with
// `node --test` in a jsdom document made from the page's own `index.html` (by the
// `mcp_notice_under_node_test` test of rein-server, or by hand).

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

import { JSDOM } from 'jsdom';

const html = readFileSync(new URL('../../assets/index.html', import.meta.url), 'utf8');
const dom = new JSDOM(html, { url: 'http://127.0.0.1:8080/', pretendToBeVisual: true });
for (const name of ['window', 'document', 'localStorage', 'sessionStorage', 'requestAnimationFrame', 'HTMLElement', 'Node']) {
  globalThis[name] = dom.window[name];
}
globalThis.fetch = async () => new Response('{}', { status: 200, headers: { 'content-type': 'application/json' } });

const { showMcpServers } = (await import('../../assets/app.js?embed')).eventRenderer(dom.window.document);
const $ = (selector) => dom.window.document.querySelector(selector);
const $$ = (selector) => [...dom.window.document.querySelectorAll(selector)];

test('a server that needs auth has a Connect link opening its authorization URL', () => {
  const url = 'https://auth.example/authorize?client_id=c&state=s1';
  const waiting = showMcpServers([
    { name: 'ok', status: 'connected', tools: ['a'], lastError: null },
    { name: 'down', status: 'failed', tools: [], lastError: 'connection refused' },
    { name: 'gh', status: 'needs_auth', tools: [], lastError: null, authorizationUrl: url },
  ]);
  assert.equal(waiting, true, 'the list is polled faster while one waits');
  assert.equal($('#mcp-notice').hidden, false);
  assert.equal($('.mcp-down').textContent, 'MCP server down is down: connection refused');
  const line = $('.mcp-needs-auth');
  assert.equal(line.dataset.server, 'gh');
  assert.ok(line.textContent.startsWith('MCP server gh needs authorization.'), line.textContent);
  const link = line.querySelector('a.mcp-connect');
  assert.equal(link.textContent, 'Connect');
  assert.equal(link.href, url);
  assert.equal(link.target, '_blank');
  assert.ok(link.rel.includes('noopener'));
  assert.equal(document.body.dataset.mcpNeedsAuth, 'gh');
});

test('an authorization URL that is not http(s) gets no link', () => {
  showMcpServers([{ name: 'evil', status: 'needs_auth', tools: [], lastError: null, authorizationUrl: 'javascript:alert(1)' }]);
  assert.equal($$('.mcp-needs-auth').length, 1);
  assert.equal($('.mcp-needs-auth a'), null);
});

test('once connected the notice goes', () => {
  const waiting = showMcpServers([{ name: 'gh', status: 'connected', tools: ['t'], lastError: null }]);
  assert.equal(waiting, false);
  assert.equal($('#mcp-notice').hidden, true);
  assert.equal($$('.mcp-needs-auth').length, 0);
  assert.equal(document.body.dataset.mcpNeedsAuth, '');
});

test('Connect asks rein for the authorization, then sends a new tab cut from the chat to its URL', async () => {
  const shown = 'https://auth.example/authorize?client_id=c&state=s3';
  const calls = [];
  const saved = globalThis.fetch;
  globalThis.fetch = async (url, init) => {
    calls.push([init.method, url]);
    const body = { server: 'gh', authorizationUrl: shown, expiresInSeconds: 200 };
    return new Response(JSON.stringify(body), { status: 200, headers: { 'content-type': 'application/json' } });
  };
  const tab = { opener: 'the chat', location: { href: '' }, close() {} };
  dom.window.open = () => tab;
  try {
    showMcpServers([{ name: 'gh', status: 'needs_auth', tools: [], lastError: null, authorizationUrl: shown }]);
    $('a.mcp-connect').click();
    for (let i = 0; i < 50 && !tab.location.href; i++) await new Promise((done) => setTimeout(done, 10));
    assert.deepEqual(calls, [['POST', '/agent/api/runtime/mcp/servers/gh/connect']]);
    assert.equal(tab.opener, null, 'the authorization server cannot reach back into the chat');
    assert.equal(tab.location.href, shown);
  } finally {
    globalThis.fetch = saved;
  }
});

test('a Connect that fails closes its tab and says why', async () => {
  const saved = globalThis.fetch;
  globalThis.fetch = async () =>
    new Response(JSON.stringify({ error: { code: 'mcp_authorization_not_found', message: 'nothing waits' } }), {
      status: 404,
      headers: { 'content-type': 'application/json' },
    });
  let closed = false;
  dom.window.open = () => ({ opener: null, location: { href: '' }, close() { closed = true; } });
  try {
    showMcpServers([{ name: 'gh', status: 'needs_auth', tools: [], lastError: null, authorizationUrl: 'https://auth.example/a?state=s' }]);
    $('a.mcp-connect').click();
    for (let i = 0; i < 50 && !closed; i++) await new Promise((done) => setTimeout(done, 10));
    assert.ok(closed);
    assert.equal($('.mcp-connect-failed').textContent, ' Could not connect: nothing waits');
  } finally {
    globalThis.fetch = saved;
  }
});
