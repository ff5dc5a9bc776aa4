// Unit tests of the web chat's Markdown renderer (`assets/markdown.js`), run with `node --test`
// (by the `markdown_renderer_under_node_test` test of rein-server, or by hand).

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { escapeHtml, renderMarkdown } from '../../assets/markdown.js';

test('nested lists stay nested', () => {
  assert.equal(
    renderMarkdown('- a\n  - b\n    - c\n  - d\n- e'),
    '<ul><li>a<ul><li>b<ul><li>c</li></ul></li><li>d</li></ul></li><li>e</li></ul>',
  );
  assert.equal(renderMarkdown('1. one\n   - sub\n2. two'), '<ol><li>one<ul><li>sub</li></ul></li><li>two</li></ol>');
});

test('a fenced code block in a list item is code, not backticks', () => {
  const html = renderMarkdown('1. Run:\n   ```sh\n   ls -l <dir>\n   ```\n2. Done');
  assert.equal(html, '<ol><li>Run:<pre><code class="language-sh">ls -l &lt;dir&gt;</code></pre></li><li>Done</li></ol>');
  assert.ok(!html.includes('```'));
});

test('blank lines between items keep one list', () => {
  assert.equal(renderMarkdown('- one\n\n- two'), '<ul><li>one</li><li>two</li></ul>');
});

test('tables', () => {
  assert.equal(
    renderMarkdown('| a | b |\n|---|:-:|\n| 1 | **2** |'),
    '<table><thead><tr><th>a</th><th>b</th></tr></thead><tbody><tr><td>1</td><td><strong>2</strong></td></tr></tbody></table>',
  );
});

test('links: http(s) only, escaped', () => {
  const html = renderMarkdown('[ok](https://example.com/a?b=1&c="2") [no](javascript:alert(1))');
  assert.ok(html.includes('href="https://example.com/a?b=1&amp;c=&quot;2&quot;"'), html);
  assert.ok(!html.includes('href="javascript'), html);
});

test('escaping: model text never becomes markup', () => {
  assert.equal(renderMarkdown('<script>alert(1)</script>'), '<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>');
  assert.equal(renderMarkdown('- <img src=x onerror=alert(1)>'), '<ul><li>&lt;img src=x onerror=alert(1)&gt;</li></ul>');
  assert.equal(escapeHtml(`&<>"'`), '&amp;&lt;&gt;&quot;&#39;');
});

test('inline code, emphasis, headings and paragraphs', () => {
  assert.equal(renderMarkdown('# Title'), '<h1>Title</h1>');
  assert.equal(renderMarkdown('a `<b>` **c** _d_'), '<p>a <code>&lt;b&gt;</code> <strong>c</strong> <em>d</em></p>');
  assert.equal(renderMarkdown('line one\nline two\n\nnext'), '<p>line one<br>line two</p>\n<p>next</p>');
});
